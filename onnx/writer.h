// Writing ONNX files.
#pragma once
#include <string>

namespace onyx {

// A serialized model and the bytes of its external data file.
struct OnnxModelBytes {
  std::string model;             // serialized ModelProto
  std::string externalData;      // the external data file's bytes (empty: none)
  std::string externalDataFile;  // its name, relative to the model's folder
};

// Writes the model, and its external data file when there is one, each
// atomically (a temporary file renamed into place): a reader never sees half
// a model. The data file goes first, so a model on disk always finds it.
void writeOnnxModel(const std::string& path, const OnnxModelBytes& m);

}  // namespace onyx
