#include <onyx/converters/model.h>

#include <algorithm>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/converters/onnx_importer.h>
#include <onyx/graph/expression_graph.h>

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
  if(t.has_sequence_type()) {
    i.kind = "sequence";
    tt = &t.sequence_type().elem_type();
  } else if(t.has_optional_type()) {
    i.kind = "optional";
    tt = &t.optional_type().elem_type();
  }
  if(tt->has_tensor_type() && tt->tensor_type().has_shape()) {
    i.hasShape = true;
    for(const auto& d : tt->tensor_type().shape().dim()) {
      i.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
      i.dimNames.push_back(d.has_dim_param() ? d.dim_param() : "");
    }
  }
  return i;
}

}  // namespace

std::shared_ptr<Model> Model::load(const std::string& path) {
  auto m = std::shared_ptr<Model>(new Model());
  m->file_ = loadOnnxModel(path);
  const auto& g = m->file_->proto.graph();
  for(const auto& init : g.initializer()) {
    if(init.name().empty()) throw Error(str(path, ": an initializer has no name"));
    m->initializers_[init.name()] =
        tensorFromOnnx(init, m->file_->dir, str(path, ": initializer '", init.name(), "'"));
  }
  for(const auto& in : g.input())
    if(!m->initializers_.count(in.name())) m->inputs_.push_back(toInfo(in));
  for(const auto& out : g.output()) m->outputs_.push_back(toInfo(out));
  return m;
}

const std::string& Model::path() const { return file_->path; }
int Model::opset(const std::string& domain) const { return file_->opset(domain); }

// Input nodes for tensors (bound to them); sequences and optionals become constants.
// Input nodes are created in the model's input order, so that an exported
// graph declares its inputs in that order too.
static std::map<std::string, OnnxValue> graphInputs(ExpressionGraph& g, const Model& model, const HostValues& inputs) {
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
    } else {
      in[kv.first] = OnnxValue::none(v.elemType);
    }
  }
  return in;
}

void applyStateUpdates(const ImportedGraph& g) {
  for(const auto& [state, next] : g.stateUpdates) {
    ONYX_CHECK(next->val(), "applyStateUpdates: the value for '", state->name(), "' is not computed; call forward() first");
    state->val()->copyFrom(*next->val());
  }
}

ImportedGraph importGraph(const Model& model, ExpressionGraph& graph, const HostValues& inputs, bool trainable) {
  OnnxGraphImporter imp(model.file(), model.initializers(), graph, ImportOptions{trainable});
  auto outs = imp.build(graphInputs(graph, model, inputs));
  ImportedGraph r;
  r.valueDependent = imp.valueDependent();
  r.inputNodes = imp.inputNodes();
  r.stateUpdates = imp.stateUpdates();
  const auto& proto = model.file().proto;
  for(const auto& o : model.outputs()) {
    const OnnxValue& v = outs.at(o.name);
    if(v.kind == OnnxValue::Kind::Sequence) {
      r.spec.sequenceOutputs.emplace_back(o.name, GraphSpec::Sequence{v.sequence, v.elemType});
      continue;
    }
    if(v.kind != OnnxValue::Kind::Tensor)
      throw Error(str(model.path(), ": output '", o.name, "' is an absent optional; a graph file holds tensor and "
                      "sequence outputs only"));
    r.spec.outputs.emplace_back(o.name, v.tensor);
  }
  for(const auto& i : model.inputs()) {
    bool symbolic = false;
    for(auto& d : i.dimNames) symbolic = symbolic || !d.empty();
    if(symbolic && inputs.count(i.name) && inputs.at(i.name).kind == OnnxValue::Kind::Tensor)
      r.spec.dimNames[i.name] = i.dimNames;
  }
  r.spec.graphName = proto.graph().name();
  r.spec.docString = proto.doc_string();
  r.spec.producerName = proto.producer_name().empty() ? "onyx" : proto.producer_name();
  r.spec.producerVersion = proto.producer_version();
  for(const auto& n : proto.graph().node())
    if(!n.doc_string().empty() && n.output_size() > 0) r.spec.nodeDocStrings[n.output(0)] = n.doc_string();
  return r;
}

// ---- Session

struct Session::Cached {
  std::shared_ptr<ExpressionGraph> graph;
  std::map<std::string, Expr> inputNodes;
  std::map<std::string, OnnxValue> outputs;
  bool reusable = false;
};

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {
  ONYX_CHECK(model_ != nullptr, "Session: null model");
}
Session::~Session() = default;

std::shared_ptr<ExpressionGraph> Session::lastGraph() const { return last_ ? last_->graph : nullptr; }

namespace {

Tensor copyOut(const Tensor& t) {
  if(t->type() == Type::string) {
    Tensor c = TensorBase::create(t->shape(), t->type());
    c->strings() = t->strings();
    return c;
  }
  Tensor c = TensorBase::create(t->shape(), t->type());
  if(t->bytes()) c->copyFrom(*t);
  return c;
}

std::string signature(const HostValues& inputs) {
  std::string key;
  for(const auto& kv : inputs) {
    key += kv.first;
    key += '|';
    const HostValue& v = kv.second;
    if(v.kind != OnnxValue::Kind::Tensor) return "";  // sequences/optionals: never cached
    key += std::to_string(static_cast<int>(v.tensor->type()));
    for(auto d : v.tensor->shape().dims()) key += "," + std::to_string(d);
    key += ';';
  }
  return key;
}

HostValue toHost(const OnnxValue& v, ExpressionGraph& g) {
  switch(v.kind) {
    case OnnxValue::Kind::Tensor: return HostValue::of(copyOut(g.value(v.tensor)));
    case OnnxValue::Kind::Sequence: {
      std::vector<Tensor> s;
      for(const Expr& e : v.sequence) s.push_back(copyOut(g.value(e)));
      return HostValue::seq(std::move(s), v.elemType);
    }
    default: return HostValue::none(v.elemType);
  }
}

}  // namespace

HostValues Session::runValues(const HostValues& inputs, const std::vector<std::string>& outputs) {
  if(options_.threads > 0) host::setNumThreads(options_.threads);
  for(const auto& kv : inputs) {
    bool known = false;
    for(const auto& i : model_->inputs()) known |= i.name == kv.first;
    known |= model_->initializers().count(kv.first) > 0;
    ONYX_CHECK(known, model_->path(), ": the model has no input '", kv.first, "'");
    if(kv.second.kind == OnnxValue::Kind::Tensor)
      ONYX_CHECK(kv.second.tensor != nullptr, model_->path(), ": input '", kv.first, "' is a null tensor");
  }
  for(const auto& o : outputs) {
    bool known = false;
    for(const auto& i : model_->outputs()) known |= i.name == o;
    ONYX_CHECK(known, model_->path(), ": the model has no output '", o, "'");
  }
  std::string key = signature(inputs);
  Cached* c = nullptr;
  if(!key.empty()) {
    auto it = cache_.find(key);
    if(it != cache_.end() && it->second->reusable) c = it->second.get();
  }
  if(c) {
    for(const auto& kv : c->inputNodes) kv.second->bind(inputs.at(kv.first).tensor);
    c->graph->forward();
  } else {
    auto fresh = std::make_unique<Cached>();
    fresh->graph = std::make_shared<ExpressionGraph>();
    ExpressionGraph& g = *fresh->graph;
    g.setDevice(options_.device);
    g.setInference(!options_.trainable);
    std::map<std::string, OnnxValue> in = graphInputs(g, *model_, inputs);
    OnnxGraphImporter imp(model_->file(), model_->initializers(), g, ImportOptions{options_.trainable});
    fresh->outputs = imp.build(in);
    fresh->inputNodes = imp.inputNodes();
    fresh->reusable = !key.empty() && !imp.valueDependent();
    for(auto& kv : fresh->outputs) {
      if(kv.second.kind == OnnxValue::Kind::Tensor) kv.second.tensor->keepValue();
      for(Expr& e : kv.second.sequence) e->keepValue();
    }
    g.forward();
    ++built_;
    c = fresh.get();
    if(c->reusable) cache_[key] = std::move(fresh);
    else scratch_ = std::move(fresh);  // value-dependent: rebuilt next run
  }
  last_ = c;
  HostValues out;
  if(outputs.empty()) {
    for(const auto& o : model_->outputs()) out[o.name] = toHost(c->outputs.at(o.name), *c->graph);
  } else {
    for(const auto& o : outputs) out[o] = toHost(c->outputs.at(o), *c->graph);
  }
  return out;
}

std::map<std::string, Tensor> Session::run(const std::map<std::string, Tensor>& inputs,
                                           const std::vector<std::string>& outputs) {
  HostValues in;
  for(const auto& kv : inputs) in[kv.first] = HostValue::of(kv.second);
  std::map<std::string, Tensor> out;
  for(auto& kv : runValues(in, outputs)) {
    ONYX_CHECK(kv.second.kind == OnnxValue::Kind::Tensor, model_->path(), ": output '", kv.first,
               "' is not a tensor (use runValues)");
    out[kv.first] = kv.second.tensor;
  }
  return out;
}

}  // namespace onyx
