// Harness cases for src/ops/logic.cpp. References are plain C++ math.
#include <cmath>
#include <cstdint>
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

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

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
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return double(a == 0); }); },
              /*gradcheck=*/false});
// Comparisons feeding logic: (x > 0) and not (x >= 1).
ONYX_OP_CASE({"logical_not", "of_comparison", {values({5}, {-1.0, 0.5, 1.0, 0.0, 2.0})},
              [](const std::vector<Expr>& x) { return logical_and(gt(x[0], 0.0), logical_not(ge(x[0], 1.0))); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return double(a > 0 && a < 1); }); },
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

// ------------------------------------------------------------- NaN/Inf tests
const std::vector<double> kSpecial = {-kInf, -1.0, 0.0, kNaN, 2.5, kInf};

ONYX_OP_CASE({"is_nan", "special_values", {values({6}, kSpecial)}, [](Xs x) { return is_nan(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return double(a != a); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "both_signs", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return double(a == kInf || a == -kInf); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "negative_only", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0], true, false); },
              [](Rs x) { return refMap(x, [](double a) { return double(a == -kInf); }); }, /*gradcheck=*/false});
ONYX_OP_CASE({"is_inf", "positive_only", {values({6}, kSpecial)}, [](Xs x) { return is_inf(x[0], false, true); },
              [](Rs x) { return refMap(x, [](double a) { return double(a == kInf); }); }, /*gradcheck=*/false});

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
              [](Rs x) { return refMap(x, [](double a) { return -a - 1; }); }, /*gradcheck=*/false});

// ------------------------------------------------- behaviour beyond the harness

TEST(LogicOps, BadInputsNameTheProblem) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 3}, inits::zeros(), Type::float32);
  auto y = g->constant({3}, inits::zeros(), Type::float64);
  expectErrorMentioning([&] { where(x, x, x); }, "must be bool");
  expectErrorMentioning([&] { where(gt(x, 0.0), x, y); }, "different element types");
  expectErrorMentioning([&] { logical_and(x, x); }, "need bool");
  expectErrorMentioning([&] { lt(x, y); }, "different element types");
  expectErrorMentioning([&] { is_nan(g->indices({1, 2})); }, "floating-point");
  expectErrorMentioning([&] { bitwise_and(x, x); }, "needs integers");
  expectErrorMentioning([&] { g->make(Registry::instance().get("bit_shift"), {g->indices({1}), g->indices({1})},
                                     {{"direction", attr("UP")}}); },
                        "direction");
}

}  // namespace
}  // namespace test
}  // namespace onyx
