// Harness cases for src/ops/conversion.cpp. References are plain C++ math.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// ---------------------------------------------------------------------- cast
// cast to int64 and back truncates toward zero.
ONYX_OP_CASE({"cast", "float_to_int_to_float", {in({6}, -5, 5)},
              [](const std::vector<Expr>& x) { return cast(cast(x[0], Type::int64), x[0]->value_type()); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::trunc(a); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"cast", "float_roundtrip_grad", {in({2, 3})},
              [](const std::vector<Expr>& x) {
                Type other = x[0]->value_type() == Type::float64 ? Type::float32 : Type::float64;
                return cast(cast(x[0], other), x[0]->value_type()) * 3.0;
              },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return double(float(a)) * 3.0; }); },
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
              [](const std::vector<Ref>& x) { return refMap(x, nearestE4M3FN); },
              /*gradcheck=*/false});
// cast through int4 wraps: the truncated value modulo 16, in [-8, 7].
ONYX_OP_CASE({"cast", "int4_wraps", {in({3, 5}, -20, 20)},
              [](const std::vector<Expr>& x) { return cast(cast(x[0], Type::int4), x[0]->value_type()); },
              [](const std::vector<Ref>& x) {
                return refMap(x, [](double a) {
                  long long t = static_cast<long long>(std::trunc(a));
                  long long r = ((t % 16) + 16) % 16;
                  return double(r >= 8 ? r - 16 : r);
                });
              },
              /*gradcheck=*/false});

// ------------------------------------------------------------------ bitcast

// int32 bit patterns of floats in [1, 2.5] read back as float32.
ONYX_OP_CASE({"bitcast", "int32_to_float32", {ints({7}, 1065353216, 1075838976)},
              [](Xs x) { return bitcast(cast(x[0], Type::int32), Type::float32); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t i = 0; i < y.size(); ++i) {
                  int32_t b = static_cast<int32_t>(x[0][i]);
                  float f;
                  std::memcpy(&f, &b, 4);
                  y[i] = f;
                }
                return y;
              },
              /*gradcheck=*/false, 0, 0});

// float64 values read as int64 bit patterns.
ONYX_OP_CASE({"bitcast", "float64_to_int64", {values({2, 2}, {1.0, -2.5, 0.0, 1e300})},
              [](Xs x) { return bitcast(cast(x[0], Type::float64), Type::int64); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t i = 0; i < y.size(); ++i) {
                  double d = x[0][i];
                  int64_t b;
                  std::memcpy(&b, &d, 8);
                  y[i] = static_cast<double>(b);
                }
                return y;
              },
              /*gradcheck=*/false, 0, 0});

// ------------------------------------------------- behaviour beyond the harness

TEST(ConversionOps, BitcastNeedsEqualWidths) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  Expr x = g->constant(Shape{2}, inits::fromVector(std::vector<float>{1, 2}), Type::float32);
  EXPECT_THROW(bitcast(x, Type::int64), Error);
  EXPECT_EQ(bitcast(x, Type::uint32)->value_type(), Type::uint32);
}

}  // namespace
}  // namespace test
}  // namespace onyx
