#include <onyx/converters/onnx_rules.h>

#include <algorithm>
#include <map>
#include <memory>

#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {

namespace {

// Composite rules live here from static initialisation on: their references
// (ONYX_ONNX_IMPORT's variables) stay valid as more are added.
std::vector<std::unique_ptr<OnnxRule>>& composites() {
  static std::vector<std::unique_ptr<OnnxRule>> rules;
  return rules;
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

std::string canonicalDomain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

struct Table {
  std::vector<OnnxRule> all;
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> byOp;  // (domain, op type) -> all[k], by since
};

const Table& table() {
  static const Table t = [] {
    Table t;
    for(const OpDef* op : Registry::instance().all())
      for(const OnnxRule& r : op->onnxRules) {
        if(!r.importable()) continue;  // export-only composite form
        t.all.push_back(r);
        if(!r.importFn) t.all.back().importFn = [op](OnnxImportCtx& c) { defaultImport(*op, c); };
      }
    for(const auto& r : composites()) {
      ONYX_ASSERT(static_cast<bool>(r->importFn), "ONNX import rule ", r->opType, " in ", r->source,
                  " has no importer()");
      t.all.push_back(*r);
    }
    for(size_t k = 0; k < t.all.size(); ++k) t.byOp[{canonicalDomain(t.all[k].domain), t.all[k].opType}].push_back(k);
    for(auto& kv : t.byOp) {
      auto& v = kv.second;
      std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return t.all[a].since < t.all[b].since; });
      for(size_t i = 1; i < v.size(); ++i) {
        const OnnxRule& a = t.all[v[i - 1]];
        const OnnxRule& b = t.all[v[i]];
        ONYX_ASSERT(b.since > a.until, "ONNX import rules for ", kv.first.second, " overlap: ", a.source, " (",
                    a.since, "..", a.until, ") and ", b.source, " (", b.since, "..", b.until, ")");
      }
    }
    return t;
  }();
  return t;
}

}  // namespace

OnnxRule& defineOnnxImport(const std::string& opType, int since, const char* file) {
  auto r = std::make_unique<OnnxRule>();
  r->opType = opType;
  r->since = since;
  r->source = file;
  composites().push_back(std::move(r));
  return *composites().back();
}

const std::vector<OnnxRule>& onnxImportTable() { return table().all; }

const OnnxRule* findOnnxImport(const std::string& domain, const std::string& opType, int opset) {
  auto it = table().byOp.find({canonicalDomain(domain), opType});
  if(it == table().byOp.end()) return nullptr;
  for(size_t k : it->second)
    if(table().all[k].holds(opset)) return &table().all[k];
  return nullptr;
}

}  // namespace onyx
