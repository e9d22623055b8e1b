// Imports of the ai.onnx.preview.training optimizer ops (Adagrad, Momentum,
// Adam) as composites of element-wise ops. Inputs: R (learning rate, float
// scalar), T (update count, int64 scalar), then the n tensors X, their n
// gradients G and the n accumulators of each kind; outputs: the n new X,
// then the n new accumulators of each kind. T enters as a graph value (no
// value() read), so the graph does not depend on the step number.
//
// The Gradient op of that domain imports as the gradient expressions of
// ExpressionGraph::gradients(), built on the graph that computes its y.
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>

namespace onyx {

namespace {

constexpr const char* kTraining = "ai.onnx.preview.training";

struct OptimizerInputs {
  Expr r, t;                           // R and T converted to X's type
  Expr positive;                       // T > 0, bool
  std::vector<std::vector<Expr>> groups;  // X, G, then each accumulator kind
};

// Splits the inputs after R and T into `kinds` groups of equal size (X, G,
// accumulators...).
OptimizerInputs optimizerInputs(OnnxImportCtx& c, size_t kinds) {
  size_t n = c.numInputs();
  c.check(n >= 2 + kinds && (n - 2) % kinds == 0, "has ", n, " inputs; it needs R, T and ", kinds,
          " groups of the same number of tensors");
  c.check(c.numOutputs() == (n - 2) / kinds * (kinds - 1), "has ", c.numOutputs(), " outputs; it needs ",
          (n - 2) / kinds * (kinds - 1));
  size_t m = (n - 2) / kinds;
  OptimizerInputs in;
  in.groups.assign(kinds, {});
  for(size_t k = 0; k < kinds; ++k)
    for(size_t j = 0; j < m; ++j) {
      Expr e = c.input(2 + k * m + j);
      c.check(isFloat(e->value_type()), "input ", 2 + k * m + j, " has element type ", e->value_type(),
              "; the tensors must be float");
      in.groups[k].push_back(e);
    }
  Expr r = c.input(0), t = c.input(1);
  c.check(r->shape().elements() == 1 && isFloat(r->value_type()), "R must be a float scalar, got ", r->shape(),
          " ", r->value_type());
  c.check(t->shape().elements() == 1 && isInt(t->value_type()), "T must be an integer scalar, got ", t->shape(),
          " ", t->value_type());
  Type ft = in.groups[0][0]->value_type();
  in.r = r->value_type() == ft ? r : cast(r, ft);
  in.t = cast(t, ft);
  in.positive = gt(t, 0.0);
  return in;
}

}  // namespace

// Adagrad: r = R / (1 + T decay_factor), g = norm_coefficient X + G,
// H' = H + g^2, X' = X - r g / (sqrt(H') + epsilon).
ONYX_ONNX_IMPORT(kOnnxAdagrad, "Adagrad", 1).inDomain(kTraining).importer([](OnnxImportCtx& c) {
  double decay = c.attrFloat("decay_factor", 0.0);
  double eps = c.attrFloat("epsilon", 0.0);
  double norm = c.attrFloat("norm_coefficient", 0.0);
  OptimizerInputs in = optimizerInputs(c, 3);
  size_t m = in.groups[0].size();
  Expr r = in.r / (1.0 + in.t * decay);
  for(size_t j = 0; j < m; ++j) {
    Expr x = in.groups[0][j], g = norm * x + in.groups[1][j];
    Expr h = in.groups[2][j] + g * g;
    c.setOutput(j, x - r * g / (sqrt(h) + eps));
    c.setOutput(m + j, h);
  }
});

// Momentum: g = norm_coefficient X + G, b = beta if T > 0 else 1,
// V' = alpha V + b g; standard: X' = X - R V', nesterov:
// X' = X - R (g + alpha V').
ONYX_ONNX_IMPORT(kOnnxMomentum, "Momentum", 1).inDomain(kTraining).importer([](OnnxImportCtx& c) {
  double alpha = c.attrFloat("alpha"), beta = c.attrFloat("beta");
  double norm = c.attrFloat("norm_coefficient");
  std::string mode = c.attrString("mode");
  c.check(mode == "standard" || mode == "nesterov", "mode must be standard or nesterov, got '", mode, "'");
  OptimizerInputs in = optimizerInputs(c, 3);
  size_t m = in.groups[0].size();
  Expr b = where(in.positive, c.graph().scalar(beta, in.r->value_type()), 1.0);
  for(size_t j = 0; j < m; ++j) {
    Expr x = in.groups[0][j], g = norm * x + in.groups[1][j];
    Expr v = alpha * in.groups[2][j] + b * g;
    c.setOutput(j, mode == "standard" ? x - in.r * v : x - in.r * (g + alpha * v));
    c.setOutput(m + j, v);
  }
});

// Adam: g = norm_coefficient X + G, V' = alpha V + (1 - alpha) g,
// H' = beta H + (1 - beta) g^2, r = R sqrt(1 - beta^T) / (1 - alpha^T) if
// T > 0 else R, X' = (1 - norm_coefficient_post) (X - r V' / (sqrt(H') + epsilon)).
ONYX_ONNX_IMPORT(kOnnxAdam, "Adam", 1).inDomain(kTraining).importer([](OnnxImportCtx& c) {
  double alpha = c.attrFloat("alpha", 0.9), beta = c.attrFloat("beta", 0.999);
  double eps = c.attrFloat("epsilon", 1e-6);
  double norm = c.attrFloat("norm_coefficient", 0.0), post = c.attrFloat("norm_coefficient_post", 0.0);
  OptimizerInputs in = optimizerInputs(c, 4);
  size_t m = in.groups[0].size();
  // At T = 0 the corrected rate is 0/0: the where picks R there.
  Expr corrected = in.r * sqrt(1.0 - pow(beta, in.t)) / (1.0 - pow(alpha, in.t));
  Expr r = where(in.positive, corrected, in.r);
  for(size_t j = 0; j < m; ++j) {
    Expr x = in.groups[0][j], g = norm * x + in.groups[1][j];
    Expr v = alpha * in.groups[2][j] + (1 - alpha) * g;
    Expr h = beta * in.groups[3][j] + (1 - beta) * (g * g);
    c.setOutput(j, (1 - post) * (x - r * (v / (sqrt(h) + eps))));
    c.setOutput(m + j, v);
    c.setOutput(2 * m + j, h);
  }
});

// Gradient: output i is d(sum of Y)/dX_i, Y the value named by attribute y
// (seeded with ones), X_i the value named by xs[i]; zs names inputs that are
// held constant. The node's inputs are the values of xs then zs. The
// gradient is built on the graph as it computes Y, so each input must be the
// very value its name refers to: feeding other values into the sub-graph
// would mean re-evaluating it, which this import does not do.
ONYX_ONNX_IMPORT(kOnnxGradient, "Gradient", 1).inDomain(kTraining).importer([](OnnxImportCtx& c) {
  std::vector<std::string> xs = c.attrStrings("xs");
  std::vector<std::string> zs = c.attrStrings("zs");
  std::string yName = c.attrString("y");
  c.check(!xs.empty(), "attribute 'xs' must name at least one value to differentiate with respect to");
  c.check(c.numInputs() == xs.size() + zs.size(), "has ", c.numInputs(), " inputs; it needs one per name in xs and zs (",
          xs.size() + zs.size(), ")");
  c.check(c.numOutputs() == xs.size(), "has ", c.numOutputs(), " outputs; it needs one per name in xs (", xs.size(), ")");
  auto named = [&](const std::string& name, const char* attr) {
    OnnxValue v = c.valueByName(name);
    c.check(v.kind == OnnxValue::Kind::Tensor, "'", name, "' (named by attribute ", attr, ") is not a tensor");
    return v.tensor;
  };
  Expr y = named(yName, "y");
  c.check(isFloat(y->value_type()), "y '", yName, "' has element type ", y->value_type(), "; it must be float");
  std::vector<Expr> xExprs;
  for(size_t i = 0; i < xs.size() + zs.size(); ++i) {
    bool isX = i < xs.size();
    const std::string& name = isX ? xs[i] : zs[i - xs.size()];
    Expr v = named(name, isX ? "xs" : "zs");
    c.check(c.hasInput(i) && c.input(i) == v, "input ", i, " is not the value '", name, "' that attribute ",
            isX ? "xs" : "zs", " names; Onyx differentiates the graph as built and cannot feed other values into it");
    if(isX) xExprs.push_back(v);
  }
  std::vector<Expr> grads = c.graph().gradients(y, xExprs);
  for(size_t i = 0; i < xs.size(); ++i) c.setOutput(i, grads[i]);
});

}  // namespace onyx
