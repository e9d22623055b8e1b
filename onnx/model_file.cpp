#include <onyx/onnx/model_file.h>

#include <climits>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <onyx/onnx/opset.h>
#include <onyx/onnx/tensor_proto.h>

namespace onyx {

namespace fs = std::filesystem;

int OnnxModelFile::opset(const std::string& domain) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = opsets.find(d);
  return it == opsets.end() ? -1 : it->second;
}

namespace {

// A path that names a file to read, or a one-line error saying why not.
void requireFile(const std::string& path) {
  std::error_code ec;
  if(!fs::exists(path, ec)) throw Error(str(path, ": no such file"));
  if(fs::is_directory(path, ec)) throw Error(str(path, ": is a directory, not a file"));
}

// Parses msg from `stream` (`empty`: the source holds no bytes at all).
template <class Msg>
void parseMessage(Msg& msg, google::protobuf::io::ZeroCopyInputStream& stream, bool empty, const std::string& where,
                  const char* kind) {
  if(empty) throw Error(str(where, ": empty file, not ", kind));
  google::protobuf::io::CodedInputStream in(&stream);
  in.SetTotalBytesLimit(INT_MAX);
  // A subgraph level is NodeProto -> AttributeProto -> GraphProto (protobuf's
  // default of 100 stopped If nested 33 deep, reported as a corrupt file).
  const int depth = 3 * kMaxSubgraphDepth + 16;
  in.SetRecursionLimit(depth);
  if(!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    throw Error(str(where, ": not ", kind, " (protobuf parse failed: truncated or corrupt file, or messages nested more "
                                           "than ", depth, " deep: subgraphs nested more than ", kMaxSubgraphDepth,
                    " deep)"));
}

template <class Msg>
void parseMessage(Msg& msg, const std::string& bytes, const std::string& where, const char* kind) {
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  parseMessage(msg, stream, bytes.empty(), where, kind);
}

}  // namespace

std::string readFileBytes(const std::string& path) {
  requireFile(path);
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if(!f) throw Error(str(path, ": cannot open for reading"));
  // One buffer of the file's size, read into directly (a stringstream would
  // hold the bytes twice at the end).
  std::streamoff size = f.tellg();
  if(size < 0) throw Error(str(path, ": read error"));
  std::string bytes(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if(size > 0 && !f.read(&bytes[0], size)) throw Error(str(path, ": read error"));
  return bytes;
}

namespace {

void checkGraphNames(const ::onnx::GraphProto& g, const std::string& where) {
  for(const auto& n : g.node())
    if(n.op_type().empty()) throw Error(str(where, ": node '", n.name(), "' has no op_type"));
}

// The header checks of a parsed model.
void checkModel(OnnxModelFile* m, const std::string& where) {
  const auto& p = m->proto;
  if(!p.has_ir_version() || p.ir_version() <= 0)
    throw Error(str(where, ": not an ONNX model (no ir_version: wrong magic or not a ModelProto)"));
  if(p.ir_version() < kMinIrVersion || p.ir_version() > kMaxIrVersion)
    throw Error(str(where, ": IR version ", p.ir_version(), " is not supported (this build reads ", kMinIrVersion,
                    " to ", kMaxIrVersion, ")"));
  if(!p.has_graph()) throw Error(str(where, ": the model has no graph"));
  for(const auto& o : p.opset_import()) {
    std::string d = o.domain() == "ai.onnx" ? "" : o.domain();
    m->opsets[d] = static_cast<int>(o.version());
  }
  if(p.opset_import_size() == 0) m->opsets[""] = 1;  // IR 3 models may omit it
  auto it = m->opsets.find("");
  if(it != m->opsets.end() && (it->second < kMinOpset || it->second > kMaxOpset))
    throw Error(str(where, ": opset ", it->second, " of domain ai.onnx is not supported (this build reads ",
                    kMinOpset, " to ", kMaxOpset, ")"));
  checkGraphNames(p.graph(), where);
}

}  // namespace

std::shared_ptr<OnnxModelFile> parseOnnxModel(const std::string& bytes, const std::string& where,
                                             const std::string& dir) {
  auto m = std::make_shared<OnnxModelFile>();
  m->path = where;
  m->dir = dir;
  parseMessage(m->proto, bytes, where, "an ONNX model");
  checkModel(m.get(), where);
  return m;
}

std::shared_ptr<OnnxModelFile> loadOnnxModel(const std::string& path) {
  requireFile(path);
  auto m = std::make_shared<OnnxModelFile>();
  m->path = path;
  fs::path dir = fs::path(path).parent_path();
  m->dir = dir.empty() ? "." : dir.string();
  // Parsed from the file in blocks: the bytes are never held whole beside
  // the parsed model (a BERT-base file is 440 MB).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if(fd < 0) throw Error(str(path, ": cannot open for reading"));
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  struct stat st {};
  parseMessage(m->proto, file, ::fstat(fd, &st) == 0 && st.st_size == 0, path, "an ONNX model");
  if(file.GetErrno() != 0) throw Error(str(path, ": read error"));
  checkModel(m.get(), path);
  return m;
}

Tensor readTensorPb(const std::string& path) {
  ::onnx::TensorProto p;
  parseMessage(p, readFileBytes(path), path, "a TensorProto");
  fs::path dir = fs::path(path).parent_path();
  return tensorFromOnnx(p, dir.empty() ? "." : dir.string(), path);
}

}  // namespace onyx
