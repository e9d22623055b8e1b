// Reading ONNX files: parsing and validating a model file's header (IR
// version, opsets, a graph) and reading serialized TensorProto files. The
// protobuf binding is the system ONNX package's (`onnx_proto`), never
// generated code checked in here.
#pragma once
#include <map>
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include <onyx/core/tensor.h>

namespace onyx {

// A parsed, validated model file. Immutable once loaded: sessions share it.
// How deep subgraphs (If/Loop/Scan bodies) may nest: the file's parse
// allows that much protobuf nesting (three messages a level), and the
// importer checks it, each with a one-line error naming the limit.
constexpr int kMaxSubgraphDepth = 100;

struct OnnxModelFile {
  std::string path;     // as given
  std::string dir;      // the folder holding the model (external data lives under it)
  ::onnx::ModelProto proto;
  std::map<std::string, int> opsets;  // domain ("" for ai.onnx) -> version
  int opset(const std::string& domain) const;  // -1 if the model does not import the domain
};

// Reads `path`, parses it and checks the header (IR version, opsets, a graph).
// Every failure is a one-line onyx::Error naming the file.
std::shared_ptr<OnnxModelFile> loadOnnxModel(const std::string& path);
// Parses a model from memory (`where` names it in errors).
std::shared_ptr<OnnxModelFile> parseOnnxModel(const std::string& bytes, const std::string& where,
                                             const std::string& dir);

// A TensorProto serialized in its own file (the test data's input_0.pb).
Tensor readTensorPb(const std::string& path);
std::string readFileBytes(const std::string& path);

}  // namespace onyx
