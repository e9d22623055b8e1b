// Harness cases for src/ops/elementwise2.cpp. References are plain C++ math.
#include <cmath>
#include <cstdint>
#include <functional>
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

Ref map1(Rs x, double (*f)(double)) {
  return refBroadcast(x, [f](V a) { return f(a[0]); });
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ------------------------------------------------ inverse trig, hyperbolic
ONYX_OP_CASE({"acos", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return acos(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return std::acos(a); }); }});
ONYX_OP_CASE({"asin", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return asin(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return std::asin(a); }); }});
ONYX_OP_CASE({"atan", "range", {in({3, 4}, -4, 4)}, [](Xs x) { return atan(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return std::atan(a); }); }});
ONYX_OP_CASE({"sinh", "range", {in({3, 4}, -3, 3)}, [](Xs x) { return sinh(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return (std::exp(a) - std::exp(-a)) / 2; }); }});
ONYX_OP_CASE({"cosh", "range", {in({3, 4}, -3, 3)}, [](Xs x) { return cosh(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return (std::exp(a) + std::exp(-a)) / 2; }); }});
ONYX_OP_CASE({"asinh", "range", {in({3, 4}, -4, 4)}, [](Xs x) { return asinh(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return std::log(a + std::sqrt(a * a + 1)); }); }});
ONYX_OP_CASE({"acosh", "above_one", {in({3, 4}, 1.2, 5)}, [](Xs x) { return acosh(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return std::log(a + std::sqrt(a * a - 1)); }); }});
ONYX_OP_CASE({"atanh", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return atanh(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return 0.5 * std::log((1 + a) / (1 - a)); }); }});

// ------------------------------------------------------------------ rounding
// Gradient cases keep the inputs away from the jumps.
const std::vector<double> kOffInteger = {-2.7, -1.2, -0.4, 0.3, 0.6, 1.8, 2.2, 3.9};

ONYX_OP_CASE({"floor", "off_integer", {values({2, 4}, kOffInteger)}, [](Xs x) { return floor(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return double(int64_t(a + 1000) - 1000); }); }});
ONYX_OP_CASE({"ceil", "off_integer", {values({2, 4}, kOffInteger)}, [](Xs x) { return ceil(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return double(int64_t(a + 1000) - 1000) + 1; }); }});
ONYX_OP_CASE({"ceil", "integers", {values({3}, {-2.0, 0.0, 3.0})}, [](Xs x) { return ceil(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a; }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"round", "off_half", {values({2, 4}, kOffInteger)}, [](Xs x) { return round(x[0]); },
              [](Rs x) {
                return map1(x, [](double a) {
                  double f = double(int64_t(a + 1000) - 1000);
                  return a - f < 0.5 ? f : f + 1;
                });
              }});
// Halfway cases go to the even neighbour.
ONYX_OP_CASE({"round", "halves_to_even", {values({8}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5})},
              [](Xs x) { return round(x[0]); },
              [](Rs x) {
                return map1(x, [](double a) {
                  int64_t lo = int64_t(a + 1000) - 1000;  // floor
                  return double(lo % 2 == 0 ? lo : lo + 1);
                });
              },
              /*gradcheck=*/false});

// ------------------------------------------------------------- NaN/Inf tests
const std::vector<double> kSpecial = {-kInf, -1.0, 0.0, kNaN, 2.5, kInf};

ONYX_OP_CASE({"is_nan", "special_values", {values({6}, kSpecial)}, [](Xs x) { return is_nan(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return double(a != a); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "both_signs", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return double(a == kInf || a == -kInf); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "negative_only", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0], true, false); },
              [](Rs x) { return map1(x, [](double a) { return double(a == -kInf); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "positive_only", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0], false, true); },
              [](Rs x) { return map1(x, [](double a) { return double(a == kInf); }); }, /*gradcheck=*/false});

// -------------------------------------------------------------- activations
ONYX_OP_CASE({"softsign", "range", {in({3, 4}, -5, 5)}, [](Xs x) { return softsign(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a / (1 + (a < 0 ? -a : a)); }); }});
// Kinks of hard_sigmoid at -2.5 and 2.5 (defaults), hard_swish at -3 and 3.
ONYX_OP_CASE({"hard_sigmoid", "defaults", {values({7}, {-4.0, -2.6, -2.0, 0.0, 1.3, 2.4, 3.5})},
              [](Xs x) { return hard_sigmoid(x[0]); },
              [](Rs x) {
                return map1(x, [](double a) {
                  double t = double(0.2f) * a + 0.5;
                  return t < 0 ? 0.0 : t > 1 ? 1.0 : t;
                });
              }});
ONYX_OP_CASE({"hard_sigmoid", "alpha_beta", {values({5}, {-3.0, -1.0, 0.1, 0.7, 2.0})},
              [](Xs x) { return hard_sigmoid(x[0], 0.5f, 0.6f); },
              [](Rs x) {
                return map1(x, [](double a) {
                  double t = 0.5 * a + double(0.6f);
                  return t < 0 ? 0.0 : t > 1 ? 1.0 : t;
                });
              }});
ONYX_OP_CASE({"hard_swish", "all_pieces", {values({7}, {-5.0, -3.2, -2.0, 0.1, 1.5, 2.9, 4.0})},
              [](Xs x) { return hard_swish(x[0]); },
              [](Rs x) {
                return map1(x, [](double a) {
                  double t = a / 6 + 0.5;
                  return a * (t < 0 ? 0.0 : t > 1 ? 1.0 : t);
                });
              }});
ONYX_OP_CASE({"mish", "range", {in({3, 4}, -5, 5)}, [](Xs x) { return mish(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a * std::tanh(std::log(1 + std::exp(a))); }); }});
ONYX_OP_CASE({"thresholded_relu", "default_alpha", {values({6}, {-2.0, 0.3, 0.8, 1.2, 2.0, 5.0})},
              [](Xs x) { return thresholded_relu(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a > 1 ? a : 0.0; }); }});
ONYX_OP_CASE({"thresholded_relu", "alpha_2", {values({4}, {-2.5, 1.0, 2.2, 3.0})},
              [](Xs x) { return thresholded_relu(x[0], 2.f); },
              [](Rs x) { return map1(x, [](double a) { return a > 2 ? a : 0.0; }); }});
ONYX_OP_CASE({"celu", "default_alpha", {values({6}, {-4.0, -1.0, -0.1, 0.05, 0.8, 3.0})},
              [](Xs x) { return celu(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a > 0 ? a : std::exp(a) - 1; }); }});
ONYX_OP_CASE({"celu", "alpha_2", {values({5}, {-4.0, -1.0, -0.1, 0.5, 3.0})},
              [](Xs x) { return celu(x[0], 2.f); },
              [](Rs x) { return map1(x, [](double a) { return a > 0 ? a : 2 * (std::exp(a / 2) - 1); }); }});
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
              [](Rs x) { return map1(x, [](double a) { return a < -1 ? a + 0.5 : a > 1 ? a - 0.5 : 0.0; }); }});
ONYX_OP_CASE({"shrink", "hard_default", {values({6}, {-2.0, -0.7, -0.3, 0.2, 0.6, 1.5})},
              [](Xs x) { return shrink(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return a < -0.5 || a > 0.5 ? a : 0.0; }); }});
ONYX_OP_CASE({"shrink", "int", {ints({8}, -4, 4)}, [](Xs x) { return shrink(x[0], 1.f, 1.f); },
              [](Rs x) { return map1(x, [](double a) { return a < -1 ? a + 1 : a > 1 ? a - 1 : 0.0; }); },
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

// ------------------------------------------------------------------ bitwise
int64_t i64(double v) { return static_cast<int64_t>(v); }

ONYX_OP_CASE({"bit_shift", "left", {ints({3, 4}, 0, 1000), ints({4}, 0, 6)},
              [](Xs x) { return bit_shift(x[0], x[1], true); },
              [](Rs x) {
                return refBroadcast(x, [](V a) {
                  double p = 1;
                  for(int i = 0; i < i64(a[1]); ++i) p *= 2;
                  return a[0] * p;
                });
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"bit_shift", "right", {ints({3, 4}, 0, 1000), ints({3, 1}, 0, 6)},
              [](Xs x) { return bit_shift(x[0], x[1], false); },
              [](Rs x) {
                return refBroadcast(x, [](V a) {
                  double p = 1;
                  for(int i = 0; i < i64(a[1]); ++i) p *= 2;
                  return double(int64_t(a[0] / p));
                });
              },
              /*gradcheck=*/false});
// Shifts by the width or more, and by negative amounts.
ONYX_OP_CASE({"bit_shift", "out_of_range", {values({4}, {5, -5, 5, -5}), values({4}, {64, 70, -1, 64})},
              [](Xs x) { return bit_shift(cast(x[0], Type::int64), cast(x[1], Type::int64), false); },
              [](Rs x) { return refBroadcast(x, [](V a) { return a[0] < 0 ? -1.0 : 0.0; }); }, /*gradcheck=*/false});

// Bitwise references work on the two's-complement bits one at a time.
double refBits(double a, double b, int which) {
  uint64_t x = static_cast<uint64_t>(i64(a)), y = static_cast<uint64_t>(i64(b)), r = 0;
  for(int i = 0; i < 64; ++i) {
    uint64_t p = (x >> i) & 1u, q = (y >> i) & 1u;
    uint64_t bit = which == 0 ? (p && q) : which == 1 ? (p || q) : (p != q);
    r |= bit << i;
  }
  return double(static_cast<int64_t>(r));
}

ONYX_OP_CASE({"bitwise_and", "broadcast", {ints({3, 4}, -50, 50), ints({4}, -50, 50)},
              [](Xs x) { return bitwise_and(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refBits(a[0], a[1], 0); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"bitwise_or", "broadcast", {ints({3, 4}, -50, 50), ints({3, 1}, -50, 50)},
              [](Xs x) { return bitwise_or(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refBits(a[0], a[1], 1); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"bitwise_xor", "broadcast", {ints({2, 5}, -50, 50), ints({5}, -50, 50)},
              [](Xs x) { return bitwise_xor(x[0], x[1]); },
              [](Rs x) { return refBroadcast(x, [](V a) { return refBits(a[0], a[1], 2); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"bitwise_not", "matrix", {ints({3, 4}, -50, 50)}, [](Xs x) { return bitwise_not(x[0]); },
              [](Rs x) { return map1(x, [](double a) { return -a - 1; }); }, /*gradcheck=*/false});

// ---------------------------------------------- behaviour beyond the harness

// Integer division truncates toward zero and never traps.
TEST(ElementwiseOps2, IntegerDivisionAndModByZero) {
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

TEST(ElementwiseOps2, BadInputsNameTheProblem) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 3}, inits::zeros(), Type::float32);
  auto s = g->constant({4}, inits::zeros(), Type::float32);
  auto expectError = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch(const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectError([&] { bitwise_and(x, x); }, "needs integers");
  expectError([&] { prelu(x, s); }, "broadcast");
  expectError([&] { is_nan(g->indices({1, 2})); }, "floating-point");
  expectError([&] { g->make(Registry::instance().get("bit_shift"), {g->indices({1}), g->indices({1})},
                            {{"direction", attr("UP")}}); },
              "direction");
}


// The conversion helpers of src/core/types.h, against codes worked out by
// hand from the format definitions (sign | exponent field | mantissa).
TEST(SmallFloatConversion, Float8E4M3FN) {
  const Type t = Type::float8e4m3fn;  // bias 7, no inf, NaN S.1111.111, max 1.75 * 2^8 = 448
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x38);     // 0.0111.000
  EXPECT_EQ(encodeSmallFloat(t, -2.5), 0xC2);    // 1.1000.010: 1.25 * 2^1
  EXPECT_EQ(encodeSmallFloat(t, 448.0), 0x7E);
  EXPECT_EQ(encodeSmallFloat(t, 464.0), 0x7E);   // tie between 448 (even) and 480 (odd, the NaN code)
  EXPECT_EQ(encodeSmallFloat(t, 500.0), 0x7E);   // saturates
  EXPECT_EQ(encodeSmallFloat(t, 500.0, false), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY), 0xFE);
  EXPECT_EQ(encodeSmallFloat(t, INFINITY, false), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, NAN), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -9)), 0x01);      // smallest subnormal
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -10)), 0x00);     // tie -> even (0)
  EXPECT_EQ(encodeSmallFloat(t, 3 * std::ldexp(1.0, -10)), 0x02); // tie 1 vs 2 -> 2
  EXPECT_EQ(encodeSmallFloat(t, -0.0), 0x80);
  EXPECT_EQ(encodeSmallFloat(t, 1.0625), 0x38);  // tie 1.0 (m=0) vs 1.125 (m=1)
  EXPECT_EQ(encodeSmallFloat(t, 1.1875), 0x3A);  // tie 1.125 (m=1) vs 1.25 (m=2)
  EXPECT_EQ(decodeSmallFloat(t, 0x7E), 448.0);
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(decodeSmallFloat(t, 0xC2), -2.5);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0xFF)));
}

TEST(SmallFloatConversion, Float8E4M3FNUZ_E5M2_E5M2FNUZ) {
  Type t = Type::float8e4m3fnuz;  // bias 8, NaN 0x80 only, max 1.875 * 2^7 = 240
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x40);
  EXPECT_EQ(encodeSmallFloat(t, 240.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, 1000.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, -1000.0, false), 0x80);
  EXPECT_EQ(encodeSmallFloat(t, -0.0), 0x00);    // no negative zero
  EXPECT_EQ(encodeSmallFloat(t, NAN), 0x80);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0x80)));
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -10));
  t = Type::float8e5m2;  // bias 15, inf 0.11111.00, max 1.75 * 2^15 = 57344
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x3C);
  EXPECT_EQ(encodeSmallFloat(t, 57344.0), 0x7B);
  EXPECT_EQ(encodeSmallFloat(t, 1e6), 0x7B);
  EXPECT_EQ(encodeSmallFloat(t, 1e6, false), 0x7C);
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY, false), 0xFC);
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -16)), 0x01);
  EXPECT_EQ(decodeSmallFloat(t, 0x7C), INFINITY);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0x7D)));
  t = Type::float8e5m2fnuz;  // bias 16
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x40);
  EXPECT_EQ(encodeSmallFloat(t, 57344.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, INFINITY, false), 0x80);
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -17));
}

TEST(SmallFloatConversion, Float4E2M1AndE8M0) {
  const Type t = Type::float4e2m1;  // bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x2);
  EXPECT_EQ(encodeSmallFloat(t, 1.5), 0x3);
  EXPECT_EQ(encodeSmallFloat(t, 0.25), 0x0);   // tie 0 vs 0.5 -> 0
  EXPECT_EQ(encodeSmallFloat(t, 0.75), 0x2);   // tie 0.5 vs 1 -> 1
  EXPECT_EQ(encodeSmallFloat(t, 5.0), 0x6);    // tie 4 vs 6 -> 4
  EXPECT_EQ(encodeSmallFloat(t, -3.5), 0xE);   // tie 3 vs 4 -> -4
  EXPECT_EQ(encodeSmallFloat(t, 100.0), 0x7);  // always saturates
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY), 0xF);
  EXPECT_EQ(decodeSmallFloat(t, 0x7), 6.0);
  EXPECT_EQ(decodeSmallFloat(t, 0x9), -0.5);
  // float8e8m0: 2^(e - 127); 0xff NaN.
  EXPECT_EQ(encodeE8M0(1.0f), 0x7F);
  EXPECT_EQ(encodeE8M0(1.1f), 0x80);  // up
  EXPECT_EQ(encodeE8M0(1.1f, true, E8M0Round::down), 0x7F);
  EXPECT_EQ(encodeE8M0(1.1f, true, E8M0Round::nearest), 0x7F);
  EXPECT_EQ(encodeE8M0(1.5f, true, E8M0Round::nearest), 0x80);
  EXPECT_EQ(encodeE8M0(0.0f), 0x00);
  EXPECT_EQ(encodeE8M0(NAN), 0xFF);
  EXPECT_EQ(encodeE8M0(3e38f), 0xFE);         // 1.76 * 2^127 saturates
  EXPECT_EQ(encodeE8M0(3e38f, false), 0xFF);
  EXPECT_EQ(decodeSmallFloat(Type::float8e8m0, 0x80), 2.0);
  EXPECT_EQ(decodeSmallFloat(Type::float8e8m0, 0x00), std::ldexp(1.0, -127));
}

TEST(SmallFloatConversion, PackedIntegers) {
  uint8_t buf[2] = {0, 0};
  storeFromDouble(buf, Type::uint4, 0, 1.0);
  storeFromDouble(buf, Type::uint4, 1, 2.0);
  storeFromDouble(buf, Type::uint4, 2, 19.0);  // wraps to 3
  EXPECT_EQ(buf[0], 0x21);                      // first element in the low nibble
  EXPECT_EQ(buf[1], 0x03);
  storeFromDouble(buf, Type::int4, 0, -1.0);    // 0xF
  storeFromDouble(buf, Type::int4, 1, 9.7);     // trunc 9 = 0b1001 -> -7
  EXPECT_EQ(buf[0], 0x9F);
  EXPECT_EQ(loadAsDouble(buf, Type::int4, 0), -1.0);
  EXPECT_EQ(loadAsDouble(buf, Type::int4, 1), -7.0);
  EXPECT_EQ(loadAsDouble(buf, Type::uint4, 1), 9.0);
  uint8_t b2 = 0;
  const double v[4] = {1, -2, -1, 0};  // codes 01, 10, 11, 00
  for(size_t i = 0; i < 4; ++i) storeFromDouble(&b2, Type::int2, i, v[i]);
  EXPECT_EQ(b2, 0x39);
  for(size_t i = 0; i < 4; ++i) EXPECT_EQ(loadAsDouble(&b2, Type::int2, i), v[i]);
  EXPECT_EQ(loadAsDouble(&b2, Type::uint2, 1), 2.0);
  EXPECT_EQ(typeBytes(Type::int2, 5), 2u);
}

}  // namespace
}  // namespace test
}  // namespace onyx
