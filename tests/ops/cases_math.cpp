// Harness cases for src/ops/math.cpp. References are plain C++ math.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// ----------------------------------------------------- trigonometric, exp, log
ONYX_OP_CASE({"sin", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return sin(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::sin(a); }); }});
ONYX_OP_CASE({"cos", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return cos(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::cos(a); }); }});
ONYX_OP_CASE({"tan", "range", {in({3, 4}, -1.2, 1.2)},
              [](const std::vector<Expr>& x) { return tan(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::tan(a); }); }});
ONYX_OP_CASE({"exp", "range", {in({3, 4}, -3, 3)},
              [](const std::vector<Expr>& x) { return exp(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::exp(a); }); }});
ONYX_OP_CASE({"log", "positive", {in({3, 4}, 0.2, 5)},
              [](const std::vector<Expr>& x) { return log(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::log(a); }); }});
ONYX_OP_CASE({"log", "zero_and_negative", {values({3}, {0.0, -1.0, 1.0})},
              [](const std::vector<Expr>& x) { return log(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::log(a); }); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"sqrt", "positive", {in({2, 5}, 0.2, 4)},
              [](const std::vector<Expr>& x) { return sqrt(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::sqrt(a); }); }});
ONYX_OP_CASE({"erf", "range", {in({3, 4}, -2.5, 2.5)},
              [](const std::vector<Expr>& x) { return erf(x[0]); },
              [](const std::vector<Ref>& x) { return refMap(x, [](double a) { return std::erf(a); }); }});

// ------------------------------------------------ inverse trig, hyperbolic
ONYX_OP_CASE({"acos", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return acos(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return std::acos(a); }); }});
ONYX_OP_CASE({"asin", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return asin(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return std::asin(a); }); }});
ONYX_OP_CASE({"atan", "range", {in({3, 4}, -4, 4)}, [](Xs x) { return atan(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return std::atan(a); }); }});
ONYX_OP_CASE({"sinh", "range", {in({3, 4}, -3, 3)}, [](Xs x) { return sinh(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return (std::exp(a) - std::exp(-a)) / 2; }); }});
ONYX_OP_CASE({"cosh", "range", {in({3, 4}, -3, 3)}, [](Xs x) { return cosh(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return (std::exp(a) + std::exp(-a)) / 2; }); }});
ONYX_OP_CASE({"asinh", "range", {in({3, 4}, -4, 4)}, [](Xs x) { return asinh(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return std::log(a + std::sqrt(a * a + 1)); }); }});
ONYX_OP_CASE({"acosh", "above_one", {in({3, 4}, 1.2, 5)}, [](Xs x) { return acosh(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return std::log(a + std::sqrt(a * a - 1)); }); }});
ONYX_OP_CASE({"atanh", "open_interval", {in({3, 4}, -0.9, 0.9)}, [](Xs x) { return atanh(x[0]); },
              [](Rs x) { return refMap(x, [](double a) { return 0.5 * std::log((1 + a) / (1 - a)); }); }});

// ------------------------------------------------- behaviour beyond the harness

TEST(MathOps, BadInputsNameTheProblem) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  expectErrorMentioning([&] { exp(g->indices({1, 2})); }, "floating-point");
}

}  // namespace
}  // namespace test
}  // namespace onyx
