// The runtime API: load an ONNX model once, run it in sessions
// (runtime/session.h), or import it into a graph of your own to train it.
//
//   auto model = onyx::Model::load("model.onnx");        // parsed once, weights shared
//   onyx::Session session(model, {onyx::cpu(), 2});     // device, threads
//   auto out = session.run({{"input", tensor}});         // named inputs -> named outputs
//
// A Model is immutable after load(): sessions share its weights and never
// write to them.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onyx/converters/onnx_importer.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/graph/passes/passes.h>

namespace onyx {

struct OnnxModelFile;
class ExpressionGraph;

// A graph input or output as the model declares it.
struct ValueInfo {
  std::string name;
  std::string kind = "tensor";      // "tensor", "sequence", "optional", "map", "sequence_of_maps"
  Type type = Type::undefined;      // element type (of the tensor / sequence elements / map values)
  Type keyType = Type::undefined;   // maps: the key type (int64 or string)
  std::vector<int64_t> dims;        // -1 for a symbolic or unknown dim
  std::vector<std::string> dimNames;  // symbolic names ("" if none)
  bool hasShape = false;
  std::string describe() const;     // "float32[N,3,224,224]"
};

// What the model file says about itself (onnxruntime's ModelMetadata).
struct ModelMeta {
  std::string producerName, producerVersion, domain, docString;
  int64_t version = 0;                       // model_version
  std::string graphName, graphDescription;   // the graph's name and doc string
  std::map<std::string, std::string> customMetadata;  // metadata_props
};

class Model {
public:
  static std::shared_ptr<Model> load(const std::string& path);
  // A model held in memory (a serialized ModelProto): `name` stands for the
  // file in error messages; external data is read relative to `dir`.
  static std::shared_ptr<Model> fromBytes(const std::string& bytes, const std::string& name = "<model bytes>",
                                          const std::string& dir = ".");
  ModelMeta meta() const;
  const std::string& path() const;
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers, decoded once (read-only: shared by every session).
  const std::map<std::string, Tensor>& initializers() const { return initializers_; }
  int opset(const std::string& domain = "") const;
  const OnnxModelFile& file() const { return *file_; }
  // What load() noticed but accepted, one line each (an input dim_value of
  // 0 or less, read as unknown); also logged when logging is on. The tools
  // print them to stderr.
  const std::vector<std::string>& warnings() const { return warnings_; }

private:
  static std::shared_ptr<Model> fromFile(std::shared_ptr<OnnxModelFile> file);
  std::shared_ptr<OnnxModelFile> file_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::map<std::string, Tensor> initializers_;
  std::vector<std::string> warnings_;
};

// A value passed to or returned by a session: a tensor, a sequence of
// tensors, an absent optional, a map (keys in `tensor`, values in
// `mapValues`, both [K]) or a sequence of maps sharing their keys (keys [K],
// values [N, K]) (host memory).
struct HostValue {
  OnnxValue::Kind kind = OnnxValue::Kind::None;
  Tensor tensor;
  Tensor mapValues;
  std::vector<Tensor> sequence;
  Type elemType = Type::undefined;
  static HostValue of(Tensor t) { HostValue v; v.kind = OnnxValue::Kind::Tensor; v.tensor = std::move(t); return v; }
  static HostValue seq(std::vector<Tensor> s, Type t = Type::undefined) {
    HostValue v; v.kind = OnnxValue::Kind::Sequence; v.sequence = std::move(s); v.elemType = t; return v;
  }
  static HostValue none(Type t = Type::undefined) { HostValue v; v.elemType = t; return v; }
  static HostValue map(Tensor keys, Tensor values, OnnxValue::Kind k = OnnxValue::Kind::Map) {
    HostValue v; v.kind = k; v.tensor = std::move(keys); v.mapValues = std::move(values); return v;
  }
};
using HostValues = std::map<std::string, HostValue>;

// The model imported into `graph` for these inputs: tensors become input
// nodes of their shapes bound to them (in the model's input order, so that an
// exported graph declares its inputs in that order too); sequences and
// optionals become constants. The result (converters/onnx_importer.h) holds
// the outputs by name and a GraphSpec for saving (native) or exporting, with
// the model's symbolic input dims, graph name and doc strings kept.
// valueDependent: the structure read input values (NonZero, If on an input,
// ...), so the graph holds for these values only.
//
// Training (trainable, with the graph not in inference mode): the float
// initializers are trainable params, and layers with running statistics use
// batch statistics; stateUpdates lists the buffers (BatchNormalization's
// running mean and variance, non-trainable params) with their values after
// this batch. Call applyStateUpdates after forward() to keep them.
//
// Sessions build their graphs with it too. It is the runtime's side of the
// import (Model and HostValues are runtime types); the import itself is
// converters' importOnnxGraph.
ImportedGraph importGraph(const Model& model, ExpressionGraph& graph, const HostValues& inputs, bool trainable = false);

// The training fusions (optimizeTrainingGraph) on a graph importGraph built
// for training, keeping what `imported` holds: every tensor output and the
// buffers' next values. Call it after importGraph and before building the
// loss and forward(); returns the passes that fired. Gradients are those of
// the unfused graph up to float rounding (gelu and its gradient are each
// one kernel).
PassCounts optimizeForTraining(ExpressionGraph& graph, const ImportedGraph& imported,
                               const std::vector<std::string>& disabled = {});

}  // namespace onyx
