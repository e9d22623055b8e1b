#include <onyx/graph/onnx_import.h>

#include <algorithm>
#include <map>
#include <memory>

#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {

// ---- OnnxImportCtx helpers

Expr OnnxImportCtx::input(size_t i) {
  check(i < numInputs() && hasInput(i), "input ", i, " is required");
  OnnxValue v = inputValue(i);
  check(v.kind == OnnxValue::Kind::Tensor, "input ", i, " must be a tensor");
  return v.tensor;
}

std::vector<Expr> OnnxImportCtx::inputSequence(size_t i) {
  check(i < numInputs() && hasInput(i), "input ", i, " is required");
  OnnxValue v = inputValue(i);
  check(v.kind == OnnxValue::Kind::Sequence, "input ", i, " must be a sequence");
  return v.sequence;
}

std::vector<int64_t> OnnxImportCtx::ints(size_t i) {
  Tensor t = value(i);
  check(isInt(t->type()), "input ", i, " must be an integer tensor, got ", t->type());
  return t->toVector<int64_t>();
}

double OnnxImportCtx::scalar(size_t i) {
  Tensor t = value(i);
  check(t->size() == 1, "input ", i, " must hold one value, got shape ", t->shape());
  return t->getAsDouble(0);
}

int64_t OnnxImportCtx::attrInt(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrInt(name, 0);
}
double OnnxImportCtx::attrFloat(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrFloat(name, 0.0);
}
std::string OnnxImportCtx::attrString(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrString(name, std::string());
}

Expr OnnxImportCtx::make(const char* op, const std::vector<Expr>& inputs,
                         const std::vector<std::pair<std::string, AttrValue>>& attrs) {
  return graph().make(Registry::instance().get(op), inputs, attrs);
}

Expr OnnxImportCtx::constant(const Tensor& t) { return graph().constant(t); }

std::string OnnxImportCtx::where() const {
  std::string d = domain().empty() ? "" : domain() + ".";
  return str("node '", nodeName(), "' (", d, opType(), ", opset ", opset(), ")");
}

void OnnxImportCtx::failMsg(const std::string& msg) const { throw Error(where() + ": " + msg); }

// ---- the table

namespace {

struct RuleStore {
  std::vector<std::unique_ptr<OnnxImportRule>> rules;
};
RuleStore& store() {
  static RuleStore s;
  return s;
}

// Inputs in order, attributes by name, one output.
void defaultImport(const OpDef& op, OnnxImportCtx& c) {
  size_t n = c.numInputs();
  while(n > 0 && !c.hasInput(n - 1)) --n;  // trailing optional inputs left out
  c.check(static_cast<int>(n) >= op.minInputs && (op.maxInputs < 0 || static_cast<int>(n) <= op.maxInputs),
          "takes ", op.minInputs, op.maxInputs == op.minInputs ? "" : "..",
          op.maxInputs == op.minInputs ? std::string() : (op.maxInputs < 0 ? "n" : std::to_string(op.maxInputs)),
          " inputs, got ", n);
  std::vector<Expr> in;
  for(size_t i = 0; i < n; ++i) in.push_back(c.input(i));
  std::vector<std::pair<std::string, AttrValue>> attrs;
  for(const AttrSpec& s : op.attrSpecs) {
    const char* name = s.name.c_str();
    if(!c.hasAttr(name)) continue;
    switch(s.kind()) {
      case AttrKind::Int: attrs.emplace_back(s.name, c.attrInt(name, 0)); break;
      case AttrKind::Float: attrs.emplace_back(s.name, c.attrFloat(name, 0.0)); break;
      case AttrKind::String: attrs.emplace_back(s.name, c.attrString(name, "")); break;
      case AttrKind::Ints: attrs.emplace_back(s.name, attr(c.attrInts(name))); break;
      case AttrKind::Floats: attrs.emplace_back(s.name, c.attrFloats(name)); break;
    }
  }
  for(size_t i = 1; i < c.numOutputs(); ++i)
    c.check(!c.wantsOutput(i), "output ", i, " is not supported");
  c.setOutput(0, c.make(op.name.c_str(), in, attrs));
}

struct Table {
  std::map<std::pair<std::string, std::string>, std::vector<OnnxImportEntry>> byOp;
  std::vector<OnnxImportEntry> all;
};

const Table& table() {
  static const Table t = [] {
    Table t;
    for(const OpDef* op : Registry::instance().all())
      for(const OnnxMapping& m : op->onnxMappings) {
        if(!m.importable) continue;  // export-only composite form
        OnnxImportFn fn = m.importer;
        if(!fn) fn = [op](OnnxImportCtx& c) { defaultImport(*op, c); };
        t.all.push_back({m.opType, m.domain, m.since, m.until, fn, op->name});
      }
    for(const auto& r : store().rules) {
      ONYX_ASSERT(static_cast<bool>(r->fn), "ONNX import rule ", r->opType, " in ", r->file, " has no importer()");
      t.all.push_back({r->opType, r->domainName, r->since, r->untilOpset, r->fn, r->file});
    }
    for(const auto& e : t.all) {
      std::string dom = e.domain == "ai.onnx" ? "" : e.domain;
      t.byOp[{dom, e.opType}].push_back(e);
    }
    for(auto& kv : t.byOp) {
      auto& v = kv.second;
      std::sort(v.begin(), v.end(), [](const OnnxImportEntry& a, const OnnxImportEntry& b) { return a.since < b.since; });
      for(size_t i = 1; i < v.size(); ++i)
        ONYX_ASSERT(v[i].since > v[i - 1].until, "ONNX import rules for ", kv.first.second, " overlap: ",
                    v[i - 1].source, " (", v[i - 1].since, "..", v[i - 1].until, ") and ", v[i].source, " (",
                    v[i].since, "..", v[i].until, ")");
    }
    return t;
  }();
  return t;
}

}  // namespace

OnnxImportRule& defineOnnxImport(const std::string& opType, int since, const char* file) {
  auto r = std::make_unique<OnnxImportRule>();
  r->opType = opType;
  r->since = since;
  r->file = file;
  store().rules.push_back(std::move(r));
  return *store().rules.back();
}

std::vector<OnnxImportEntry> onnxImportTable() { return table().all; }

const OnnxImportEntry* findOnnxImport(const std::string& domain, const std::string& opType, int opset) {
  std::string dom = domain == "ai.onnx" ? "" : domain;
  auto it = table().byOp.find({dom, opType});
  if(it == table().byOp.end()) return nullptr;
  for(const auto& e : it->second)
    if(opset >= e.since && opset <= e.until) return &e;
  return nullptr;
}

}  // namespace onyx
