// Harness cases for src/ops/elementwise.cpp. References are plain C++ math.
#include <cmath>

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

}  // namespace
}  // namespace test
}  // namespace onyx
