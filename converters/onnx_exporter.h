// ExpressionGraph -> ONNX. Walks the nodes that the outputs need, in build
// order; every op exports itself through its registry entry (see
// graph/onnx_export.h); params and constants become initializers, input nodes
// graph inputs (with symbolic dims where the spec names them).
//
//   GraphSpec spec;
//   spec.outputs = {{"logits", y}};
//   spec.dimNames["x"] = {"batch", ""};        // x's axis 0 stays symbolic
//   auto r = exportOnnx(spec, {});              // opset 17 unless a node needs more
//   checkOnnxModel(r.model, "mlp.onnx");        // onnx/checker.h: ONNX checker + shape inference
//   writeOnnxModel("mlp.onnx", r);              // onnx/writer.h: temp file + rename
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <onyx/graph/expression_graph.h>
#include <onyx/onnx/writer.h>

namespace onyx {

// What a graph file holds: named outputs, how inputs' axes are named, and
// descriptive fields kept from an imported model.
struct GraphSpec {
  std::vector<std::pair<std::string, Expr>> outputs;
  // Outputs that are sequences of tensors (exported as SequenceConstruct, or
  // SequenceEmpty of elemType), after the tensor outputs.
  struct Sequence {
    std::vector<Expr> items;
    Type elemType = Type::undefined;
  };
  std::vector<std::pair<std::string, Sequence>> sequenceOutputs;
  // Outputs of an imported model that are absent optionals: no graph file
  // holds one, so exporting or saving the spec fails naming them.
  std::vector<std::string> absentOutputs;
  // Outputs of an imported model that are maps or sequences of maps
  // (ZipMap's): not exported yet, so exporting or saving fails naming them.
  std::vector<std::string> mapOutputs;
  // Input name -> one entry per axis: a symbolic dim name, or "" for a fixed dim.
  std::map<std::string, std::vector<std::string>> dimNames;
  std::string graphName = "onyx";
  std::string docString;       // the model's doc string
  std::string producerName = "onyx";
  std::string producerVersion;
  std::map<std::string, std::string> nodeDocStrings;  // by output value name
};

struct ExportOptions {
  int opset = 0;  // target opset of the default domain; 0: 17, or the lowest that every node supports above it
  // Initializers of at least this many bytes go to an external data file
  // next to the model (-1: never).
  int64_t externalDataThreshold = -1;
  std::string externalDataFile;  // its name, relative to the model (default: <model file name>.data)
  // The data file's name carries the CRC-32 of its bytes before the
  // extension (big.onnx.data -> big.onnx.1a2b3c4d.data): a model and its data
  // are then replaced as a pair, since a new export never writes over the
  // file an older model reads (onnx-export; docs/cli.md).
  bool fingerprintDataFile = false;
};

// The model's bytes (what writeOnnxModel writes) and what it holds.
struct ExportResult : OnnxModelBytes {
  int opset = 0;
  int64_t irVersion = 0;
  std::map<std::string, int> nodesByType;  // ONNX op type -> count
  int64_t initializers = 0, initializerBytes = 0;
};

// Names every node the outputs need, deterministically and uniquely: input
// nodes and params keep theirs, output nodes take the output name, named
// nodes keep theirs, others become "<op>_<k>". Shared by the ONNX exporter and
// the native format so that a round trip converges on the same names.
std::vector<std::pair<Node*, std::string>> nameGraphNodes(const GraphSpec& spec);

// A param's or constant's value in host memory (computed if not yet).
Tensor nodeHostValue(Node* n);

// Throws onyx::Error naming the node and op when a node cannot be exported.
ExportResult exportOnnx(const GraphSpec& spec, const ExportOptions& options = {});

}  // namespace onyx
