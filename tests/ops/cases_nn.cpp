// Harness cases for src/ops/nn.cpp. References are plain loops over doubles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

int64_t prodOf(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for(size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// Softmax / log-softmax of every line of x along `axis`.
Ref refSoftmax(const Ref& x, int axis, bool logOut) {
  size_t r = x.shape.size();
  size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(r) : axis);
  int64_t outer = prodOf(x.shape, 0, a), n = x.shape[a], inner = prodOf(x.shape, a + 1, r);
  Ref y = refLike(x);
  for(int64_t o = 0; o < outer; ++o)
    for(int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return o * n * inner + j * inner + i; };
      double m = -std::numeric_limits<double>::infinity();
      for(int64_t j = 0; j < n; ++j) m = std::max(m, x[at(j)]);
      double s = 0;
      for(int64_t j = 0; j < n; ++j) s += std::exp(x[at(j)] - m);
      for(int64_t j = 0; j < n; ++j)
        y[at(j)] = logOut ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

// p broadcast (numpy rules) to `shape`.
Ref refExpand(const Ref& p, const std::vector<int64_t>& shape) {
  return refBroadcast({refOfShape(shape), p}, [](const std::vector<double>& a) { return a[1]; });
}

// Layer norm over the dims from `axis` on; gamma/beta null means 1/0. The
// op takes epsilon as a float32 value (as ONNX does): so does the reference,
// or a row of small variance differs beyond the float64 tolerance.
Ref refLayerNorm(const Ref& x, const Ref* gamma, const Ref* beta, int axis, double eps) {
  eps = static_cast<double>(static_cast<float>(eps));
  size_t r = x.shape.size();
  size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(r) : axis);
  std::vector<int64_t> block(x.shape.begin() + static_cast<long>(a), x.shape.end());
  int64_t n = prodOf(block, 0, block.size()), rows = x.size() / n;
  Ref g = gamma ? refExpand(*gamma, block) : refExpand(Ref{{}, {1.0}}, block);
  Ref b = beta ? refExpand(*beta, block) : refExpand(Ref{{}, {0.0}}, block);
  Ref y = refLike(x);
  for(int64_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    for(int64_t j = 0; j < n; ++j) mean += x[row * n + j];
    mean /= double(n);
    for(int64_t j = 0; j < n; ++j) var += (x[row * n + j] - mean) * (x[row * n + j] - mean);
    var /= double(n);
    for(int64_t j = 0; j < n; ++j) y[row * n + j] = (x[row * n + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  }
  return y;
}

// layer_norm's gradients through the explicit Jacobian of xhat (not the
// closed form the kernel uses): d xhat_j / d x_i = rstd (delta_ij - 1/n -
// xhat_i xhat_j / n). grad: dx (gamma given); params: the [2, n] sums of dy
// xhat and dy over the rows.
Ref refLayerNormGrad(const Ref& dy, const Ref& x, const Ref* gamma, int axis, double eps, bool params) {
  Ref xhat = refLayerNorm(x, nullptr, nullptr, axis, eps);
  eps = static_cast<double>(static_cast<float>(eps));
  size_t r = x.shape.size();
  size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(r) : axis);
  std::vector<int64_t> block(x.shape.begin() + static_cast<long>(a), x.shape.end());
  int64_t n = prodOf(block, 0, block.size()), rows = x.size() / n;
  if(params) {
    Ref out = refOfShape({2, n});
    for(int64_t row = 0; row < rows; ++row)
      for(int64_t j = 0; j < n; ++j) {
        out[j] += dy[row * n + j] * xhat[row * n + j];
        out[n + j] += dy[row * n + j];
      }
    return out;
  }
  Ref g = refExpand(*gamma, block);
  Ref dx = refLike(x);
  for(int64_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    for(int64_t j = 0; j < n; ++j) mean += x[row * n + j];
    mean /= double(n);
    for(int64_t j = 0; j < n; ++j) var += (x[row * n + j] - mean) * (x[row * n + j] - mean);
    double rstd = 1 / std::sqrt(var / double(n) + eps);
    for(int64_t i = 0; i < n; ++i) {
      double s = 0;
      for(int64_t j = 0; j < n; ++j) {
        double jac = rstd * ((i == j ? 1.0 : 0.0) - 1.0 / double(n) - xhat[row * n + i] * xhat[row * n + j] / double(n));
        s += dy[row * n + j] * g[j] * jac;
      }
      dx[row * n + i] = s;
    }
  }
  return dx;
}

// Explicit int64 labels.
InputSpec labelValues(std::vector<int64_t> shape, std::vector<double> v) {
  InputSpec s = ints(std::move(shape), 0, 0);
  s.values = std::move(v);
  return s;
}

// -sum_c q_c log_softmax(x)_c per row, q = (1 - ls) onehot + ls / C.
Ref refCrossEntropy(const Ref& logits, const Ref& labels, double ls) {
  int64_t classes = logits.shape.back();
  Ref y = refOfShape(labels.shape);
  for(int64_t row = 0; row < labels.size(); ++row) {
    const double* x = &logits.v[static_cast<size_t>(row * classes)];
    double m = *std::max_element(x, x + classes), s = 0;
    for(int64_t c = 0; c < classes; ++c) s += std::exp(x[c] - m);
    double lse = m + std::log(s), loss = 0;
    for(int64_t c = 0; c < classes; ++c) {
      double q = (1 - ls) * (c == static_cast<int64_t>(labels[row]) ? 1.0 : 0.0) + ls / double(classes);
      loss -= q * (x[c] - lse);
    }
    y[row] = loss;
  }
  return y;
}

// ------------------------------------------------------------------ softmax

ONYX_OP_CASE({"softmax", "axis0_3d", {in({3, 2, 4}, -3, 3)},
              [](Xs x) { return softmax(x[0], 0); },
              [](Rs x) { return refSoftmax(x[0], 0, false); }});
ONYX_OP_CASE({"softmax", "axis1_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return softmax(x[0], 1); },
              [](Rs x) { return refSoftmax(x[0], 1, false); }});
ONYX_OP_CASE({"softmax", "last_axis_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return softmax(x[0]); },
              [](Rs x) { return refSoftmax(x[0], -1, false); }});
// exp(1000) overflows even float64: the kernel must subtract the max first.
ONYX_OP_CASE({"softmax", "large_logits_finite",
              {values({2, 4}, {1000, 1001, 999, 998, -1000, 0, 1000, 1000.5})},
              [](Xs x) { return softmax(x[0]); },
              [](Rs x) { return refSoftmax(x[0], -1, false); }});

// softmax_grad through the Jacobian of softmax, dy_j/dx_i = y_j (delta_ij -
// y_i), summed over each line (the kernel's closed form is not used).
Ref refSoftmaxGrad(const Ref& dy, const Ref& y, int axis) {
  const int r = static_cast<int>(y.shape.size());
  const size_t a = static_cast<size_t>(axis < 0 ? axis + r : axis);
  const int64_t n = y.shape[a], inner = prodOf(y.shape, a + 1, y.shape.size());
  const int64_t outer = y.size() / (n * inner);
  Ref dx = refLike(y);
  for(int64_t o = 0; o < outer; ++o)
    for(int64_t in = 0; in < inner; ++in)
      for(int64_t i = 0; i < n; ++i) {
        const int64_t at = (o * n + i) * inner + in;
        double s = 0;
        for(int64_t j = 0; j < n; ++j) {
          const int64_t jt = (o * n + j) * inner + in;
          s += dy[jt] * y[jt] * ((i == j ? 1.0 : 0.0) - y[at]);
        }
        dx[at] = s;
      }
  return dx;
}

ONYX_OP_CASE({"softmax_grad", "last_axis", {in({3, 5}, -2, 2), in({3, 5}, 0.05, 0.5)},
              [](Xs x) { return softmax_grad(x[0], x[1]); },
              [](Rs x) { return refSoftmaxGrad(x[0], x[1], -1); }});
ONYX_OP_CASE({"softmax_grad", "axis1_3d", {in({2, 3, 4}, -2, 2), in({2, 3, 4}, 0.05, 0.5)},
              [](Xs x) { return softmax_grad(x[0], x[1], 1); },
              [](Rs x) { return refSoftmaxGrad(x[0], x[1], 1); }});
// Lines of 300: the kernel's four-way sum and its tail.
ONYX_OP_CASE({"softmax_grad", "long_lines", {in({2, 300}, -2, 2), in({2, 300}, 0.0, 0.01)},
              [](Xs x) { return softmax_grad(x[0], x[1]); },
              [](Rs x) { return refSoftmaxGrad(x[0], x[1], -1); },
              /*gradcheck=*/false});

ONYX_OP_CASE({"log_softmax", "axis0_3d", {in({3, 2, 4}, -3, 3)},
              [](Xs x) { return log_softmax(x[0], 0); },
              [](Rs x) { return refSoftmax(x[0], 0, true); }});
ONYX_OP_CASE({"log_softmax", "axis1_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return log_softmax(x[0], 1); },
              [](Rs x) { return refSoftmax(x[0], 1, true); }});
ONYX_OP_CASE({"log_softmax", "last_axis_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return log_softmax(x[0], -1); },
              [](Rs x) { return refSoftmax(x[0], -1, true); }});
ONYX_OP_CASE({"log_softmax", "large_logits_finite",
              {values({2, 4}, {1000, 1001, 999, 998, -1000, 0, 1000, 1000.5})},
              [](Xs x) { return log_softmax(x[0]); },
              [](Rs x) { return refSoftmax(x[0], -1, true); },
              true, /*rtol=*/1e-5, /*atol=*/1e-4});

// ------------------------------------------------------------------ hardmax

// 1 at the first maximum of every line along `axis`, 0 elsewhere.
Ref refHardmax(const Ref& x, int axis) {
  size_t r = x.shape.size();
  size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int>(r) : axis);
  int64_t outer = prodOf(x.shape, 0, a), n = x.shape[a], inner = prodOf(x.shape, a + 1, r);
  Ref y = refLike(x);
  for(int64_t o = 0; o < outer; ++o)
    for(int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for(int64_t j = 1; j < n; ++j)
        if(x[o * n * inner + j * inner + i] > x[o * n * inner + best * inner + i]) best = j;
      y[o * n * inner + best * inner + i] = 1;
    }
  return y;
}

ONYX_OP_CASE({"hardmax", "last_axis_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return hardmax(x[0]); },
              [](Rs x) { return refHardmax(x[0], -1); }, /*gradcheck=*/false});
ONYX_OP_CASE({"hardmax", "axis0_3d", {in({3, 2, 4}, -3, 3)},
              [](Xs x) { return hardmax(x[0], 0); },
              [](Rs x) { return refHardmax(x[0], 0); }, /*gradcheck=*/false});
ONYX_OP_CASE({"hardmax", "axis1_3d", {in({2, 3, 4}, -3, 3)},
              [](Xs x) { return hardmax(x[0], 1); },
              [](Rs x) { return refHardmax(x[0], 1); }, /*gradcheck=*/false});
// Ties: the first maximum wins, exactly one 1 per line.
ONYX_OP_CASE({"hardmax", "ties_first_wins", {values({2, 4}, {1, 3, 3, 0, 2, 2, 2, 2})},
              [](Xs x) { return hardmax(x[0]); },
              [](Rs x) {
                Ref y = refOfShape({2, 4});
                y[1] = 1;
                y[4] = 1;
                (void)x;
                return y;
              }, /*gradcheck=*/false});

// --------------------------------------------------------------- layer_norm

ONYX_OP_CASE({"layer_norm", "2d_last_axis", {in({4, 6}, -2, 2), in({6}, 0.5, 1.5), in({6})},
              [](Xs x) { return layer_norm(x[0], x[1], x[2]); },
              [](Rs x) { return refLayerNorm(x[0], &x[1], &x[2], -1, 1e-5); }});
ONYX_OP_CASE({"layer_norm", "3d_last_axis", {in({2, 3, 5}, -2, 2), in({5}, 0.5, 1.5), in({5})},
              [](Xs x) { return layer_norm(x[0], x[1], x[2], -1, 1e-3); },
              [](Rs x) { return refLayerNorm(x[0], &x[1], &x[2], -1, 1e-3); }});
// Normalises over the last two dims; gamma covers both, beta broadcasts over one.
ONYX_OP_CASE({"layer_norm", "3d_axis1_broadcast_params", {in({2, 3, 4}, -2, 2), in({3, 4}, 0.5, 1.5), in({4})},
              [](Xs x) { return layer_norm(x[0], x[1], x[2], 1); },
              [](Rs x) { return refLayerNorm(x[0], &x[1], &x[2], 1, 1e-5); }});
ONYX_OP_CASE({"layer_norm", "no_affine_overload", {in({3, 5}, -2, 2)},
              [](Xs x) { return layer_norm(x[0]); },
              [](Rs x) { return refLayerNorm(x[0], nullptr, nullptr, -1, 1e-5); }});

ONYX_OP_CASE({"layer_norm_grad", "2d_last_axis", {in({4, 6}, -2, 2), in({4, 6}, -2, 2), in({6}, 0.5, 1.5)},
              [](Xs x) { return layer_norm_grad(x[0], x[1], x[2]); },
              [](Rs x) { return refLayerNormGrad(x[0], x[1], &x[2], -1, 1e-5, false); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"layer_norm_grad", "3d_axis1_broadcast_gamma", {in({2, 3, 4}, -2, 2), in({2, 3, 4}, -2, 2), in({4}, 0.5, 1.5)},
              [](Xs x) { return layer_norm_grad(x[0], x[1], x[2], 1, 1e-3); },
              [](Rs x) { return refLayerNormGrad(x[0], x[1], &x[2], 1, 1e-3, false); },
              /*gradcheck=*/false});
// Rows of 300: the kernel's sums run their four-way body and a tail.
ONYX_OP_CASE({"layer_norm_grad", "long_rows", {in({3, 300}, -2, 2), in({3, 300}, -3, 3), in({300}, 0.5, 1.5)},
              [](Xs x) { return layer_norm_grad(x[0], x[1], x[2]); },
              [](Rs x) { return refLayerNormGrad(x[0], x[1], &x[2], -1, 1e-5, false); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"layer_norm_param_grad", "2d_last_axis", {in({5, 6}, -2, 2), in({5, 6}, -2, 2)},
              [](Xs x) { return layer_norm_param_grad(x[0], x[1]); },
              [](Rs x) { return refLayerNormGrad(x[0], x[1], nullptr, -1, 1e-5, true); },
              /*gradcheck=*/false});
// 130 rows: more than the kernel's 64 blocks, uneven.
ONYX_OP_CASE({"layer_norm_param_grad", "3d_axis1_many_rows", {in({130, 2, 3}, -2, 2), in({130, 2, 3}, -2, 2)},
              [](Xs x) { return layer_norm_param_grad(x[0], x[1], 1, 1e-3); },
              [](Rs x) { return refLayerNormGrad(x[0], x[1], nullptr, 1, 1e-3, true); },
              /*gradcheck=*/false});

// ------------------------------------------------------------ cross_entropy

ONYX_OP_CASE({"cross_entropy", "2d_int64", {in({4, 5}, -3, 3), ints({4}, 0, 4)},
              [](Xs x) { return cross_entropy(x[0], x[1]); },
              [](Rs x) { return refCrossEntropy(x[0], x[1], 0); }});
ONYX_OP_CASE({"cross_entropy", "3d_label_smoothing", {in({2, 3, 5}, -3, 3), ints({2, 3}, 0, 4)},
              [](Xs x) { return cross_entropy(x[0], x[1], 0.1f); },
              [](Rs x) { return refCrossEntropy(x[0], x[1], double(0.1f)); }});
ONYX_OP_CASE({"cross_entropy", "int32_labels_smoothing", {in({3, 4}, -3, 3), ints({3}, 0, 3)},
              [](Xs x) { return cross_entropy(x[0], cast(x[1], Type::int32), 0.25f); },
              [](Rs x) { return refCrossEntropy(x[0], x[1], 0.25); }});
// Classes on axis 1 (as SoftmaxCrossEntropyLoss has them): the reference
// moves them last and reuses the last-axis reference.
ONYX_OP_CASE({"cross_entropy", "class_axis_1", {in({2, 4, 3}, -3, 3), ints({2, 3}, 0, 3)},
              [](Xs x) { return cross_entropy(x[0], x[1], 0.f, 1); },
              [](Rs x) {
                Ref last = refOfShape({2, 3, 4});
                for(int64_t n = 0; n < 2; ++n)
                  for(int64_t c = 0; c < 4; ++c)
                    for(int64_t d = 0; d < 3; ++d) last[(n * 3 + d) * 4 + c] = x[0][(n * 4 + c) * 3 + d];
                return refCrossEntropy(last, x[1], 0);
              }});
ONYX_OP_CASE({"cross_entropy", "large_logits_finite",
              {values({2, 3}, {1000, -1000, 999, 0, 1000, 1000.5}), labelValues({2}, {2, 1})},
              [](Xs x) { return cross_entropy(x[0], x[1]); },
              [](Rs x) { return refCrossEntropy(x[0], x[1], 0); },
              true, /*rtol=*/1e-4, /*atol=*/1e-3});

// ------------------------------------------------------------------ dropout

// The mask alone: every value 0 or 1/(1-p), about a fraction p of zeros.
ONYX_OP_CASE({"dropout_mask", "values_and_rate", {constantInput(in({100, 200}))},
              [](Xs x) { return dropout_mask(x[0]->graph(), x[0]->shape(), 0.25f, x[0]->value_type()); },
              nullptr, /*gradcheck=*/false, 1e-4, 1e-5, 1e-6, /*stochastic=*/true,
              [](const Ref& out, Rs ins) {
                ASSERT_EQ(out.shape, ins[0].shape);
                int64_t zeros = 0;
                for(int64_t i = 0; i < out.size(); ++i) {
                  ASSERT_TRUE(out[i] == 0 || std::fabs(out[i] - 4.0 / 3.0) < 1e-12) << "mask[" << i << "] = " << out[i];
                  zeros += out[i] == 0;
                }
                EXPECT_NEAR(double(zeros) / double(out.size()), 0.25, 0.02);  // 6 sigma for 20000 draws
              }});
// dropout(x) = x * mask: forward values are 0 or x/(1-p). The gradient check
// only passes if backward multiplies by the mask the forward pass drew (every
// harness graph starts from the same seed, so the numeric runs redraw it).
ONYX_OP_CASE({"mul", "dropout_backward_uses_forward_mask", {in({8, 6})},
              [](Xs x) { return dropout(x[0], 0.5f); },
              nullptr, /*gradcheck=*/true, 1e-4, 1e-5, 1e-6, /*stochastic=*/true,
              [](const Ref& out, Rs ins) {
                ASSERT_EQ(out.shape, ins[0].shape);
                int64_t zeros = 0;
                for(int64_t i = 0; i < out.size(); ++i) {
                  ASSERT_TRUE(out[i] == 0 || std::fabs(out[i] - 2 * ins[0][i]) < 1e-12)
                      << "y[" << i << "] = " << out[i] << " for x = " << ins[0][i];
                  zeros += out[i] == 0;
                }
                EXPECT_GT(zeros, 0);
                EXPECT_LT(zeros, out.size());
              }});

// ------------------------------------------------------- unit tests (errors, modes)

// The harness covers float32/float64; float16 and bfloat16 compute in float
// and must agree with the plain reference to their precision.
TEST(NnOps, HalfPrecisionKernelsMatchReference) {
  std::vector<double> xv, lv = {2, 0, 4};
  for(int i = 0; i < 15; ++i) xv.push_back(std::sin(1.7 * i) * 3);
  Ref x{{3, 5}, xv}, labels{{3}, lv}, gamma{{5}, {1, 1, 1, 1, 1}}, beta{{5}, {0, 0, 0, 0, 0}};
  for(Type t : {Type::float16, Type::bfloat16}) {
    SCOPED_TRACE(t == Type::float16 ? "float16" : "bfloat16");
    auto g = cpuGraph();
    auto xe = g->constant({3, 5}, inits::fromVector(xv), t);
    auto sm = softmax(xe), lsm = log_softmax(xe, 0), ln = layer_norm(xe);
    auto ce = cross_entropy(xe, g->indices(std::vector<int64_t>{2, 0, 4}), 0.1f);
    g->forward();
    auto near = [](Expr e, const Ref& want, double tol) {
      std::vector<double> got;
      e->val()->get(got);
      ASSERT_EQ(got.size(), want.v.size());
      for(size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want.v[i], tol * (1 + std::fabs(want.v[i]))) << i;
    };
    // Inputs are rounded to the half type first; the tolerance covers that too.
    double tol = t == Type::float16 ? 1e-2 : 5e-2;
    near(sm, refSoftmax(x, -1, false), tol);
    near(lsm, refSoftmax(x, 0, true), tol);
    near(ln, refLayerNorm(x, &gamma, &beta, -1, 1e-5), tol);
    near(ce, refCrossEntropy(x, labels, double(0.1f)), tol);
  }
}

TEST(NnOps, CrossEntropyOutOfRangeLabelNamesIt) {
  auto g = cpuGraph();
  auto logits = g->constant({2, 3}, inits::fromValue(0.5));
  auto loss = cross_entropy(logits, g->indices(std::vector<int64_t>{0, 3}));
  try {
    g->forward();
    FAIL() << "an out-of-range label must throw";
  } catch(const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("label 3"), std::string::npos) << m;
    EXPECT_NE(m.find("[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("3 classes"), std::string::npos) << m;
  }
  g->clear();
  auto neg = cross_entropy(g->constant({2, 3}, inits::fromValue(0.5)), g->indices(std::vector<int64_t>{-1, 0}));
  EXPECT_THROW(g->forward(), Error);
  (void)neg;
  (void)loss;
}

TEST(NnOps, CrossEntropyLabelShapeMismatchIsError) {
  auto g = cpuGraph();
  auto logits = g->constant({2, 3}, inits::fromValue(0.5));
  EXPECT_THROW(cross_entropy(logits, g->indices(std::vector<int64_t>{0, 1, 2})), Error);
}

TEST(NnOps, LayerNormBadGammaShapeIsError) {
  auto g = cpuGraph();
  auto x = g->constant({2, 4}, inits::fromValue(1));
  EXPECT_THROW(layer_norm(x, g->ones({3}), g->zeros({4})), Error);
}

TEST(NnOps, DropoutIsIdentityInInferenceAndForZeroRate) {
  auto g = cpuGraph();
  auto x = g->constant({4, 4}, inits::fromValue(1));
  EXPECT_EQ(dropout(x, 0.f), x);
  EXPECT_EQ(dropout(x, 0.5f, /*training=*/false), x);
  g->setInference(true);
  EXPECT_EQ(dropout(x, 0.5f), x);
  g->setInference(false);
  EXPECT_NE(dropout(x, 0.5f), x);
  EXPECT_THROW(dropout(x, 1.f), Error);
}

TEST(NnOps, DropoutMasksAreNeverMerged) {
  auto g = cpuGraph();
  auto a = dropout_mask(g.get(), {1000}, 0.5f, Type::float32);
  auto b = dropout_mask(g.get(), {1000}, 0.5f, Type::float32);
  ASSERT_NE(a, b);
  g->forward();
  EXPECT_NE(a->val()->toVector<float>(), b->val()->toVector<float>());
}

// With checkpointing, values are freed after their last forward use and
// recomputed for backward; the mask must not be redrawn.
TEST(NnOps, DropoutMaskSurvivesCheckpointing) {
  auto g = cpuGraph();
  g->setCheckpointing(true);
  auto x = g->param("x", {2000}, inits::fromValue(1));
  auto y = dropout(x, 0.5f);
  y->markCheckpoint();
  auto loss = sum(y * 3.0);
  g->forward();
  g->backward(loss);
  auto yv = y->val()->toVector<float>();
  auto gx = x->grad()->toVector<float>();
  ASSERT_EQ(yv.size(), gx.size());
  for(size_t i = 0; i < yv.size(); ++i) ASSERT_FLOAT_EQ(gx[i], 3 * yv[i]) << i;  // d/dx (3 x m) = 3 m = 3 y at x = 1
}

}  // namespace
}  // namespace test
}  // namespace onyx
