#include <onyx/onnx/checker.h>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <onyx/core/error.h>

namespace onyx {

int onnxCheckerMaxOpset() {
  const auto& m = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = m.find("");
  return it == m.end() ? 0 : it->second.second;
}

void checkOnnxModel(const std::string& bytes, const std::string& where) {
  ::onnx::ModelProto m;
  ONYX_CHECK(m.ParseFromString(bytes), where, ": ONNX checker: the model does not parse");
  int opset = 0;
  for(auto& o : m.opset_import())
    if(o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  if(opset > onnxCheckerMaxOpset()) return;  // the linked libonnx does not know these schemas
  // External data lives next to a file this model may not have yet: check
  // the structure with the tensors' bytes in place instead.
  for(auto& init : *m.mutable_graph()->mutable_initializer()) {
    if(init.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    size_t length = 0;
    for(auto& e : init.external_data())
      if(e.key() == "length") length = std::stoull(e.value());
    init.clear_external_data();
    init.set_data_location(::onnx::TensorProto::DEFAULT);
    init.set_raw_data(std::string(length, '\0'));
  }
  try {
    ::onnx::checker::check_model(m);
    ::onnx::ShapeInferenceOptions opts{true, 1, false};  // check types, throw on errors
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(), opts);
  } catch(const std::exception& e) {
    std::string msg = e.what();
    for(char& c : msg)
      if(c == '\n') c = ' ';
    throw Error(str(where, ": ONNX checker: ", msg));
  }
}

}  // namespace onyx
