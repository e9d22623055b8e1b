// ONNX's own checker over a serialized model.
#pragma once
#include <string>

namespace onyx {

// Runs ONNX's checker and strict shape inference on a serialized model (as
// far as the linked libonnx knows the opset; see onnxCheckerMaxOpset()).
// External data is checked for structure only (the file may not exist yet).
// Throws onyx::Error "<where>: ONNX checker: ...".
void checkOnnxModel(const std::string& modelBytes, const std::string& where);
// The newest default-domain opset whose schemas the linked libonnx knows.
int onnxCheckerMaxOpset();

}  // namespace onyx
