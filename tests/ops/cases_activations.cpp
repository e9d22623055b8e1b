// Harness cases for src/ops/activations.cpp. References are plain C++ math.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using V = const std::vector<double>&;
using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

double refSigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

ONYX_OP_CASE({"tanh", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return tanh(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::tanh(a); }); }});
ONYX_OP_CASE({"sigmoid", "range", {in({3, 4}, -6, 6)},
              [](const std::vector<Expr>& x) { return sigmoid(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, refSigmoid); }});
// Large |x| must neither overflow nor lose the tiny tail.
ONYX_OP_CASE({"sigmoid", "saturated", {values({4}, {-100.0, -30.0, 30.0, 100.0})},
              [](const std::vector<Expr>& x) { return sigmoid(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, refSigmoid); },
              true, 1e-4, 1e-30});
ONYX_OP_CASE({"relu", "away_from_zero", {values({2, 3}, {-1.5, -0.2, 0.3, 2.0, -0.01, 0.7})},
              [](const std::vector<Expr>& x) { return relu(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a > 0 ? a : 0.0; }); }});
ONYX_OP_CASE({"relu", "int", {ints({7}, -4, 4)},
              [](const std::vector<Expr>& x) { return relu(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a > 0 ? a : 0.0; }); },
              /*gradcheck=*/false});
// relu's gradient: dy where x > 0 (x only selects, so only dy is checked).
ONYX_OP_CASE({"relu_grad", "selects_dy", {in({2, 3}), constantInput(values({2, 3}, {-1.5, -0.2, 0.3, 2.0, -0.01, 0.7}))},
              [](const std::vector<Expr>& x) { return relu_grad(x[0], x[1]); },
              [](const std::vector<Ref>& x) {
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) y[k] = x[1][k] > 0 ? x[0][k] : 0.0;
                return y;
              }});
ONYX_OP_CASE({"relu_grad", "int", {ints({7}, -4, 4), ints({7}, -4, 4)},
              [](const std::vector<Expr>& x) { return relu_grad(x[0], x[1]); },
              [](const std::vector<Ref>& x) {
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) y[k] = x[1][k] > 0 ? x[0][k] : 0.0;
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"leaky_relu", "default_alpha", {values({5}, {-3.0, -0.4, 0.2, 0.9, 4.0})},
              [](const std::vector<Expr>& x) { return leaky_relu(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a > 0 ? a : double(0.01f) * a; }); }});
ONYX_OP_CASE({"leaky_relu", "alpha_0_2", {values({4}, {-2.0, -0.3, 0.5, 1.5})},
              [](const std::vector<Expr>& x) { return leaky_relu(x[0], 0.2f); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) { return a > 0 ? a : double(0.2f) * a; });
              }});
ONYX_OP_CASE({"elu", "default_alpha", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](const std::vector<Expr>& x) { return elu(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a > 0 ? a : std::exp(a) - 1.0; }); }});
ONYX_OP_CASE({"elu", "alpha_0_5", {values({4}, {-2.0, -0.3, 0.5, 1.5})},
              [](const std::vector<Expr>& x) { return elu(x[0], 0.5f); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) { return a > 0 ? a : 0.5 * (std::exp(a) - 1.0); });
              }});
ONYX_OP_CASE({"selu", "onnx_constants", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](const std::vector<Expr>& x) { return selu(x[0]); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) {
                  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
                  return gamma * (a > 0 ? a : alpha * (std::exp(a) - 1.0));
                });
              }});
ONYX_OP_CASE({"gelu", "exact", {in({3, 4}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu(x[0]); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) { return 0.5 * a * std::erfc(-a / std::sqrt(2.0)); });
              }});
ONYX_OP_CASE({"gelu", "tanh_approximation", {in({3, 4}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu(x[0], true); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) {
                  const double pi = 3.14159265358979323846;
                  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (a + 0.044715 * a * a * a)));
                });
              }});
// gelu'(a) written independently of the kernel: Phi(a) + a phi(a) with Phi
// from erfc; the tanh form's with sech^2 as 1 / cosh^2.
// dy * gelu'(x) element by element, gelu' = Phi(x) + x phi(x).
Ref refGeluGradErf(const std::vector<Ref>& x) {
  Ref y = refLike(x[0]);
  const double pi = 3.14159265358979323846;
  for(int64_t k = 0; k < y.size(); ++k) {
    const double a = x[1][k];
    y[k] = x[0][k] * (0.5 * std::erfc(-a / std::sqrt(2.0)) + a * std::exp(-a * a / 2) / std::sqrt(2 * pi));
  }
  return y;
}
ONYX_OP_CASE({"gelu_grad", "exact", {in({3, 4}, -2, 2), in({3, 4}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu_grad(x[0], x[1]); }, refGeluGradErf});
ONYX_OP_CASE({"gelu_grad", "tanh_approximation", {in({2, 5}, -2, 2), in({2, 5}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu_grad(x[0], x[1], true); },
              [](const std::vector<Ref>& x) {
                Ref y = refLike(x[0]);
                const double pi = 3.14159265358979323846, k0 = std::sqrt(2.0 / pi);
                for(int64_t k = 0; k < y.size(); ++k) {
                  double a = x[1][k], u = k0 * (a + 0.044715 * a * a * a), c = std::cosh(u);
                  double d = 0.5 * (1 + std::tanh(u)) + 0.5 * a / (c * c) * k0 * (1 + 3 * 0.044715 * a * a);
                  y[k] = x[0][k] * d;
                }
                return y;
              }});
// Long enough that a vector kernel runs its full-width body and a tail.
ONYX_OP_CASE({"gelu_grad", "long", {in({1000}, -2, 2), in({1000}, -6, 6)},
              [](const std::vector<Expr>& x) { return gelu_grad(x[0], x[1]); }, refGeluGradErf,
              /*gradcheck=*/false});
ONYX_OP_CASE({"swish", "range", {in({3, 4}, -5, 5)},
              [](const std::vector<Expr>& x) { return swish(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a / (1.0 + std::exp(-a)); }); }});
ONYX_OP_CASE({"softplus", "range", {in({3, 4}, -5, 5)},
              [](const std::vector<Expr>& x) { return softplus(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::log(1.0 + std::exp(a)); }); }});
ONYX_OP_CASE({"softplus", "large", {values({3}, {-60.0, 40.0, 200.0})},
              [](const std::vector<Expr>& x) { return softplus(x[0]); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) { return a > 30 ? a : std::log(1.0 + std::exp(a)); });
              },
              true, 1e-4, 1e-20});
ONYX_OP_CASE({"clip", "away_from_bounds", {values({6}, {-3.0, -0.9, -0.2, 0.4, 0.6, 2.0})},
              [](const std::vector<Expr>& x) { return clip(x[0], -0.5, 0.5); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) { return a < -0.5 ? -0.5 : a > 0.5 ? 0.5 : a; });
              }});
ONYX_OP_CASE({"clip", "upper_only", {values({4}, {-3.0, 0.4, 1.2, 7.0})},
              [](const std::vector<Expr>& x) { return clip(x[0], -std::numeric_limits<double>::infinity(), 1.0); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a > 1.0 ? 1.0 : a; }); }});
ONYX_OP_CASE({"clip", "int", {ints({8}, -6, 6)},
              [](const std::vector<Expr>& x) { return clip(x[0], -2, 3); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a < -2 ? -2.0 : a > 3 ? 3.0 : a; }); },
              /*gradcheck=*/false});

ONYX_OP_CASE({"softsign", "range", {in({3, 4}, -5, 5)}, [](Xs x) { return softsign(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a / (1 + (a < 0 ? -a : a)); }); }});
// Kinks of hard_sigmoid at -2.5 and 2.5 (defaults), hard_swish at -3 and 3.
ONYX_OP_CASE({"hard_sigmoid", "defaults", {values({7}, {-4.0, -2.6, -2.0, 0.0, 1.3, 2.4, 3.5})},
              [](Xs x) { return hard_sigmoid(x[0]); },
              [](Rs x) {
                return refMap(x, [](double a) {
                  double t = double(0.2f) * a + 0.5;
                  return t < 0 ? 0.0 : t > 1 ? 1.0 : t;
                });
              }});
ONYX_OP_CASE({"hard_sigmoid", "alpha_beta", {values({5}, {-3.0, -1.0, 0.1, 0.7, 2.0})},
              [](Xs x) { return hard_sigmoid(x[0], 0.5f, 0.6f); },
              [](Rs x) {
                return refMap(x, [](double a) {
                  double t = 0.5 * a + double(0.6f);
                  return t < 0 ? 0.0 : t > 1 ? 1.0 : t;
                });
              }});
ONYX_OP_CASE({"hard_swish", "all_pieces", {values({7}, {-5.0, -3.2, -2.0, 0.1, 1.5, 2.9, 4.0})},
              [](Xs x) { return hard_swish(x[0]); },
              [](Rs x) {
                return refMap(x, [](double a) {
                  double t = a / 6 + 0.5;
                  return a * (t < 0 ? 0.0 : t > 1 ? 1.0 : t);
                });
              }});
ONYX_OP_CASE({"mish", "range", {in({3, 4}, -5, 5)}, [](Xs x) { return mish(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a * std::tanh(std::log(1 + std::exp(a))); }); }});
ONYX_OP_CASE({"thresholded_relu", "default_alpha", {values({6}, {-2.0, 0.3, 0.8, 1.2, 2.0, 5.0})},
              [](Xs x) { return thresholded_relu(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a > 1 ? a : 0.0; }); }});
ONYX_OP_CASE({"thresholded_relu", "alpha_2", {values({4}, {-2.5, 1.0, 2.2, 3.0})},
              [](Xs x) { return thresholded_relu(x[0], 2.f); },
              [](Rs x) { return refMap(x, [](double a) { return a > 2 ? a : 0.0; }); }});
ONYX_OP_CASE({"celu", "default_alpha", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](Xs x) { return celu(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a > 0 ? a : std::exp(a) - 1; }); }});
ONYX_OP_CASE({"celu", "alpha_2", {values({5}, {-4.0, -1.0, -0.1, 0.5, 3.0})},
              [](Xs x) { return celu(x[0], 2.f); },
              [](Rs x) { return refMap(x, [](double a) { return a > 0 ? a : 2 * (std::exp(a / 2) - 1); }); }});
// The slope broadcasts along x's channel axis; x stays away from 0.
ONYX_OP_CASE({"prelu", "channel_slope",
              {values({2, 3, 2}, {-1.0, 0.5, 2.0, -0.3, -2.0, 0.7, 0.2, -0.6, -1.5, 1.1, 0.4, -0.8}),
               values({3, 1}, {0.1, -0.5, 0.25})},
              [](Xs x) { return prelu(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return a[0] < 0 ? a[0] * a[1] : a[0]; }); }});
ONYX_OP_CASE({"prelu", "scalar_slope", {values({5}, {-2.0, -0.5, 0.3, 1.0, 4.0}), values({1}, {0.2})},
              [](Xs x) { return prelu(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return a[0] < 0 ? a[0] * a[1] : a[0]; }); }});
ONYX_OP_CASE({"shrink", "soft", {values({7}, {-3.0, -1.2, -0.6, 0.0, 0.7, 1.6, 2.5})},
              [](Xs x) { return shrink(x[0], 1.f, 0.5f); },
              [](Rs x) { return refMap(x, [](double a) { return a < -1 ? a + 0.5 : a > 1 ? a - 0.5 : 0.0; }); }});
ONYX_OP_CASE({"shrink", "hard_default", {values({6}, {-2.0, -0.7, -0.3, 0.2, 0.6, 1.5})},
              [](Xs x) { return shrink(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a < -0.5 || a > 0.5 ? a : 0.0; }); }});
ONYX_OP_CASE({"shrink", "int", {ints({8}, -4, 4)}, [](Xs x) { return shrink(x[0], 1.f, 1.f); },
              [](Rs x) { return refMap(x, [](double a) { return a < -1 ? a + 1 : a > 1 ? a - 1 : 0.0; }); },
              /*gradcheck=*/false});

// ------------------------------------------------- behaviour beyond the harness

// The subgradient chosen at the kinks: relu'(0) = 0, clip passes nothing at
// its bounds.
TEST(ActivationOps, KinkGradients) {
  auto r = gradsOfSum([](Expr a, Expr b) { return relu(a) + clip(b, -1.0, 1.0); }, {-1.0, 0.0, 2.0}, {-1.0, 0.0, 1.0});
  EXPECT_EQ(r.first, (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(r.second, (std::vector<double>{0, 1, 0}));
}

TEST(ActivationOps, BadInputsNameTheProblem) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 3}, inits::zeros(), Type::float32);
  auto s = g->constant({4}, inits::zeros(), Type::float32);
  expectErrorMentioning([&] { g->make(Registry::instance().get("gelu"), {x}, {{"approximate", attr("fast")}}); },
                        "approximate");
  expectErrorMentioning([&] { prelu(x, s); }, "broadcast");
}

}  // namespace
}  // namespace test
}  // namespace onyx
