// Harness cases for src/ops/arithmetic.cpp. References are plain C++ math.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using V = const std::vector<double>&;
using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

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
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return -a; }); }});
// abs/sign have a kink at 0: keep inputs away from it for the central difference.
ONYX_OP_CASE({"abs", "away_from_zero", {values({4}, {-1.5, -0.3, 0.4, 2.0})},
              [](const std::vector<Expr>& x) { return abs(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::fabs(a); }); }});
// sign is discontinuous at 0: the forward case includes 0, the gradient case avoids it.
ONYX_OP_CASE({"sign", "with_zero", {values({5}, {-2.0, -0.1, 0.0, 0.3, 4.0})},
              [](const std::vector<Expr>& x) { return sign(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return double((a > 0) - (a < 0)); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"sign", "away_from_zero", {values({4}, {-2.0, -0.1, 0.3, 4.0})},
              [](const std::vector<Expr>& x) { return sign(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return double((a > 0) - (a < 0)); }); }});
ONYX_OP_CASE({"reciprocal", "both_signs", {values({4}, {-2.0, -0.5, 0.4, 3.0})},
              [](const std::vector<Expr>& x) { return reciprocal(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return 1.0 / a; }); }});

// ------------------------------------------------------------ pow, min, max
ONYX_OP_CASE({"pow", "broadcast_positive_base", {in({2, 3}, 0.5, 2), in({3}, -2, 2)},
              [](const std::vector<Expr>& x) { return pow(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::pow(a[0], a[1]); }); }});
ONYX_OP_CASE({"pow", "scalar_exponent", {in({5}, -2, 2)},
              [](const std::vector<Expr>& x) { return pow(x[0], 2.0); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return a * a; }); }});
ONYX_OP_CASE({"pow", "scalar_base", {in({4}, -1, 1)},
              [](const std::vector<Expr>& x) { return pow(3.0, x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::pow(3.0, a); }); }});
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
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::min(a, 0.0); }); }});
ONYX_OP_CASE({"minimum", "int", {ints({3, 4}, -5, 5), ints({4}, -5, 5)},
              [](const std::vector<Expr>& x) { return minimum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::min(a[0], a[1]); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"maximum", "broadcast", {values({3, 1}, {-1.0, 0.4, 2.0}), values({1, 2}, {0.1, 1.1})},
              [](const std::vector<Expr>& x) { return maximum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::max(a[0], a[1]); }); }});
ONYX_OP_CASE({"maximum", "scalar_left", {values({4}, {-1.5, -0.2, 0.3, 2.0})},
              [](const std::vector<Expr>& x) { return maximum(0.25, x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::max(0.25, a); }); }});
ONYX_OP_CASE({"maximum", "int", {ints({3, 4}, -5, 5), ints({3, 1}, -5, 5)},
              [](const std::vector<Expr>& x) { return maximum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::max(a[0], a[1]); }); },
              /*gradcheck=*/false});
// Ties in the forward pass (their gradient is checked by ArithmeticOps.MinMaxTies).
ONYX_OP_CASE({"minimum", "ties_forward", {values({3}, {1.0, 2.0, 3.0}), values({3}, {1.0, 0.0, 5.0})},
              [](const std::vector<Expr>& x) { return minimum(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return refBroadcast(x, [](V a) { return std::min(a[0], a[1]); }); },
              /*gradcheck=*/false});

// ------------------------------------------------------------------ rounding
// Gradient cases keep the inputs away from the jumps.
const std::vector<double> kOffInteger = {-2.7, -1.2, -0.4, 0.3, 0.6, 1.8, 2.2, 3.9};

ONYX_OP_CASE({"floor", "off_integer", {values({2, 4}, kOffInteger)}, [](Xs x) { return floor(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return double(int64_t(a + 1000) - 1000); }); }});
ONYX_OP_CASE({"ceil", "off_integer", {values({2, 4}, kOffInteger)}, [](Xs x) { return ceil(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return double(int64_t(a + 1000) - 1000) + 1; }); }});
ONYX_OP_CASE({"ceil", "integers", {values({3}, {-2.0, 0.0, 3.0})}, [](Xs x) { return ceil(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return a; }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"round", "off_half", {values({2, 4}, kOffInteger)}, [](Xs x) { return round(x[0]); },
              [](Rs x) {
                return refMap(x, [](double a) {
                  double f = double(int64_t(a + 1000) - 1000);
                  return a - f < 0.5 ? f : f + 1;
                });
              }});
// Halfway cases go to the even neighbour.
ONYX_OP_CASE({"round", "halves_to_even", {values({8}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5})},
              [](Xs x) { return round(x[0]); },
              [](Rs x) {
                return refMap(x, [](double a) {
                  int64_t lo = int64_t(a + 1000) - 1000;  // floor
                  return double(lo % 2 == 0 ? lo : lo + 1);
                });
              },
              /*gradcheck=*/false});

// ---------------------------------------------------------------------- mod
// Reference by repeated subtraction-free math: r = a - q b with q rounded
// toward zero (fmod) or toward -inf (Python).
double refFmod(double a, double b) {
  double q = a / b;
  q = q < 0 ? -double(int64_t(-q)) : double(int64_t(q));
  return a - q * b;
}
double refPyMod(double a, double b) {
  double r = refFmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
const std::vector<double> kModA = {-7.5, -4.2, -1.3, 1.3, 4.2, 7.5};
const std::vector<double> kModB = {2.0, -2.0, 3.1};

ONYX_OP_CASE({"mod", "float_python", {values({2, 3}, kModA), values({3}, kModB)},
              [](Xs x) { return mod(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refPyMod(a[0], a[1]); }); }});
ONYX_OP_CASE({"mod", "float_fmod", {values({2, 3}, kModA), values({3}, kModB)},
              [](Xs x) { return mod(x[0], x[1], true); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refFmod(a[0], a[1]); }); }});
ONYX_OP_CASE({"mod", "int_python", {values({2, 4}, {-7, -5, -3, -1, 1, 3, 5, 7}), values({4}, {3, -3, 4, -4})},
              [](Xs x) { return mod(cast(x[0], Type::int64), cast(x[1], Type::int64)); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refPyMod(a[0], a[1]); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"mod", "int_fmod", {ints({3, 4}, -9, 9), ints({4}, 1, 4)},
              [](Xs x) { return mod(x[0], x[1], true); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refFmod(a[0], a[1]); }); }, /*gradcheck=*/false});

// ------------------------------------------------- behaviour beyond the harness

// At a tie the whole gradient goes to the first input, none to the second.
TEST(ArithmeticOps, MinMaxTies) {
  auto mn = gradsOfSum([](Expr a, Expr b) { return minimum(a, b); }, {1.0, 2.0, 4.0}, {1.0, 3.0, 0.5});
  EXPECT_EQ(mn.first, (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(mn.second, (std::vector<double>{0, 0, 1}));
  auto mx = gradsOfSum([](Expr a, Expr b) { return maximum(a, b); }, {1.0, 2.0, 4.0}, {1.0, 3.0, 0.5});
  EXPECT_EQ(mx.first, (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(mx.second, (std::vector<double>{0, 1, 0}));
}

// Integer division truncates toward zero and never traps.
TEST(ArithmeticOps, IntegerDivisionAndModByZero) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto a = g->constant({4}, inits::fromVector(std::vector<double>{7, -7, 5, -9}), Type::int32);
  auto b = g->constant({4}, inits::fromVector(std::vector<double>{2, 2, 0, -1}), Type::int32);
  auto q = a / b;
  auto r = mod(a, b);
  g->forward();
  std::vector<double> qv, rv;
  q->val()->get(qv);
  r->val()->get(rv);
  EXPECT_EQ(qv, (std::vector<double>{3, -3, 0, 9}));
  EXPECT_EQ(rv, (std::vector<double>{1, 1, 0, 0}));
}

}  // namespace
}  // namespace test
}  // namespace onyx
