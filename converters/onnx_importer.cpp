#include <onyx/converters/onnx_importer.h>

#include <cmath>
#include <new>
#include <stdexcept>

#include <functional>
#include <set>
#include <unordered_map>

#include <onyx/converters/onnx_rules.h>
#include <onyx/onnx/model_file.h>
#include <onyx/onnx/tensor_proto.h>

namespace onyx {

namespace {

// One import of a model's graph: the scopes of values by name (the main
// graph's, then each subgraph's being imported), and what the import found.
class OnnxGraphImporter {
public:
  OnnxGraphImporter(const OnnxModelFile& file, const std::map<std::string, Tensor>& initializers,
                    ExpressionGraph& graph, ImportOptions options)
      : file_(file), initializers_(initializers), graph_(graph), options_(options) {}
  // Builds the main graph with `inputs` bound. Returns its outputs by name.
  std::map<std::string, OnnxValue> build(const std::map<std::string, OnnxValue>& inputs);
  // Imports a subgraph (an If branch, a Loop body) with its formal inputs
  // bound to `inputs`; the enclosing scopes stay visible.
  std::vector<OnnxValue> importSubgraph(const ::onnx::GraphProto& g, const std::vector<OnnxValue>& inputs,
                                        const std::string& where);

  bool valueDependent() const { return valueDependent_; }
  const std::map<std::string, Expr>& inputNodes() const { return inputNodes_; }
  const std::vector<std::pair<Expr, Expr>>& stateUpdates() const { return stateUpdates_; }

  // ---- used by the node context
  OnnxValue lookup(const std::string& name) const;
  bool isValueDependent(Node* n);
  ExpressionGraph& graph() { return graph_; }
  const OnnxModelFile& file() const { return file_; }
  void markValueDependent() { valueDependent_ = true; }
  bool training() const { return options_.trainable && !graph_.isInference(); }
  bool trainable() const { return options_.trainable; }
  // How many node inputs (in every graph of the model) read value `name`.
  size_t uses(const std::string& name) const;
  void addStateUpdate(Expr state, Expr next) { stateUpdates_.emplace_back(state, next); }
  Type declaredType(const std::string& name) const;

private:
  // What the main graph and a subgraph share: g's nodes in order, then its
  // outputs (its inputs and initializers are bound in the innermost scope).
  // `outputWhat` prefixes the error for an output no node produces.
  std::vector<OnnxValue> importBody(const ::onnx::GraphProto& g, const std::string& outputWhat);
  void importNode(const ::onnx::NodeProto& node);
  void bindScope(const std::string& name, OnnxValue v);

  const OnnxModelFile& file_;
  const std::map<std::string, Tensor>& initializers_;
  ExpressionGraph& graph_;
  ImportOptions options_;
  std::vector<std::unordered_map<std::string, OnnxValue>> scopes_;
  std::unordered_map<std::string, Type> declaredTypes_;
  std::unordered_map<Node*, bool> dependsOnInput_;
  std::map<std::string, Expr> inputNodes_;
  bool valueDependent_ = false;
  std::vector<std::pair<Expr, Expr>> stateUpdates_;
  mutable std::unordered_map<std::string, size_t> uses_;
  mutable bool usesCounted_ = false;
};

const char* attrTypeName(::onnx::AttributeProto::AttributeType t) {
  switch(t) {
    case ::onnx::AttributeProto::FLOAT: return "float";
    case ::onnx::AttributeProto::INT: return "int";
    case ::onnx::AttributeProto::STRING: return "string";
    case ::onnx::AttributeProto::TENSOR: return "tensor";
    case ::onnx::AttributeProto::GRAPH: return "graph";
    case ::onnx::AttributeProto::FLOATS: return "floats";
    case ::onnx::AttributeProto::INTS: return "ints";
    case ::onnx::AttributeProto::STRINGS: return "strings";
    case ::onnx::AttributeProto::TENSORS: return "tensors";
    case ::onnx::AttributeProto::GRAPHS: return "graphs";
    default: return "unknown";
  }
}

// The importer's OnnxImportCtx for one node.
class NodeCtx : public OnnxImportCtx {
public:
  NodeCtx(OnnxGraphImporter& imp, const ::onnx::NodeProto& node, int opset)
      : imp_(imp), node_(node), opset_(opset), outputs_(node.output_size()) {
    name_ = node.name().empty() ? (node.output_size() ? node.output(0) : node.op_type()) : node.name();
    // consumed_inputs (ai.onnx opsets before 6) names the inputs an op may
    // overwrite in place: a hint that Onyx's memory planning does not need,
    // ignored here once for every op instead of in each import rule.
    if((node.domain().empty() || node.domain() == "ai.onnx") && opset < 6) read_.insert("consumed_inputs");
  }

  const std::string& opType() const override { return node_.op_type(); }
  const std::string& domain() const override { return node_.domain(); }
  const std::string& nodeName() const override { return name_; }
  int opset() const override { return opset_; }
  ExpressionGraph& graph() override { return imp_.graph(); }

  size_t numInputs() const override { return static_cast<size_t>(node_.input_size()); }
  bool hasInput(size_t i) const override { return i < numInputs() && !node_.input(static_cast<int>(i)).empty(); }
  OnnxValue inputValue(size_t i) override {
    check(i < numInputs(), "input ", i, " is required (the node has ", numInputs(), ")");
    if(!hasInput(i)) return OnnxValue::none();
    return imp_.lookup(node_.input(static_cast<int>(i)));
  }
  OnnxValue valueByName(const std::string& name) override {
    try {
      return imp_.lookup(name);
    } catch(const Error& e) {
      fail("value ", e.what());
    }
  }
  bool training() const override { return imp_.training(); }
  void updateState(Expr state, Expr next) override {
    check(state->kind() == NodeKind::Param, "updateState: '", state->name(), "' is not a param");
    check(state->shape() == next->shape() && state->value_type() == next->value_type(), "updateState: '",
          state->name(), "' ", state->shape(), " cannot take a value of shape ", next->shape());
    state->setTrainable(false);
    next->keepValue();
    imp_.addStateUpdate(state, next);
  }
  Expr stateInput(size_t i) override {
    Expr v = input(i);
    if(!imp_.trainable()) return v;
    const std::string& name = node_.input(static_cast<int>(i));
    if(v->kind() == NodeKind::Param && v->name() == name && imp_.uses(name) == 1) {
      v->setTrainable(false);
      return v;
    }
    // A buffer of its own: named after the input value, or after the node
    // when the value is an initializer read elsewhere too.
    std::string own = v->name() == name ? nodeName() + "/" + name : name;
    Tensor start = valueOf(v);
    Expr p = graph().param(own, v->shape(), [start](TensorBase& dst, Rng&) { dst.copyFrom(*start); },
                           v->value_type(), false);
    p->setTrainable(false);
    return p;
  }
  Tensor value(size_t i) override { return valueOf(input(i)); }
  Tensor valueOf(Expr e) override {
    if(imp_.isValueDependent(e.get())) imp_.markValueDependent();
    // Rules read values on the host (shapes, indices, attributes as inputs).
    Tensor t = imp_.graph().value(e);
    return t->onHost() ? t : t->hostCopy();
  }

  bool hasAttr(const char* name) const override { return find(name) != nullptr; }
  int64_t attrInt(const char* name, int64_t def) override {
    auto* a = get(name);
    if(!a) return def;
    if(a->type() == ::onnx::AttributeProto::FLOAT) {  // a float where an int is meant: truncated, if it fits
      const float f = a->f();
      check(std::isfinite(f) && f >= -9.2e18f && f <= 9.2e18f, "attribute '", name, "' is ", f,
            ", not a usable integer");
      return static_cast<int64_t>(f);
    }
    expect(*a, ::onnx::AttributeProto::INT);
    return a->i();
  }
  double attrFloat(const char* name, double def) override {
    auto* a = get(name);
    if(!a) return def;
    if(a->type() == ::onnx::AttributeProto::INT) return static_cast<double>(a->i());
    expect(*a, ::onnx::AttributeProto::FLOAT);
    return static_cast<double>(a->f());
  }
  std::string attrString(const char* name, const std::string& def) override {
    auto* a = get(name);
    if(!a) return def;
    expect(*a, ::onnx::AttributeProto::STRING);
    return a->s();
  }
  std::vector<int64_t> attrInts(const char* name, const std::vector<int64_t>& def) override {
    auto* a = get(name);
    if(!a) return def;
    if(a->type() == ::onnx::AttributeProto::INT) return {a->i()};
    expect(*a, ::onnx::AttributeProto::INTS);
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::vector<double> attrFloats(const char* name, const std::vector<double>& def) override {
    auto* a = get(name);
    if(!a) return def;
    if(a->type() == ::onnx::AttributeProto::FLOAT) return {static_cast<double>(a->f())};
    expect(*a, ::onnx::AttributeProto::FLOATS);
    return std::vector<double>(a->floats().begin(), a->floats().end());
  }
  std::vector<std::string> attrStrings(const char* name) override {
    auto* a = get(name);
    if(!a) return {};
    expect(*a, ::onnx::AttributeProto::STRINGS);
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  }
  Tensor attrTensor(const char* name) override {
    auto* a = get(name);
    check(a != nullptr, "attribute '", name, "' is required");
    expect(*a, ::onnx::AttributeProto::TENSOR);
    return tensorFromOnnx(a->t(), imp_.file().dir, where() + ": attribute '" + name + "'");
  }
  void ignoreAttr(const char* name) override { read_.insert(name); }
  std::vector<OnnxValue> subgraph(const char* name, const std::vector<OnnxValue>& inputs) override {
    return imp_.importSubgraph(graphAttr(name), inputs, where() + ": attribute '" + name + "'");
  }
  size_t subgraphNumInputs(const char* name) override { return static_cast<size_t>(graphAttr(name).input_size()); }
  size_t subgraphNumOutputs(const char* name) override { return static_cast<size_t>(graphAttr(name).output_size()); }

  size_t numOutputs() const override { return static_cast<size_t>(node_.output_size()); }
  bool wantsOutput(size_t i) const override { return i < numOutputs() && !node_.output(static_cast<int>(i)).empty(); }
  void setOutputValue(size_t i, OnnxValue v) override {
    // An output the node does not declare (trailing optional outputs may be
    // left out; a mutated node may declare none): nothing reads the value.
    if(i >= outputs_.size()) return;
    outputs_[i] = std::move(v);
    set_.insert(i);
  }
  Type declaredOutputType(size_t i) const override {
    return wantsOutput(i) ? imp_.declaredType(node_.output(static_cast<int>(i))) : Type::undefined;
  }

  // After the import function ran: every attribute read, every wanted output set.
  void finish() {
    for(const auto& a : node_.attribute())
      if(!read_.count(a.name())) fail("attribute '", a.name(), "' is not supported");
    for(size_t i = 0; i < numOutputs(); ++i)
      if(wantsOutput(i)) check(set_.count(i) > 0, "output ", i, " ('", node_.output(static_cast<int>(i)), "') is not supported");
  }
  std::vector<OnnxValue>& outputs() { return outputs_; }

private:
  const ::onnx::AttributeProto* find(const char* name) const {
    for(const auto& a : node_.attribute())
      if(a.name() == name) return &a;
    return nullptr;
  }
  const ::onnx::AttributeProto* get(const char* name) {
    read_.insert(name);
    return find(name);
  }
  void expect(const ::onnx::AttributeProto& a, ::onnx::AttributeProto::AttributeType t) const {
    check(a.type() == t || a.type() == ::onnx::AttributeProto::UNDEFINED, "attribute '", a.name(), "' must be ",
          attrTypeName(t), ", got ", attrTypeName(a.type()));
  }
  const ::onnx::GraphProto& graphAttr(const char* name) {
    auto* a = get(name);
    check(a != nullptr, "attribute '", name, "' is required");
    expect(*a, ::onnx::AttributeProto::GRAPH);
    return a->g();
  }

  OnnxGraphImporter& imp_;
  const ::onnx::NodeProto& node_;
  int opset_;
  std::string name_;
  std::set<std::string> read_;
  std::set<size_t> set_;
  std::vector<OnnxValue> outputs_;
};

size_t OnnxGraphImporter::uses(const std::string& name) const {
  if(!usesCounted_) {  // once, on first use (only training imports ask)
    std::function<void(const ::onnx::GraphProto&)> count = [&](const ::onnx::GraphProto& gr) {
      for(const auto& n : gr.node()) {
        for(const auto& i : n.input()) ++uses_[i];
        for(const auto& a : n.attribute()) {
          if(a.has_g()) count(a.g());
          for(const auto& sg : a.graphs()) count(sg);
        }
      }
    };
    count(file_.proto.graph());
    usesCounted_ = true;
  }
  auto it = uses_.find(name);
  return it == uses_.end() ? 0 : it->second;
}

Type OnnxGraphImporter::declaredType(const std::string& name) const {
  auto it = declaredTypes_.find(name);
  return it == declaredTypes_.end() ? Type::undefined : it->second;
}

OnnxValue OnnxGraphImporter::lookup(const std::string& name) const {
  for(auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if(f != it->end()) return f->second;
  }
  throw Error(str("'", name, "' is not produced by any earlier node, initializer or graph input"));
}

void OnnxGraphImporter::bindScope(const std::string& name, OnnxValue v) {
  ONYX_ASSERT(!scopes_.empty(), "no scope");
  scopes_.back()[name] = std::move(v);
}

bool OnnxGraphImporter::isValueDependent(Node* root) {
  // Iterative DFS with memo: does any input node feed `root`?
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while(!stack.empty()) {
    auto& [n, k] = stack.back();
    auto memo = dependsOnInput_.find(n);
    if(memo != dependsOnInput_.end()) {
      stack.pop_back();
      continue;
    }
    if(n->kind() == NodeKind::Input) {
      dependsOnInput_[n] = true;
      stack.pop_back();
      continue;
    }
    if(k < n->numChildren()) {
      Node* c = n->child(k++).get();
      if(!dependsOnInput_.count(c)) stack.push_back({c, 0});
      continue;
    }
    bool dep = false;
    for(size_t i = 0; i < n->numChildren() && !dep; ++i) dep = dependsOnInput_[n->child(i).get()];
    dependsOnInput_[n] = dep;
    stack.pop_back();
  }
  return dependsOnInput_[root];
}

void OnnxGraphImporter::importNode(const ::onnx::NodeProto& node) {
  const std::string& dom = node.domain();
  int opset = file_.opset(dom);
  std::string nodeName = node.name().empty() ? (node.output_size() ? node.output(0) : node.op_type()) : node.name();
  std::string domShown = dom.empty() ? "ai.onnx" : dom;
  if(opset < 0)
    throw Error(str("node '", nodeName, "' (", node.op_type(), "): domain '", domShown,
                    "' is not in the model's opset_import"));
  const OnnxRule* rule = findOnnxImport(dom, node.op_type(), opset);
  if(!rule) {
    std::string known;
    for(const OnnxRule& r : onnxImportTable())
      if(r.opType == node.op_type() && (r.domain == dom || (r.domain.empty() && dom == "ai.onnx")))
        known += str(known.empty() ? "" : ", ", r.since, r.until >= kOpsetOpen ? "+" : str("-", r.until));
    if(known.empty())
      throw Error(str("node '", nodeName, "' (", node.op_type(), ", domain ", domShown, ", opset ", opset,
                      "): unsupported op"));
    throw Error(str("node '", nodeName, "' (", node.op_type(), ", domain ", domShown, ", opset ", opset,
                    "): unsupported opset (Onyx imports ", node.op_type(), " at opsets ", known, ")"));
  }
  NodeCtx ctx(*this, node, opset);
  // Inputs must exist before the import runs, so the error names them.
  for(int i = 0; i < node.input_size(); ++i)
    if(!node.input(i).empty()) {
      try {
        lookup(node.input(i));
      } catch(const Error& e) {
        ctx.fail("input ", i, " ", e.what());
      }
    }
  try {
    rule->importFn(ctx);
  } catch(const Error& e) {
    std::string msg = e.what();
    if(msg.rfind(ctx.where(), 0) == 0) throw;  // already names the node
    throw Error(ctx.where() + ": " + msg);
  } catch(const std::bad_alloc&) {  // a value computed at import (a constant, a folded shape)
    throw Error(ctx.where() + ": out of memory while importing the node");
  } catch(const std::length_error&) {
    throw Error(ctx.where() + ": out of memory while importing the node");
  }
  ctx.finish();
  for(int i = 0; i < node.output_size(); ++i) {
    if(node.output(i).empty()) continue;
    // ONNX graphs are in SSA form: a second writer of a name would silently
    // replace the first one's value for every later reader.
    if(scopes_.back().count(node.output(i)))
      ctx.fail("output ", i, " '", node.output(i),
               "' is already defined in this graph (a graph input, an initializer or an earlier node's output); "
               "each value is written once");
    OnnxValue& v = ctx.outputs()[static_cast<size_t>(i)];
    if(v.kind == OnnxValue::Kind::Tensor && v.tensor->kind() != NodeKind::Input && v.tensor->kind() != NodeKind::Param &&
       v.tensor->name().empty())
      v.tensor->set_name(node.output(i));
    bindScope(node.output(i), v);
  }
}

std::vector<OnnxValue> OnnxGraphImporter::importBody(const ::onnx::GraphProto& g, const std::string& outputWhat) {
  for(const auto& v : g.value_info()) {
    Type t = onnxElemType(v.type());
    if(t != Type::undefined) declaredTypes_[v.name()] = t;
  }
  for(const auto& v : g.output()) {
    Type t = onnxElemType(v.type());
    if(t != Type::undefined) declaredTypes_[v.name()] = t;
  }
  for(const auto& n : g.node()) importNode(n);
  std::vector<OnnxValue> out;
  for(const auto& o : g.output()) {
    try {
      out.push_back(lookup(o.name()));
    } catch(const Error& e) {
      throw Error(str(outputWhat, " ", e.what()));
    }
  }
  return out;
}

std::vector<OnnxValue> OnnxGraphImporter::importSubgraph(const ::onnx::GraphProto& g,
                                                         const std::vector<OnnxValue>& inputs, const std::string& where) {
  if(static_cast<size_t>(g.input_size()) != inputs.size())
    throw Error(str(where, ": the subgraph takes ", g.input_size(), " inputs, given ", inputs.size()));
  if(scopes_.size() > static_cast<size_t>(kMaxSubgraphDepth))
    throw Error(str(where, ": subgraphs nested more than ", kMaxSubgraphDepth, " deep"));
  scopes_.emplace_back();
  struct Pop {
    std::vector<std::unordered_map<std::string, OnnxValue>>& s;
    ~Pop() { s.pop_back(); }
  } pop{scopes_};
  for(const auto& init : g.initializer())
    bindScope(init.name(), OnnxValue::of(graph_.constant(tensorFromOnnx(init, file_.dir, where + ": initializer '" + init.name() + "'"))));
  for(int i = 0; i < g.input_size(); ++i) bindScope(g.input(i).name(), inputs[static_cast<size_t>(i)]);
  std::vector<OnnxValue> out = importBody(g, where + ": output");
  // A subgraph's outputs have the element types it declares: an If branch
  // yielding int64 where it declares float would reach readers that expect
  // float.
  for(size_t i = 0; i < out.size(); ++i) {
    Type declared = onnxElemType(g.output(static_cast<int>(i)).type());
    if(out[i].kind == OnnxValue::Kind::Tensor && declared != Type::undefined && out[i].tensor->value_type() != declared)
      throw Error(str(where, ": output ", i, " '", g.output(static_cast<int>(i)).name(), "' is ",
                      out[i].tensor->value_type(), " but the subgraph declares ", declared));
  }
  return out;
}

std::map<std::string, OnnxValue> OnnxGraphImporter::build(const std::map<std::string, OnnxValue>& inputs) {
  const auto& g = file_.proto.graph();
  const std::string& path = file_.path;
  scopes_.clear();
  scopes_.emplace_back();
  try {
    // Initializers: shared constants, or params for training.
    // In the file's order, so that an exported model imports back to the same graph.
    for(const auto& init : g.initializer()) {
      auto it = initializers_.find(init.name());
      if(it == initializers_.end()) continue;
      const auto& kv = *it;
      if(inputs.count(kv.first)) continue;  // a graph input overrides its initializer
      const Tensor& t = kv.second;
      Expr e;
      if(options_.trainable && isFloat(t->type())) {
        Tensor src = t;
        e = graph_.param(kv.first, t->shape(), [src](TensorBase& dst, Rng&) { dst.copyFrom(*src); }, t->type(), true);
      } else {
        e = graph_.constant(t);
        e->set_name(kv.first);  // export and the native format keep initializer names
      }
      bindScope(kv.first, OnnxValue::of(e));
    }
    std::map<std::string, std::string> symbols;  // dim_param -> "name:axis=value" consistency
    std::map<std::string, int64_t> symbolValues;
    for(const auto& in : g.input()) {
      auto it = inputs.find(in.name());
      if(it == inputs.end()) {
        if(initializers_.count(in.name())) continue;
        throw Error(str("input '", in.name(), "' (", describeOnnxType(in.type()), ") is missing"));
      }
      const OnnxValue& v = it->second;
      if(v.kind != OnnxValue::Kind::Tensor) {
        bindScope(in.name(), v);
        markValueDependent();
        continue;
      }
      Expr t = v.tensor;
      Type want = onnxElemType(in.type());
      if(want != Type::undefined && in.type().has_tensor_type() && t->value_type() != want)
        throw Error(str("input '", in.name(), "': expected ", typeName(want), ", got ", typeName(t->value_type())));
      if(in.type().has_tensor_type() && in.type().tensor_type().has_shape()) {
        const auto& sh = in.type().tensor_type().shape();
        const Shape& s = t->shape();
        if(sh.dim_size() != s.rank())
          throw Error(str("input '", in.name(), "': shape ", s, " contradicts the model's ", describeOnnxType(in.type())));
        for(int d = 0; d < sh.dim_size(); ++d) {
          const auto& dim = sh.dim(d);
          int64_t got = s.dims()[d];
          // A dim_value of 0 or less is an unknown dim (exporters write -1 for
          // a dynamic batch), as onnxruntime reads it.
          if(dim.has_dim_value() && dim.dim_value() > 0 && dim.dim_value() != got)
            throw Error(str("input '", in.name(), "': shape ", s, " contradicts the model's ", describeOnnxType(in.type()),
                            " at axis ", d));
          if(dim.has_dim_param() && !dim.dim_param().empty()) {
            auto sv = symbolValues.find(dim.dim_param());
            if(sv != symbolValues.end() && sv->second != got)
              throw Error(str("input '", in.name(), "': dim '", dim.dim_param(), "' is ", got, " here but ", sv->second,
                              " in ", symbols[dim.dim_param()]));
            symbolValues[dim.dim_param()] = got;
            symbols[dim.dim_param()] = str("input '", in.name(), "' axis ", d);
          }
        }
      }
      bindScope(in.name(), v);
      if(t->kind() == NodeKind::Input) inputNodes_[in.name()] = t;
    }
    std::vector<OnnxValue> values = importBody(g, "graph output");
    std::map<std::string, OnnxValue> out;
    for(int i = 0; i < g.output_size(); ++i) out[g.output(i).name()] = values[static_cast<size_t>(i)];
    return out;
  } catch(const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace

ImportedGraph importOnnxGraph(const OnnxModelFile& file, const std::map<std::string, Tensor>& initializers,
                              ExpressionGraph& graph, const std::map<std::string, OnnxValue>& inputs,
                              ImportOptions options) {
  OnnxGraphImporter imp(file, initializers, graph, options);
  ImportedGraph r;
  r.outputs = imp.build(inputs);
  r.valueDependent = imp.valueDependent();
  r.inputNodes = imp.inputNodes();
  r.stateUpdates = imp.stateUpdates();
  const auto& proto = file.proto;
  for(const auto& o : proto.graph().output()) {
    const OnnxValue& v = r.outputs.at(o.name());
    if(v.kind == OnnxValue::Kind::Tensor)
      r.spec.outputs.emplace_back(o.name(), v.tensor);
    else if(v.kind == OnnxValue::Kind::Sequence)
      r.spec.sequenceOutputs.emplace_back(o.name(), GraphSpec::Sequence{v.sequence, v.elemType});
    else if(v.kind == OnnxValue::Kind::Map || v.kind == OnnxValue::Kind::MapSequence)
      r.spec.mapOutputs.push_back(o.name());
    else
      r.spec.absentOutputs.push_back(o.name());
  }
  // The symbolic dims of the tensor inputs given (an initializer's input is
  // a weight, not an input of the graph file).
  for(const auto& in : proto.graph().input()) {
    auto given = inputs.find(in.name());
    if(initializers.count(in.name()) || given == inputs.end() || given->second.kind != OnnxValue::Kind::Tensor) continue;
    const ::onnx::TypeProto* t = &in.type();
    if(t->has_sequence_type()) t = &t->sequence_type().elem_type();
    else if(t->has_optional_type()) t = &t->optional_type().elem_type();
    if(!t->has_tensor_type() || !t->tensor_type().has_shape()) continue;
    std::vector<std::string> names;
    bool symbolic = false;
    for(const auto& d : t->tensor_type().shape().dim()) {
      names.push_back(d.has_dim_param() ? d.dim_param() : "");
      symbolic = symbolic || !names.back().empty();
    }
    if(symbolic) r.spec.dimNames[in.name()] = names;
  }
  r.spec.graphName = proto.graph().name();
  r.spec.docString = proto.doc_string();
  r.spec.producerName = proto.producer_name().empty() ? "onyx" : proto.producer_name();
  r.spec.producerVersion = proto.producer_version();
  for(const auto& n : proto.graph().node())
    if(!n.doc_string().empty() && n.output_size() > 0) r.spec.nodeDocStrings[n.output(0)] = n.doc_string();
  return r;
}

void applyStateUpdates(const ImportedGraph& g) {
  for(const auto& [state, next] : g.stateUpdates) {
    ONYX_CHECK(next->val(), "applyStateUpdates: the value for '", state->name(), "' is not computed; call forward() first");
    state->val()->copyFrom(*next->val());
  }
}

}  // namespace onyx
