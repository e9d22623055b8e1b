#include <onyx/runtime/model.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include <onyx/backend/cpu/gemm.h>
#include <onyx/core/logging.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/onnx/model_file.h>
#include <onyx/onnx/tensor_proto.h>

namespace onyx {

std::string ValueInfo::describe() const {
  std::string s = type == Type::undefined ? "?" : typeName(type);
  if(hasShape) {
    s += "[";
    for(size_t i = 0; i < dims.size(); ++i) {
      if(i) s += ",";
      s += dims[i] >= 0 ? std::to_string(dims[i]) : (dimNames[i].empty() ? "?" : dimNames[i]);
    }
    s += "]";
  }
  if(kind == "map" || kind == "sequence_of_maps") {
    s = str("map(", keyType == Type::undefined ? "?" : typeName(keyType), ",", s, ")");
    return kind == "map" ? s : "seq(" + s + ")";
  }
  if(kind != "tensor") s = kind + "(" + s + ")";
  return s;
}

namespace {

ValueInfo toInfo(const ::onnx::ValueInfoProto& v) {
  ValueInfo i;
  i.name = v.name();
  const auto& t = v.type();
  i.type = onnxElemType(t);
  const ::onnx::TypeProto* tt = &t;
  auto mapOf = [&](const ::onnx::TypeProto& m) {
    i.keyType = static_cast<Type>(m.map_type().key_type());
    i.type = onnxElemType(m.map_type().value_type());
  };
  if(t.has_sequence_type() && t.sequence_type().elem_type().has_map_type()) {
    i.kind = "sequence_of_maps";
    mapOf(t.sequence_type().elem_type());
  } else if(t.has_map_type()) {
    i.kind = "map";
    mapOf(t);
  } else if(t.has_sequence_type()) {
    i.kind = "sequence";
    tt = &t.sequence_type().elem_type();
  } else if(t.has_optional_type()) {
    i.kind = "optional";
    tt = &t.optional_type().elem_type();
  }
  if(tt->has_tensor_type() && tt->tensor_type().has_shape()) {
    i.hasShape = true;
    for(const auto& d : tt->tensor_type().shape().dim()) {
      // dim_value 0 or less: unknown (as onnxruntime reads it; -1 is how some
      // exporters write a dynamic batch).
      i.dims.push_back(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : -1);
      i.dimNames.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
  }
  return i;
}

}  // namespace

// oneDNN's sgemm kernels are generated while the file is read and parsed
// (host::SgemmWarmUp), not in the model's first run: for a model of 12 MB
// or more, whose reading takes about as long (1.6-2 ms per MB measured on
// a Zen 3 EPYC: 23 MB in 36-49 ms, 2.7 MB in 4.5-7.6); a smaller model's
// load would wait for it (a 2.7 MB MLP: 5 -> 18 ms).
namespace {
constexpr uint64_t kWarmUpBytes = 12 << 20;
}

std::shared_ptr<Model> Model::load(const std::string& path) {
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  std::optional<host::SgemmWarmUp> warm;
  if(!ec && bytes >= kWarmUpBytes) warm.emplace();
  return fromFile(loadOnnxModel(path));
}

std::shared_ptr<Model> Model::fromBytes(const std::string& bytes, const std::string& name, const std::string& dir) {
  std::optional<host::SgemmWarmUp> warm;
  if(bytes.size() >= kWarmUpBytes) warm.emplace();
  return fromFile(parseOnnxModel(bytes, name, dir));
}

ModelMeta Model::meta() const {
  const auto& p = file_->proto;
  ModelMeta m;
  m.producerName = p.producer_name();
  m.producerVersion = p.producer_version();
  m.domain = p.domain();
  m.docString = p.doc_string();
  m.version = p.model_version();
  m.graphName = p.graph().name();
  m.graphDescription = p.graph().doc_string();
  for(const auto& kv : p.metadata_props()) m.customMetadata[kv.key()] = kv.value();
  return m;
}

std::shared_ptr<Model> Model::fromFile(std::shared_ptr<OnnxModelFile> file) {
  auto m = std::shared_ptr<Model>(new Model());
  m->file_ = std::move(file);
  const std::string& path = m->file_->path;
  auto& g = *m->file_->proto.mutable_graph();
  for(auto& init : *g.mutable_initializer()) {
    if(init.name().empty()) throw Error(str(path, ": an initializer has no name"));
    m->initializers_[init.name()] =
        tensorFromOnnx(init, m->file_->dir, str(path, ": initializer '", init.name(), "'"));
    // The decoded tensor is the one copy kept: the proto's bytes go now (name,
    // type and dims stay), so the weights are in memory once, not twice.
    std::string().swap(*init.mutable_raw_data());
    google::protobuf::RepeatedField<float>().Swap(init.mutable_float_data());
    google::protobuf::RepeatedField<double>().Swap(init.mutable_double_data());
    google::protobuf::RepeatedField<int32_t>().Swap(init.mutable_int32_data());
    google::protobuf::RepeatedField<int64_t>().Swap(init.mutable_int64_data());
    google::protobuf::RepeatedField<uint64_t>().Swap(init.mutable_uint64_data());
  }
  for(const auto& in : g.input())
    if(!m->initializers_.count(in.name())) {
      m->inputs_.push_back(toInfo(in));
      const auto& t = in.type();
      if(t.has_tensor_type() && t.tensor_type().has_shape())
        for(int d = 0; d < t.tensor_type().shape().dim_size(); ++d) {
          const auto& dim = t.tensor_type().shape().dim(d);
          if(dim.has_dim_value() && dim.dim_value() <= 0)
            m->warnings_.push_back(str(path, ": input '", in.name(), "' declares dim_value ", dim.dim_value(),
                                       " at axis ", d, "; read as an unknown dim"));
        }
    }
  for(const auto& out : g.output()) m->outputs_.push_back(toInfo(out));
  for(const auto& w : m->warnings_) logging::warn(w);
  return m;
}

const std::string& Model::path() const { return file_->path; }
int Model::opset(const std::string& domain) const { return file_->opset(domain); }

namespace {

// Input nodes for tensors (bound to them); sequences and optionals become constants.
// Input nodes are created in the model's input order, so that an exported
// graph declares its inputs in that order too.
std::map<std::string, OnnxValue> graphInputs(ExpressionGraph& g, const Model& model, const HostValues& inputs) {
  std::map<std::string, OnnxValue> in;
  std::vector<const HostValues::value_type*> ordered;
  for(const auto& i : model.inputs()) {
    auto it = inputs.find(i.name);
    if(it != inputs.end()) ordered.push_back(&*it);
  }
  for(const auto& kv : inputs)
    if(std::find(ordered.begin(), ordered.end(), &kv) == ordered.end()) ordered.push_back(&kv);
  for(const auto* p : ordered) {
    const auto& kv = *p;
    const HostValue& v = kv.second;
    if(v.kind == OnnxValue::Kind::Tensor) {
      Expr e = g.input(kv.first, v.tensor->shape(), v.tensor->type());
      e->bind(v.tensor);
      in[kv.first] = OnnxValue::of(e);
    } else if(v.kind == OnnxValue::Kind::Sequence) {
      std::vector<Expr> s;
      for(const Tensor& t : v.sequence) s.push_back(g.constant(t));
      in[kv.first] = OnnxValue::seq(std::move(s), v.elemType);
    } else if(v.kind == OnnxValue::Kind::Map || v.kind == OnnxValue::Kind::MapSequence) {
      in[kv.first] = OnnxValue::map(g.constant(v.tensor), g.constant(v.mapValues), v.kind);
    } else {
      in[kv.first] = OnnxValue::none(v.elemType);
    }
  }
  return in;
}

}  // namespace

ImportedGraph importGraph(const Model& model, ExpressionGraph& graph, const HostValues& inputs, bool trainable) {
  return importOnnxGraph(model.file(), model.initializers(), graph, graphInputs(graph, model, inputs),
                         ImportOptions{trainable});
}

PassCounts optimizeForTraining(ExpressionGraph& graph, const ImportedGraph& imported,
                               const std::vector<std::string>& disabled) {
  std::vector<Expr> keep;
  for(const auto& kv : imported.spec.outputs) keep.push_back(kv.second);
  for(const auto& kv : imported.outputs) {
    if(kv.second.tensor) keep.push_back(kv.second.tensor);
    for(const Expr& e : kv.second.sequence) keep.push_back(e);
    if(kv.second.mapValues) keep.push_back(kv.second.mapValues);
  }
  for(const auto& u : imported.stateUpdates) keep.push_back(u.second);
  return optimizeTrainingGraph(graph, keep, disabled);
}

}  // namespace onyx
