// The one ONNX import table: the rules of every registry op (OpDef::onnxRules)
// merged with the composite import rules for ONNX ops that are not registry
// ops (converters/import_<onnx family>.cpp), looked up by (domain, op type,
// the model's opset for the domain). See graph/onnx_rule.h.
#pragma once
#include <string>
#include <vector>

#include <onyx/graph/onnx_import.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

// Declares a composite import rule in a converters/import_*.cpp file:
//   ONYX_ONNX_IMPORT(kOnnxLrn, "LRN", 1).importer([](OnnxImportCtx& c) { ... });
//   ONYX_ONNX_IMPORT(kScan8, "Scan", 8).untilOpset(8).importer(...);
//   ONYX_ONNX_IMPORT(kOnnxBinarizer, "Binarizer", 1).inDomain("ai.onnx.ml").importer(...);
#define ONYX_ONNX_IMPORT(var, opType, since) \
  static ::onyx::OnnxRule& var = ::onyx::defineOnnxImport(opType, since, __FILE__)
OnnxRule& defineOnnxImport(const std::string& opType, int since, const char* file);

// Every importable rule, each with its import function (a registry op's
// rule without one carries the default import). Built on first use.
const std::vector<OnnxRule>& onnxImportTable();
// The rule for (domain, opType) at the model's opset, or nullptr.
const OnnxRule* findOnnxImport(const std::string& domain, const std::string& opType, int opset);

}  // namespace onyx
