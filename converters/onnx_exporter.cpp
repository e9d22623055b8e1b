#include <onyx/converters/onnx_exporter.h>

#include <zlib.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <onnx/defs/schema.h>

#include <onyx/graph/onnx_export.h>
#include <onyx/onnx/checker.h>
#include <onyx/onnx/opset.h>
#include <onyx/onnx/tensor_proto.h>

namespace onyx {

namespace {

void setAttr(::onnx::AttributeProto& a, const std::string& name, const AttrValue& v) {
  a.set_name(name);
  switch(static_cast<AttrKind>(v.index())) {
    case AttrKind::Int:
      a.set_type(::onnx::AttributeProto::INT);
      a.set_i(std::get<int64_t>(v));
      break;
    case AttrKind::Float:
      a.set_type(::onnx::AttributeProto::FLOAT);
      a.set_f(static_cast<float>(std::get<double>(v)));
      break;
    case AttrKind::String:
      a.set_type(::onnx::AttributeProto::STRING);
      a.set_s(std::get<std::string>(v));
      break;
    case AttrKind::Ints:
      a.set_type(::onnx::AttributeProto::INTS);
      for(int64_t x : std::get<IntList>(v)) a.add_ints(x);
      break;
    case AttrKind::Floats:
      a.set_type(::onnx::AttributeProto::FLOATS);
      for(double x : std::get<FloatList>(v)) a.add_floats(static_cast<float>(x));
      break;
  }
}

bool emptyList(const AttrValue& v) {
  if(auto* l = std::get_if<IntList>(&v)) return l->empty();
  if(auto* l = std::get_if<FloatList>(&v)) return l->empty();
  return false;
}

void setValueInfo(::onnx::ValueInfoProto& vi, const std::string& name, Type type, const Shape& shape,
                  const std::vector<std::string>* dimNames, bool unknownDims) {
  vi.set_name(name);
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(type));
  auto* sh = tt->mutable_shape();
  for(int d = 0; d < shape.rank(); ++d) {
    auto* dim = sh->add_dim();
    if(dimNames && static_cast<size_t>(d) < dimNames->size() && !(*dimNames)[static_cast<size_t>(d)].empty())
      dim->set_dim_param((*dimNames)[static_cast<size_t>(d)]);
    else if(!unknownDims)
      dim->set_dim_value(shape.dims()[d]);
  }
}

std::string uniqueName(const std::string& base, std::unordered_set<std::string>& taken) {
  std::string n = base;
  for(int k = 1; taken.count(n); ++k) n = base + "_" + std::to_string(k);
  taken.insert(n);
  return n;
}

// The rule a node exports through at `opset` (default domain), or null.
const OnnxRule* pickRule(const OpDef& op, int opset) {
  for(const OnnxRule& r : op.onnxRules) {
    if(!r.inDefaultDomain()) continue;
    if(!r.importable() && !r.exportFn) continue;
    if(r.holds(opset)) return &r;
  }
  for(const OnnxRule& r : op.onnxRules)  // another domain: its own versioning
    if(!r.inDefaultDomain()) return &r;
  return nullptr;
}

std::string describeRules(const OpDef& op) {
  std::string s;
  for(const OnnxRule& r : op.onnxRules) {
    if(!s.empty()) s += ", ";
    s += (r.importable() ? r.opType : std::string("composite")) + " " + std::to_string(r.since);
    s += r.until >= kOpsetOpen ? "+" : "-" + std::to_string(r.until);
  }
  return s;
}

class Exporter;

// Thrown by requireOpset() under an automatic target opset: restart there.
struct OpsetNeeded {
  int opset;
};

class ExportCtxImpl : public OnnxExportCtx {
public:
  ExportCtxImpl(Exporter& ex, Node* n, const std::string& opType) : ex_(ex), n_(n), opType_(opType) {}
  const Node& node() const override { return *n_; }
  int opset(const std::string& domain) const override;
  std::string input(size_t i) override;
  std::string output() override;
  std::string fresh(const std::string& hint) override;
  std::string constant(const Tensor& t, const std::string& hint) override;
  void emit(const std::string& opType, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const OnnxAttrs& attrs, const std::string& domain) override;
  void emitDefault(const std::string& opType, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& skip, const OnnxAttrs& extra) override;
  void requireOpset(int need, const std::string& what) override;
  std::string where() const override;

private:
  Exporter& ex_;
  Node* n_;
  std::string opType_;
};

class Exporter {
public:
  Exporter(const GraphSpec& spec, const ExportOptions& options, int floor) : spec_(spec), options_(options), floor_(floor) {}

  ExportResult run() {
    ONYX_CHECK(!spec_.outputs.empty() || !spec_.sequenceOutputs.empty(), "export: the graph has no outputs");
    auto named = nameGraphNodes(spec_);
    for(auto& kv : named) {
      names_[kv.first] = kv.second;
      taken_.insert(kv.second);
    }
    for(auto& o : spec_.outputs) taken_.insert(o.first);
    for(auto& o : spec_.sequenceOutputs) taken_.insert(o.first);
    chooseOpset(named);

    auto& model = model_;
    model.set_ir_version(irVersionForOpset(opset_));
    model.set_producer_name(spec_.producerName);
    if(!spec_.producerVersion.empty()) model.set_producer_version(spec_.producerVersion);
    if(!spec_.docString.empty()) model.set_doc_string(spec_.docString);
    auto* g = model.mutable_graph();
    g->set_name(spec_.graphName.empty() ? "onyx" : spec_.graphName);
    domains_[""] = opset_;

    for(auto& kv : named) {
      Node* n = kv.first;
      const std::string& name = kv.second;
      switch(n->kind()) {
        case NodeKind::Input: {
          auto dn = spec_.dimNames.find(name);
          setValueInfo(*g->add_input(), name, n->value_type(), n->shape(),
                       dn == spec_.dimNames.end() ? nullptr : &dn->second, false);
          break;
        }
        case NodeKind::Param:
        case NodeKind::Constant:
          addInitializer(name, nodeHostValue(n));
          break;
        case NodeKind::Op:
          exportNode(n);
          break;
      }
    }
    for(auto& d : deferred_) addInitializer(d.first, d.second);
    bool dynamic = false;
    for(auto& kv : spec_.dimNames)
      for(auto& d : kv.second) dynamic = dynamic || !d.empty();
    for(auto& o : spec_.outputs) {
      Node* n = o.second.get();
      if(names_.at(n) != o.first) emit("Identity", {names_.at(n)}, {o.first}, {}, "");
      setValueInfo(*g->add_output(), o.first, n->value_type(), n->shape(), nullptr, dynamic);
    }
    for(auto& o : spec_.sequenceOutputs) {
      ONYX_CHECK(opset_ >= 11, "export: sequence output '", o.first, "' needs opset 11 or later (target ", opset_, ")");
      Type t = o.second.elemType;
      std::vector<std::string> items;
      for(const Expr& e : o.second.items) {
        items.push_back(names_.at(e.get()));
        if(t == Type::undefined) t = e->value_type();
      }
      ONYX_CHECK(t != Type::undefined, "export: sequence output '", o.first, "' is empty and has no element type");
      if(items.empty())
        emit("SequenceEmpty", {}, {o.first}, {{"dtype", int64_t(static_cast<int>(t))}}, "");
      else
        emit("SequenceConstruct", items, {o.first}, {}, "");
      auto* vi = g->add_output();
      vi->set_name(o.first);
      vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
          static_cast<int32_t>(t));
    }
    for(auto& d : domains_) {
      auto* op = model.add_opset_import();
      op->set_domain(d.first);
      op->set_version(d.second);
    }
    ExportResult r;
    r.opset = opset_;
    r.irVersion = model.ir_version();
    r.nodesByType = nodesByType_;
    r.initializers = initializers_;
    r.initializerBytes = initializerBytes_;
    r.externalDataFile = options_.externalDataFile;
    if(options_.fingerprintDataFile && !external_.empty()) {
      // zlib's crc32 takes a uInt length: 1 GiB at a time.
      uLong h = 0;
      for(size_t at = 0; at < external_.size(); at += (size_t(1) << 30)) {
        size_t len = std::min(external_.size() - at, size_t(1) << 30);
        h = crc32(h, reinterpret_cast<const Bytef*>(external_.data() + at), static_cast<uInt>(len));
      }
      char crc[24];
      std::snprintf(crc, sizeof crc, ".%08lx", static_cast<unsigned long>(h));
      std::string& f = r.externalDataFile;
      size_t dot = f.rfind('.');
      f = dot == std::string::npos || dot == 0 ? f + crc : f.substr(0, dot) + crc + f.substr(dot);
      for(auto& init : *model.mutable_graph()->mutable_initializer())
        for(auto& e : *init.mutable_external_data())
          if(e.key() == "location") e.set_value(f);
    }
    r.externalData = std::move(external_);
    ONYX_CHECK(model.SerializeToString(&r.model), "export: the model does not serialize (over 2 GB? use external data)");
    return r;
  }

  // ---- used by the context
  int opset() const { return opset_; }
  bool autoOpset() const { return options_.opset == 0; }
  const std::string& nameOf(Node* n) const {
    auto it = names_.find(n);
    ONYX_ASSERT(it != names_.end(), "export: node ", n->getId(), " (", n->type(), ") has no name");
    return it->second;
  }
  std::string fresh(const std::string& base) { return uniqueName(base, taken_); }
  // Initializers made by exporters come after the graph's own params and
  // constants, so that a re-imported model (where they are ordinary
  // initializers) exports them in the same order.
  std::string addConstant(const std::string& base, const Tensor& t) {
    std::string name = fresh(base);
    deferred_.emplace_back(name, t);
    return name;
  }
  void emit(const std::string& opType, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const OnnxAttrs& attrs, const std::string& domain) {
    auto* node = model_.mutable_graph()->add_node();
    node->set_op_type(opType);
    if(!domain.empty()) {
      node->set_domain(domain);
      if(!domains_.count(domain)) domains_[domain] = 1;
    }
    node->set_name(outputs.empty() ? fresh(opType) : outputs[0]);
    for(auto& i : inputs) node->add_input(i);
    for(auto& o : outputs) node->add_output(o);
    for(auto& a : attrs) setAttr(*node->add_attribute(), a.first, a.second);
    if(!outputs.empty()) {
      auto d = spec_.nodeDocStrings.find(outputs[0]);
      if(d != spec_.nodeDocStrings.end()) node->set_doc_string(d->second);
    }
    ++nodesByType_[(domain.empty() ? "" : domain + ".") + opType];
  }
  void setDomainVersion(const std::string& domain, int v) { domains_[domain] = std::max(domains_[domain], v); }

private:
  void chooseOpset(const std::vector<std::pair<Node*, std::string>>& named) {
    if(options_.opset) {
      ONYX_CHECK(options_.opset >= 1 && options_.opset <= kMaxOpset, "export: target opset ", options_.opset,
                 " is outside 1..", kMaxOpset);
      opset_ = options_.opset;
      return;
    }
    opset_ = std::max(kDefaultExportOpset, floor_);
    for(bool changed = true; changed;) {
      changed = false;
      for(auto& kv : named) {
        Node* n = kv.first;
        if(n->kind() != NodeKind::Op || pickRule(*n->op(), opset_)) continue;
        int need = 0;
        for(const OnnxRule& r : n->op()->onnxRules)
          if(r.inDefaultDomain() && (r.importable() || r.exportFn) && r.since > opset_)
            need = need ? std::min(need, r.since) : r.since;
        if(need && need <= kMaxOpset) {
          opset_ = need;
          changed = true;
        }
      }
    }
  }

  void exportNode(Node* n) {
    const OpDef& op = *n->op();
    const OnnxRule* r = pickRule(op, opset_);
    std::string where = str("node '", nameOf(n), "' (", op.name, ", opset ", opset_, ")");
    if(!r) {
      if(op.onnxRules.empty())
        throw Error(str(where, ": has no ONNX form: ", op.noOnnxWhy));
      throw Error(str(where, ": has no ONNX form at this opset (", describeRules(op), ")"));
    }
    if(!r->inDefaultDomain()) setDomainVersion(r->domain, r->since);
    ExportCtxImpl ctx(*this, n, r->opType);
    try {
      if(r->exportFn)
        r->exportFn(ctx);
      else
        ctx.emitDefault(r->opType, {}, {}, {});
    } catch(const Error& e) {
      std::string msg = e.what();
      if(msg.rfind("node '", 0) == 0) throw;
      throw Error(where + ": " + msg);
    }
  }

  void addInitializer(const std::string& name, const Tensor& t) {
    auto* init = model_.mutable_graph()->add_initializer();
    tensorToOnnx(*t, *init);
    init->set_name(name);
    ++initializers_;
    initializerBytes_ += static_cast<int64_t>(t->type() == Type::string ? 0 : t->bytes());
    if(options_.externalDataThreshold >= 0 && t->type() != Type::string &&
       static_cast<int64_t>(t->bytes()) >= options_.externalDataThreshold && t->bytes() > 0) {
      ONYX_CHECK(!options_.externalDataFile.empty(), "export: external data needs a file name");
      // 64-byte alignment, as onnx's own writer does for mmap-friendliness.
      while(external_.size() % 64) external_ += '\0';
      size_t offset = external_.size();
      external_ += init->raw_data();
      init->clear_raw_data();
      init->set_data_location(::onnx::TensorProto::EXTERNAL);
      auto add = [&](const std::string& k, const std::string& v) {
        auto* e = init->add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", options_.externalDataFile);
      add("offset", std::to_string(offset));
      add("length", std::to_string(t->bytes()));
    }
  }

  const GraphSpec& spec_;
  const ExportOptions& options_;
  ::onnx::ModelProto model_;
  std::unordered_map<Node*, std::string> names_;
  std::unordered_set<std::string> taken_;
  std::map<std::string, int> domains_;
  std::map<std::string, int> nodesByType_;
  int64_t initializers_ = 0, initializerBytes_ = 0;
  std::string external_;
  std::vector<std::pair<std::string, Tensor>> deferred_;
  int opset_ = kDefaultExportOpset;
  int floor_ = 0;
};

int ExportCtxImpl::opset(const std::string& domain) const {
  return domain.empty() || domain == "ai.onnx" ? ex_.opset() : 1;
}
std::string ExportCtxImpl::input(size_t i) {
  check(i < n_->numChildren(), "input ", i, " does not exist (", n_->numChildren(), " inputs)");
  return ex_.nameOf(n_->child(i).get());
}
std::string ExportCtxImpl::output() { return ex_.nameOf(n_); }
std::string ExportCtxImpl::fresh(const std::string& hint) { return ex_.fresh(ex_.nameOf(n_) + "/" + hint); }
std::string ExportCtxImpl::constant(const Tensor& t, const std::string& hint) {
  return ex_.addConstant(ex_.nameOf(n_) + "/" + hint, t);
}
void ExportCtxImpl::emit(const std::string& opType, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const OnnxAttrs& attrs, const std::string& domain) {
  ex_.emit(opType, inputs, outputs, attrs, domain);
}

void ExportCtxImpl::emitDefault(const std::string& opType, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& skip, const OnnxAttrs& extra) {
  const OpDef& op = *n_->op();
  const ::onnx::OpSchema* schema = nullptr;
  if(ex_.opset() <= onnxCheckerMaxOpset()) schema = ::onnx::OpSchemaRegistry::Schema(opType, ex_.opset(), "");
  OnnxAttrs attrs;
  const auto& values = n_->attrValues();
  for(size_t k = 0; k < op.attrSpecs.size(); ++k) {
    const AttrSpec& spec = op.attrSpecs[k];
    if(std::find(skip.begin(), skip.end(), spec.name) != skip.end()) continue;
    const AttrValue& v = values[k];
    if(emptyList(v)) continue;
    if(schema && !schema->attributes().count(spec.name)) {
      check(v == spec.defaultValue, "attribute ", spec.name, "=", attrToString(v), " has no ONNX form in ", opType,
            " at opset ", ex_.opset());
      continue;
    }
    attrs.emplace_back(spec.name, v);
  }
  for(auto& e : extra) attrs.push_back(e);
  std::vector<std::string> ins = inputs.empty() ? this->inputs() : inputs;
  ex_.emit(opType, ins, {output()}, attrs, "");
}

void ExportCtxImpl::requireOpset(int need, const std::string& what) {
  if(ex_.opset() >= need) return;
  if(ex_.autoOpset() && need <= kMaxOpset) throw OpsetNeeded{need};
  fail(what, " needs opset ", need, " or later (export with --opset ", need, ")");
}

std::string ExportCtxImpl::where() const {
  return str("node '", ex_.nameOf(n_), "' (", n_->type(), ", opset ", ex_.opset(), ")");
}

}  // namespace

std::vector<std::pair<Node*, std::string>> nameGraphNodes(const GraphSpec& spec) {
  ONYX_CHECK(spec.absentOutputs.empty(), "output '", spec.absentOutputs.empty() ? "" : spec.absentOutputs[0],
             "' is an absent optional; a graph file holds tensor and sequence outputs only");
  ONYX_CHECK(spec.mapOutputs.empty(), "output '", spec.mapOutputs.empty() ? "" : spec.mapOutputs[0],
             "' is a map (or a sequence of maps); exporting and saving maps is not supported yet");
  ONYX_CHECK(!spec.outputs.empty() || !spec.sequenceOutputs.empty(), "the graph has no outputs");
  ExpressionGraph* graph = nullptr;
  std::vector<Node*> stack;
  auto root = [&](const std::string& name, const Expr& e) {
    ONYX_CHECK(e, "output '", name, "' is a null expression");
    ONYX_CHECK(!graph || e->graph() == graph, "output '", name, "' belongs to another graph");
    graph = e->graph();
    stack.push_back(e.get());
  };
  for(auto& o : spec.outputs) root(o.first, o.second);
  for(auto& o : spec.sequenceOutputs)
    for(auto& e : o.second.items) root(o.first, e);
  ONYX_CHECK(graph, "the graph's outputs are empty sequences only");
  // Reachable nodes, plus every input node (an unused input stays an input).
  std::unordered_set<Node*> seen;
  for(auto& e : graph->nodes())
    if(e->kind() == NodeKind::Input) stack.push_back(e.get());
  while(!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if(!seen.insert(n).second) continue;
    for(size_t i = 0; i < n->numChildren(); ++i) stack.push_back(n->child(i).get());
  }
  std::vector<Node*> order(seen.begin(), seen.end());
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->getId() < b->getId(); });

  std::unordered_map<Node*, std::string> names;
  std::unordered_set<std::string> taken;
  for(Node* n : order)
    if(n->kind() == NodeKind::Input || n->kind() == NodeKind::Param) {
      ONYX_CHECK(!n->name().empty(), n->type(), " node ", n->getId(), " has no name");
      ONYX_CHECK(taken.insert(n->name()).second, "two ", n->type(), " nodes are named '", n->name(), "'");
      names[n] = n->name();
    }
  for(auto& o : spec.outputs) {
    Node* n = o.second.get();
    if(names.count(n) || taken.count(o.first)) continue;
    names[n] = o.first;
    taken.insert(o.first);
  }
  for(auto& o : spec.sequenceOutputs) taken.insert(o.first);
  for(Node* n : order) {
    if(names.count(n)) continue;
    std::string base = n->name();
    if(base.empty()) base = n->kind() == NodeKind::Constant ? "const" : n->type();
    names[n] = uniqueName(base, taken);
  }
  std::vector<std::pair<Node*, std::string>> out;
  for(Node* n : order) out.emplace_back(n, names[n]);
  return out;
}

Tensor nodeHostValue(Node* n) {
  Tensor t = n->graph()->value(Expr(n));
  if(t->getDeviceId().type != DeviceType::cpu) {
    Tensor h = TensorBase::create(t->shape(), t->type());
    h->copyFrom(*t);
    return h;
  }
  return t;
}

ExportResult exportOnnx(const GraphSpec& spec, const ExportOptions& options) {
  int floor = 0;
  for(;;) {
    Exporter ex(spec, options, floor);
    try {
      return ex.run();
    } catch(const OpsetNeeded& n) {
      ONYX_ASSERT(n.opset > floor, "export: requireOpset(", n.opset, ") again at opset ", floor);
      floor = n.opset;
    }
  }
}

}  // namespace onyx
