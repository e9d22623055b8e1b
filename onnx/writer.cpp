#include <onyx/onnx/writer.h>

#include <filesystem>

#include <onyx/io/npz.h>

namespace onyx {

void writeOnnxModel(const std::string& path, const OnnxModelBytes& m) {
  if(!m.externalData.empty()) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    io::writeFileAtomic((dir / m.externalDataFile).string(), m.externalData);
  }
  io::writeFileAtomic(path, m.model);
}

}  // namespace onyx
