// ONNX tensors and types <-> Onyx tensors and element types.
#pragma once
#include <string>

#include <onnx/onnx_pb.h>

#include <onyx/core/tensor.h>

namespace onyx {

// TensorProto -> Tensor (host memory). Handles raw_data, the typed fields and
// external data (resolved under `dir`, which the path may not leave). `what`
// names the tensor in errors ("initializer 'w' in model.onnx").
Tensor tensorFromOnnx(const ::onnx::TensorProto& t, const std::string& dir, const std::string& what);
// Tensor -> TensorProto (raw_data for numeric types, string_data for strings).
void tensorToOnnx(const TensorBase& t, ::onnx::TensorProto& out);

// The element type of a TypeProto's tensor (or sequence / optional element);
// undefined when it has none Onyx knows.
Type onnxElemType(const ::onnx::TypeProto& t);
// "float32[1,3,224,224]" / "seq(float32)" / ... for messages.
std::string describeOnnxType(const ::onnx::TypeProto& t);

}  // namespace onyx
