// Harness cases for src/ops/elementwise.cpp. References are plain C++ math.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using V = const std::vector<double>&;
Ref map1(const std::vector<Ref>& x, double (*f)(double)) {
  return refBroadcast(x, [f](V a) { return f(a[0]); });
}

ONYX_OP_CASE({"add", "broadcast_row", {in({3, 4}), in({4})},
              [](const std::vector<Expr>& x) { return x[0] + x[1]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] + a[1]; }); }});
ONYX_OP_CASE({"add", "broadcast_both", {in({3, 1}), in({1, 4})},
              [](const std::vector<Expr>& x) { return x[0] + x[1]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] + a[1]; }); }});
ONYX_OP_CASE({"add", "scalar", {in({2, 3})},
              [](const std::vector<Expr>& x) { return x[0] + 2.5; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] + 2.5; }); }});
ONYX_OP_CASE({"sub", "broadcast", {in({2, 3, 4}), in({3, 1})},
              [](const std::vector<Expr>& x) { return x[0] - x[1]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] - a[1]; }); }});
ONYX_OP_CASE({"sub", "scalar_left", {in({5})},
              [](const std::vector<Expr>& x) { return 1.0 - x[0]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return 1.0 - a[0]; }); }});
ONYX_OP_CASE({"mul", "broadcast", {in({2, 3}), in({2, 1})},
              [](const std::vector<Expr>& x) { return x[0] * x[1]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] * a[1]; }); }});
ONYX_OP_CASE({"mul", "same_input_twice", {in({4})},
              [](const std::vector<Expr>& x) { return x[0] * x[0]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] * a[0]; }); }});
ONYX_OP_CASE({"div", "broadcast", {in({3, 2}), in({2}, 0.5, 2)},
              [](const std::vector<Expr>& x) { return x[0] / x[1]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] / a[1]; }); }});
ONYX_OP_CASE({"div", "scalar_numerator", {in({3}, 0.5, 2)},
              [](const std::vector<Expr>& x) { return 2.0 / x[0]; },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return 2.0 / a[0]; }); }});
ONYX_OP_CASE({"neg", "matrix", {in({2, 3})},
              [](const std::vector<Expr>& x) { return -x[0]; },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return -a; }); }});
// abs/sign have a kink at 0: keep inputs away from it for the central difference.
ONYX_OP_CASE({"abs", "away_from_zero", {values({4}, {-1.5, -0.3, 0.4, 2.0})},
              [](const std::vector<Expr>& x) { return abs(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::fabs(a); }); }});
// sign is discontinuous at 0: the forward case includes 0, the gradient case avoids it.
ONYX_OP_CASE({"sign", "with_zero", {values({5}, {-2.0, -0.1, 0.0, 0.3, 4.0})},
              [](const std::vector<Expr>& x) { return sign(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return double((a > 0) - (a < 0)); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"sign", "away_from_zero", {values({4}, {-2.0, -0.1, 0.3, 4.0})},
              [](const std::vector<Expr>& x) { return sign(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return double((a > 0) - (a < 0)); }); }});
ONYX_OP_CASE({"sin", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return sin(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::sin(a); }); }});
ONYX_OP_CASE({"cos", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return cos(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::cos(a); }); }});
// ------------------------------------------------------------ pow, min, max
ONYX_OP_CASE({"pow", "broadcast_positive_base", {in({2, 3}, 0.5, 2), in({3}, -2, 2)},
              [](const std::vector<Expr>& x) { return pow(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::pow(a[0], a[1]); }); }});
ONYX_OP_CASE({"pow", "scalar_exponent", {in({5}, -2, 2)},
              [](const std::vector<Expr>& x) { return pow(x[0], 2.0); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a * a; }); }});
ONYX_OP_CASE({"pow", "scalar_base", {in({4}, -1, 1)},
              [](const std::vector<Expr>& x) { return pow(3.0, x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::pow(3.0, a); }); }});
ONYX_OP_CASE({"pow", "int", {ints({6}, -3, 3), ints({6}, 0, 3)},
              [](const std::vector<Expr>& x) { return pow(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::pow(a[0], a[1]); }); },
              /*gradcheck=*/false});
// min/max: explicit values keep every pair apart, so no tie or kink sits
// within the central difference's step.
ONYX_OP_CASE({"minimum", "broadcast", {values({2, 3}, {-1.0, 0.5, 2.0, 0.1, -0.7, 1.2}), values({3}, {0.3, -0.2, 1.5})},
              [](const std::vector<Expr>& x) { return minimum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::min(a[0], a[1]); }); }});
ONYX_OP_CASE({"minimum", "scalar", {values({4}, {-1.5, -0.2, 0.3, 2.0})},
              [](const std::vector<Expr>& x) { return minimum(x[0], 0.0); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::min(a, 0.0); }); }});
ONYX_OP_CASE({"minimum", "int", {ints({3, 4}, -5, 5), ints({4}, -5, 5)},
              [](const std::vector<Expr>& x) { return minimum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::min(a[0], a[1]); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"maximum", "broadcast", {values({3, 1}, {-1.0, 0.4, 2.0}), values({1, 2}, {0.1, 1.1})},
              [](const std::vector<Expr>& x) { return maximum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::max(a[0], a[1]); }); }});
ONYX_OP_CASE({"maximum", "scalar_left", {values({4}, {-1.5, -0.2, 0.3, 2.0})},
              [](const std::vector<Expr>& x) { return maximum(0.25, x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::max(0.25, a); }); }});
ONYX_OP_CASE({"maximum", "int", {ints({3, 4}, -5, 5), ints({3, 1}, -5, 5)},
              [](const std::vector<Expr>& x) { return maximum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::max(a[0], a[1]); }); },
              /*gradcheck=*/false});
// Ties in the forward pass (their gradient is checked by ElementwiseOps.MinMaxTies).
ONYX_OP_CASE({"minimum", "ties_forward", {values({3}, {1.0, 2.0, 3.0}), values({3}, {1.0, 0.0, 5.0})},
              [](const std::vector<Expr>& x) { return minimum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::min(a[0], a[1]); }); },
              /*gradcheck=*/false});

// ----------------------------------------------------------- math functions
ONYX_OP_CASE({"tan", "range", {in({3, 4}, -1.2, 1.2)},
              [](const std::vector<Expr>& x) { return tan(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::tan(a); }); }});
ONYX_OP_CASE({"exp", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return exp(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::exp(a); }); }});
ONYX_OP_CASE({"log", "positive", {in({3, 4}, 0.2, 5)},
              [](const std::vector<Expr>& x) { return log(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::log(a); }); }});
ONYX_OP_CASE({"log", "zero_and_negative", {values({3}, {0.0, -1.0, 1.0})},
              [](const std::vector<Expr>& x) { return log(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::log(a); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"sqrt", "positive", {in({2, 5}, 0.2, 4)},
              [](const std::vector<Expr>& x) { return sqrt(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::sqrt(a); }); }});
ONYX_OP_CASE({"reciprocal", "both_signs", {values({4}, {-2.0, -0.5, 0.4, 3.0})},
              [](const std::vector<Expr>& x) { return reciprocal(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return 1.0 / a; }); }});
ONYX_OP_CASE({"erf", "range", {in({3, 4}, -2.5, 2.5)},
              [](const std::vector<Expr>& x) { return erf(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::erf(a); }); }});

// -------------------------------------------------------------- activations
double refSigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

ONYX_OP_CASE({"tanh", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return tanh(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::tanh(a); }); }});
ONYX_OP_CASE({"sigmoid", "range", {in({3, 4}, -6, 6)},
              [](const std::vector<Expr>& x) { return sigmoid(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, refSigmoid); }});
// Large |x| must neither overflow nor lose the tiny tail.
ONYX_OP_CASE({"sigmoid", "saturated", {values({4}, {-100.0, -30.0, 30.0, 100.0})},
              [](const std::vector<Expr>& x) { return sigmoid(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, refSigmoid); },
              true, 1e-4, 1e-30});
ONYX_OP_CASE({"relu", "away_from_zero", {values({2, 3}, {-1.5, -0.2, 0.3, 2.0, -0.01, 0.7})},
              [](const std::vector<Expr>& x) { return relu(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a > 0 ? a : 0.0; }); }});
ONYX_OP_CASE({"relu", "int", {ints({7}, -4, 4)},
              [](const std::vector<Expr>& x) { return relu(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a > 0 ? a : 0.0; }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"leaky_relu", "default_alpha", {values({5}, {-3.0, -0.4, 0.2, 0.9, 4.0})},
              [](const std::vector<Expr>& x) { return leaky_relu(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a > 0 ? a : double(0.01f) * a; }); }});
ONYX_OP_CASE({"leaky_relu", "alpha_0_2", {values({4}, {-2.0, -0.3, 0.5, 1.5})},
              [](const std::vector<Expr>& x) { return leaky_relu(x[0], 0.2f); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) { return a > 0 ? a : double(0.2f) * a; });
              }});
ONYX_OP_CASE({"elu", "default_alpha", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](const std::vector<Expr>& x) { return elu(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a > 0 ? a : std::exp(a) - 1.0; }); }});
ONYX_OP_CASE({"elu", "alpha_0_5", {values({4}, {-2.0, -0.3, 0.5, 1.5})},
              [](const std::vector<Expr>& x) { return elu(x[0], 0.5f); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) { return a > 0 ? a : 0.5 * (std::exp(a) - 1.0); });
              }});
ONYX_OP_CASE({"selu", "onnx_constants", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](const std::vector<Expr>& x) { return selu(x[0]); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) {
                  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
                  return gamma * (a > 0 ? a : alpha * (std::exp(a) - 1.0));
                });
              }});
ONYX_OP_CASE({"gelu", "exact", {in({3, 4}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu(x[0]); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) { return 0.5 * a * std::erfc(-a / std::sqrt(2.0)); });
              }});
ONYX_OP_CASE({"gelu", "tanh_approximation", {in({3, 4}, -4, 4)},
              [](const std::vector<Expr>& x) { return gelu(x[0], true); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) {
                  const double pi = 3.14159265358979323846;
                  return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (a + 0.044715 * a * a * a)));
                });
              }});
ONYX_OP_CASE({"swish", "range", {in({3, 4}, -5, 5)},
              [](const std::vector<Expr>& x) { return swish(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a / (1.0 + std::exp(-a)); }); }});
ONYX_OP_CASE({"softplus", "range", {in({3, 4}, -5, 5)},
              [](const std::vector<Expr>& x) { return softplus(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::log(1.0 + std::exp(a)); }); }});
ONYX_OP_CASE({"softplus", "large", {values({3}, {-60.0, 40.0, 200.0})},
              [](const std::vector<Expr>& x) { return softplus(x[0]); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) { return a > 30 ? a : std::log(1.0 + std::exp(a)); });
              },
              true, 1e-4, 1e-20});
ONYX_OP_CASE({"clip", "away_from_bounds", {values({6}, {-3.0, -0.9, -0.2, 0.4, 0.6, 2.0})},
              [](const std::vector<Expr>& x) { return clip(x[0], -0.5, 0.5); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) { return a < -0.5 ? -0.5 : a > 0.5 ? 0.5 : a; });
              }});
ONYX_OP_CASE({"clip", "upper_only", {values({4}, {-3.0, 0.4, 1.2, 7.0})},
              [](const std::vector<Expr>& x) { return clip(x[0], -std::numeric_limits<double>::infinity(), 1.0); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a > 1.0 ? 1.0 : a; }); }});
ONYX_OP_CASE({"clip", "int", {ints({8}, -6, 6)},
              [](const std::vector<Expr>& x) { return clip(x[0], -2, 3); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return a < -2 ? -2.0 : a > 3 ? 3.0 : a; }); },
              /*gradcheck=*/false});

// -------------------------------------------------------------- comparisons
// Outputs are bool (read back as 0/1). Values with repeats exercise equality.
using Cmp = bool (*)(double, double);
using BuildCmp = Expr (*)(Expr, Expr);
using BuildCmpScalar = Expr (*)(Expr, double);

// Three cases per comparison: broadcasting floats (with repeated values, so
// equality occurs), a scalar right-hand side, and broadcasting int64.
bool addComparisonCases(const char* op, BuildCmp build, BuildCmpScalar buildScalar, Cmp cmp) {
  auto ref = [cmp](const std::vector<Ref>& x) { return refBroadcast(x, [cmp](V a) { return double(cmp(a[0], a[1])); }); };
  std::vector<double> a = {-1.0, 0.5, 2.0, 0.5, 3.0, -2.0}, b = {0.5, 0.5, -2.0};
  cases().push_back({op, "broadcast", {values({2, 3}, a), values({3}, b)},
                     [build](const std::vector<Expr>& x) { return build(x[0], x[1]); }, ref, /*gradcheck=*/false});
  cases().push_back({op, "scalar", {values({2, 3}, a)},
                     [buildScalar](const std::vector<Expr>& x) { return buildScalar(x[0], 0.5); },
                     [cmp](const std::vector<Ref>& x) {
                       return refBroadcast(x, [cmp](V v) { return double(cmp(v[0], 0.5)); });
                     },
                     /*gradcheck=*/false});
  cases().push_back({op, "int", {ints({3, 4}, -2, 2), ints({3, 1}, -2, 2)},
                     [build](const std::vector<Expr>& x) { return build(x[0], x[1]); }, ref, /*gradcheck=*/false});
  return true;
}

const bool kComparisonCases[] = {
    addComparisonCases("lt", [](Expr a, Expr b) { return lt(a, b); }, [](Expr a, double b) { return lt(a, b); },
                       [](double a, double b) { return a < b; }),
    addComparisonCases("le", [](Expr a, Expr b) { return le(a, b); }, [](Expr a, double b) { return le(a, b); },
                       [](double a, double b) { return a <= b; }),
    addComparisonCases("gt", [](Expr a, Expr b) { return gt(a, b); }, [](Expr a, double b) { return gt(a, b); },
                       [](double a, double b) { return a > b; }),
    addComparisonCases("ge", [](Expr a, Expr b) { return ge(a, b); }, [](Expr a, double b) { return ge(a, b); },
                       [](double a, double b) { return a >= b; }),
    addComparisonCases("eq", [](Expr a, Expr b) { return eq(a, b); }, [](Expr a, double b) { return eq(a, b); },
                       [](double a, double b) { return a == b; }),
    addComparisonCases("ne", [](Expr a, Expr b) { return ne(a, b); }, [](Expr a, double b) { return ne(a, b); },
                       [](double a, double b) { return a != b; }),
};

// -------------------------------------------------------------------- logic
ONYX_OP_CASE({"logical_and", "broadcast", {bools({3, 4}), bools({4})},
              [](const std::vector<Expr>& x) { return logical_and(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return double(a[0] != 0 && a[1] != 0); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"logical_or", "broadcast", {bools({3, 1}), bools({1, 4})},
              [](const std::vector<Expr>& x) { return logical_or(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return double(a[0] != 0 || a[1] != 0); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"logical_xor", "broadcast", {bools({2, 3, 2}), bools({3, 1})},
              [](const std::vector<Expr>& x) { return logical_xor(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return double((a[0] != 0) != (a[1] != 0)); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"logical_not", "matrix", {bools({3, 4})},
              [](const std::vector<Expr>& x) { return logical_not(x[0]); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return double(a == 0); }); },
              /*gradcheck=*/false});
// Comparisons feeding logic: (x > 0) and not (x >= 1).
ONYX_OP_CASE({"logical_not", "of_comparison", {values({5}, {-1.0, 0.5, 1.0, 0.0, 2.0})},
              [](const std::vector<Expr>& x) { return logical_and(gt(x[0], 0.0), logical_not(ge(x[0], 1.0))); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return double(a > 0 && a < 1); }); },
              /*gradcheck=*/false});

// -------------------------------------------------------------------- where
ONYX_OP_CASE({"where", "broadcast_all_three", {bools({3, 1}), in({1, 4}), in({3, 4})},
              [](const std::vector<Expr>& x) { return where(x[0], x[1], x[2]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] != 0 ? a[1] : a[2]; }); }});
ONYX_OP_CASE({"where", "scalar_else", {bools({2, 3}), in({2, 3})},
              [](const std::vector<Expr>& x) { return where(x[0], x[1], -1.0); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] != 0 ? a[1] : -1.0; }); }});
ONYX_OP_CASE({"where", "int", {bools({4}), ints({2, 4}, -9, 9), ints({2, 1}, -9, 9)},
              [](const std::vector<Expr>& x) { return where(x[0], x[1], x[2]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return a[0] != 0 ? a[1] : a[2]; }); },
              /*gradcheck=*/false});

// cast to int64 and back truncates toward zero.
ONYX_OP_CASE({"cast", "float_to_int_to_float", {in({6}, -5, 5)},
              [](const std::vector<Expr>& x) { return cast(cast(x[0], Type::int64), x[0]->value_type()); },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return std::trunc(a); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"cast", "float_roundtrip_grad", {in({2, 3})},
              [](const std::vector<Expr>& x) {
                Type other = x[0]->value_type() == Type::float64 ? Type::float32 : Type::float64;
                return cast(cast(x[0], other), x[0]->value_type()) * 3.0;
              },
              [](const std::vector<Ref>& x) { return map1(x, [](double a) { return double(float(a)) * 3.0; }); },
              // The numeric derivative passes through float32 rounding, so it is only good
              // to about 2%: enough to catch a missing or mis-scaled gradient.
              true, 1e-4, 1e-5, /*gradTol=*/0.1});

// The float8e4m3fn value nearest to a: the format's grid is 1.mmm * 2^(e-7)
// for e in 1..15 (without the NaN code e=15, m=7) and subnormals m/8 * 2^-6.
double nearestE4M3FN(double a) {
  std::vector<double> grid;
  for(int m = 0; m < 8; ++m) grid.push_back(m / 8.0 * std::pow(2.0, -6));
  for(int e = 1; e <= 15; ++e)
    for(int m = 0; m < 8; ++m)
      if(!(e == 15 && m == 7)) grid.push_back((1 + m / 8.0) * std::pow(2.0, e - 7));
  double best = 0;
  for(double g : grid)
    if(std::fabs(std::fabs(a) - g) < std::fabs(std::fabs(a) - best)) best = g;
  return a < 0 ? -best : best;
}
// cast through float8e4m3fn and back: the nearest value of the format's grid
// (1.mmm * 2^(e-7) for e in 1..15, and m/8 * 2^-6 subnormals; 448 the
// largest finite), values beyond it saturating to +-448.
ONYX_OP_CASE({"cast", "float8e4m3fn_roundtrip", {in({4, 5}, -500, 500)},
              [](const std::vector<Expr>& x) { return cast(cast(x[0], Type::float8e4m3fn), x[0]->value_type()); },
              [](const std::vector<Ref>& x) { return map1(x, nearestE4M3FN); },
              /*gradcheck=*/false});
// cast through int4 wraps: the truncated value modulo 16, in [-8, 7].
ONYX_OP_CASE({"cast", "int4_wraps", {in({3, 5}, -20, 20)},
              [](const std::vector<Expr>& x) { return cast(cast(x[0], Type::int4), x[0]->value_type()); },
              [](const std::vector<Ref>& x) {
                return map1(x, [](double a) {
                  long long t = static_cast<long long>(std::trunc(a));
                  long long r = ((t % 16) + 16) % 16;
                  return double(r >= 8 ? r - 16 : r);
                });
              },
              /*gradcheck=*/false});

// ------------------------------------------------- behaviour beyond the harness

// Gradients of sum(f(a, b)) for a and b as float64 params.
std::pair<std::vector<double>, std::vector<double>> gradsOf(Expr (*f)(Expr, Expr), std::vector<double> a,
                                                            std::vector<double> b) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto pa = g->param("a", {int64_t(a.size())}, inits::fromVector(a), Type::float64, true);
  auto pb = g->param("b", {int64_t(b.size())}, inits::fromVector(b), Type::float64, true);
  auto loss = sum(f(pa, pb));
  g->forward();
  g->backward(loss);
  std::pair<std::vector<double>, std::vector<double>> r;
  pa->grad()->get(r.first);
  pb->grad()->get(r.second);
  return r;
}

// At a tie the whole gradient goes to the first input, none to the second.
TEST(ElementwiseOps, MinMaxTies) {
  auto mn = gradsOf([](Expr a, Expr b) { return minimum(a, b); }, {1.0, 2.0, 4.0}, {1.0, 3.0, 0.5});
  EXPECT_EQ(mn.first, (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(mn.second, (std::vector<double>{0, 0, 1}));
  auto mx = gradsOf([](Expr a, Expr b) { return maximum(a, b); }, {1.0, 2.0, 4.0}, {1.0, 3.0, 0.5});
  EXPECT_EQ(mx.first, (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(mx.second, (std::vector<double>{0, 1, 0}));
}

// The subgradient chosen at the kinks: relu'(0) = 0, clip passes nothing at
// its bounds.
TEST(ElementwiseOps, KinkGradients) {
  auto r = gradsOf([](Expr a, Expr b) { return relu(a) + clip(b, -1.0, 1.0); }, {-1.0, 0.0, 2.0}, {-1.0, 0.0, 1.0});
  EXPECT_EQ(r.first, (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(r.second, (std::vector<double>{0, 1, 0}));
}

TEST(ElementwiseOps, BadInputsNameTheProblem) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 3}, inits::zeros(), Type::float32);
  auto y = g->constant({3}, inits::zeros(), Type::float64);
  auto expectError = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch(const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectError([&] { where(x, x, x); }, "must be bool");
  expectError([&] { where(gt(x, 0.0), x, y); }, "different element types");
  expectError([&] { logical_and(x, x); }, "need bool");
  expectError([&] { lt(x, y); }, "different element types");
  expectError([&] { exp(g->indices({1, 2})); }, "floating-point");
  expectError([&] { g->make(Registry::instance().get("gelu"), {x}, {{"approximate", attr("fast")}}); },
              "approximate");
}

}  // namespace
}  // namespace test
}  // namespace onyx
