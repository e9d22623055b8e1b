// The ONNX file layer: parsing and validating model files, external data,
// and converting between TensorProto and Tensor. The protobuf binding is the
// system ONNX package's (`onnx_proto`), never generated code checked in here.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <onyx/core/tensor.h>

namespace onyx {

// IR versions and opsets this build reads.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;
constexpr int kMinOpset = 1;
constexpr int kMaxOpset = 27;

// A parsed, validated model file. Immutable once loaded: sessions share it.
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

// TensorProto -> Tensor (host memory). Handles raw_data, the typed fields and
// external data (resolved under `dir`, which the path may not leave). `what`
// names the tensor in errors ("initializer 'w' in model.onnx").
Tensor tensorFromOnnx(const ::onnx::TensorProto& t, const std::string& dir, const std::string& what);
// Tensor -> TensorProto (raw_data for numeric types, string_data for strings).
void tensorToOnnx(const TensorBase& t, ::onnx::TensorProto& out);
// A TensorProto serialized in its own file (the test data's input_0.pb).
Tensor readTensorPb(const std::string& path);
std::string readFileBytes(const std::string& path);

// "float32[1,3,224,224]" / "seq(float32)" / ... for messages.
std::string describeOnnxType(const ::onnx::TypeProto& t);

}  // namespace onyx
