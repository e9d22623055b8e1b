// One ONNX rule: how ONNX op `opType` of `domain` imports into graph
// expressions and how a graph node exports to ONNX nodes, for the opsets
// since..until (inclusive; the model's or the export target's opset for that
// domain). The one type for every ONNX mapping in Onyx, declared in one of
// two places:
//
//   1. On a registry op, in its family file (src/ops/<family>.cpp):
//        ONYX_OP(kRelu, "relu")...onnx("Relu", 6)
//        ...onnx("Gemm", 7).importer([](OnnxImportCtx& c) { ... })
//        ...onnx("Clip", 11).exporter([](OnnxExportCtx& c) { ... })
//        ...onnxExport(13, [](OnnxExportCtx& c) { ... })  // export only
//      With no importer, the default import applies (ONNX inputs map to the
//      op's inputs in order, ONNX attributes to the op's attributes of the
//      same name, one output); with no exporter, the default export (see
//      graph/onnx_export.h).
//   2. For an ONNX op that is a composite of registry ops (no op of its
//      own), in converters/import_<onnx family>.cpp:
//        ONYX_ONNX_IMPORT(kHardSigmoid, "HardSigmoid", 6).importer([](OnnxImportCtx& c) { ... });
//      with .untilOpset(n) and .inDomain("ai.onnx.ml") when needed.
//
// The importer looks rules up in converters/onnx_rules.h's table (both kinds
// merged; overlapping ranges for one op are a startup assertion); the
// exporter reads the registry op's own rules.
#pragma once
#include <functional>
#include <string>
#include <utility>

namespace onyx {

class OnnxImportCtx;
class OnnxExportCtx;
using OnnxImportFn = std::function<void(OnnxImportCtx&)>;
using OnnxExportFn = std::function<void(OnnxExportCtx&)>;

// `until` of a rule that holds for every later opset.
constexpr int kOpsetOpen = 1 << 30;

struct OnnxRule {
  std::string domain;  // "" is the default ONNX domain (ai.onnx)
  std::string opType;  // "" on an export-only composite form (OpDef::onnxExport)
  int since = 1;
  int until = kOpsetOpen;  // inclusive
  OnnxImportFn importFn;   // empty on a registry op: the default import
  OnnxExportFn exportFn;   // empty: the default export
  std::string source;      // where it was declared: the registry op's name, or the declaring file

  // Whether an ONNX node can import through this rule (an export-only form cannot).
  bool importable() const { return !opType.empty(); }
  bool holds(int opset) const { return opset >= since && opset <= until; }
  bool inDefaultDomain() const { return domain.empty() || domain == "ai.onnx"; }

  // Builders of the composite import rules (ONYX_ONNX_IMPORT).
  OnnxRule& untilOpset(int v) { until = v; return *this; }
  OnnxRule& inDomain(std::string d) { domain = std::move(d); return *this; }
  OnnxRule& importer(OnnxImportFn f) { importFn = std::move(f); return *this; }
};

}  // namespace onyx
