// Driver of the docs_adding_an_op test: docs/adding-an-op.md's example op,
// compiled as it stands there (the page's ```cpp blocks make the file next to
// this one), must register, compute x * sigmoid(1.702 x), differentiate to
// its derivative, and export to ONNX as Mul/Sigmoid/Mul.
#include <onyx/graph/op_def.h>
#include <onyx/onyx.h>

#include <cmath>
#include <iostream>
#include <vector>

namespace onyx {
Expr quick_gelu(Expr x);  // defined by the docs page
}
using namespace onyx;

int main() {
  int bad = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if(!ok) {
      std::cerr << "FAIL: " << what << "\n";
      ++bad;
    }
  };
  const OpDef* op = Registry::instance().find("quick_gelu");
  expect(op != nullptr && op->inferFn && op->kernels[0] && op->differentiable(), "quick_gelu is in the registry, complete");

  std::vector<double> xs = {-2.5, -0.5, 0.25, 1.5};
  auto graph = New<ExpressionGraph>();
  graph->setDevice(cpu());
  graph->reserveWorkspaceMB(8);
  auto x = graph->param("x", {1, 4}, inits::fromVector(xs), Type::float64);
  auto y = quick_gelu(x);
  sum(y);  // the loss backward() starts from: the last node built
  graph->forward();
  graph->backward();
  for(size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i], s = 1 / (1 + std::exp(-1.702 * v));
    double gy = y->val()->getAsDouble(i), gx = x->grad()->getAsDouble(i);
    expect(std::fabs(gy - v * s) < 1e-12, "forward at " + std::to_string(v));
    expect(std::fabs(gx - (s + 1.702 * v * s * (1 - s))) < 1e-12, "gradient at " + std::to_string(v));
  }

  GraphSpec spec;
  spec.outputs = {{"y", y}};
  ExportResult r = exportOnnx(spec);
  expect(r.nodesByType["Sigmoid"] == 1 && r.nodesByType["Mul"] == 2, "exported as Mul(x, Sigmoid(Mul(x, 1.702)))");
  checkOnnxModel(r.model, "quick_gelu.onnx");

  std::cout << (bad ? "docs/adding-an-op.md example: FAILED\n" : "docs/adding-an-op.md example: registered, values, gradient and ONNX export checked\n");
  return bad ? 1 : 0;
}
