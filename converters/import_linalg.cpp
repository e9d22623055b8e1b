// ONNX linear algebra with no registry op of its own: Einsum, and Inverse of
// the com.microsoft domain.
#include <string>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/linalg.h>

namespace onyx {

ONYX_ONNX_IMPORT(kEinsumImport, "Einsum", 12).importer([](OnnxImportCtx& c) {
  std::vector<Expr> xs;
  for(size_t i = 0; i < c.numInputs(); ++i) xs.push_back(c.input(i));
  std::string eq = c.attrString("equation");
  try {
    c.setOutput(0, einsum(eq, xs));
  } catch(const Error& e) {
    c.fail(e.what());
  }
});

// ONNX Runtime's contrib op, what inverse exports as.
ONYX_ONNX_IMPORT(kInverseImport, "Inverse", 1).inDomain("com.microsoft").importer([](OnnxImportCtx& c) {
  c.setOutput(0, inverse(c.input(0)));
});

}  // namespace onyx
