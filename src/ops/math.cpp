// Math functions: trigonometric and hyperbolic functions and their
// inverses, exp, log, sqrt and erf, on float tensors; the expression API
// (overloads of the std names for Expr) is in elementwise.h. One entry per
// op; the expression operators follow each group.
#include <onyx/ops/elementwise.h>

#include <cmath>

#include <onyx/graph/onnx_export.h>
#include <onyx/ops/elementwise_onnx.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;
using ops::floats;
using ops::typedExport;

namespace {
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
}  // namespace

// --------------------------------------------------- trigonometric, exp, log

// y = sin(x)
ONYX_OP(kSin, "sin")
    .doc("y = sin(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sin(_2), host::vec::sin))
    .backward([](GradCtx& g) { g.add(0, g.dy * cos(g.x(0))); })
    .onnx("Sin", 7)
    .exporter(typedExport("Sin", floats(22)));

// y = cos(x)
ONYX_OP(kCos, "cos")
    .doc("y = cos(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(cos(_2), host::vec::cos))
    .backward([](GradCtx& g) { g.add(0, -(g.dy * sin(g.x(0)))); })
    .onnx("Cos", 7)
    .exporter(typedExport("Cos", floats(22)));


Expr sin(Expr x) { return x->graph()->make(kSin, {x}); }
Expr cos(Expr x) { return x->graph()->make(kCos, {x}); }

// y = tan(x)
ONYX_OP(kTan, "tan")
    .doc("y = tan(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(tan(_2), host::vec::tan))
    .backward([](GradCtx& g) { g.add(0, g.dy * (1.0 + g.y() * g.y())); })
    .onnx("Tan", 7)
    .exporter(typedExport("Tan", floats(22)));

// y = e^x
ONYX_OP(kExp, "exp")
    .doc("y = e^x")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(exp(_2), host::vec::exp))
    .backward([](GradCtx& g) { g.add(0, g.dy * g.y()); })
    .onnx("Exp", 6)
    .exporter(typedExport("Exp", floats(13)));

// y = ln(x)
ONYX_OP(kLog, "log")
    .doc("y = ln(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(log(_2), host::vec::log))
    .backward([](GradCtx& g) { g.add(0, g.dy / g.x(0)); })
    .onnx("Log", 6)
    .exporter(typedExport("Log", floats(13)));

// y = sqrt(x)
ONYX_OP(kSqrt, "sqrt")
    .doc("y = sqrt(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sqrt(_2), host::vec::sqrt))
    .backward([](GradCtx& g) { g.add(0, (g.dy * 0.5) / g.y()); })
    .onnx("Sqrt", 6)
    .exporter(typedExport("Sqrt", floats(13)));

// y = erf(x) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt
ONYX_OP(kErf, "erf")
    .doc("y = erf(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(erf(_2), host::vec::erf))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy * (exp(-(x * x)) * kTwoOverSqrtPi));
    })
    .onnx("Erf", 9)
    .exporter(typedExport("Erf", floats(13)));

Expr tan(Expr x) { return x->graph()->make(kTan, {x}); }
Expr exp(Expr x) { return x->graph()->make(kExp, {x}); }
Expr log(Expr x) { return x->graph()->make(kLog, {x}); }
Expr sqrt(Expr x) { return x->graph()->make(kSqrt, {x}); }
Expr erf(Expr x) { return x->graph()->make(kErf, {x}); }

// ------------------------------------------------- inverse trig, hyperbolic

// y = acos(x)
ONYX_OP(kAcos, "acos")
    .doc("y = acos(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(acos(_2), host::vec::acos))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, -(g.dy / sqrt(1.0 - x * x)));
    })
    .onnx("Acos", 7)
    .exporter(typedExport("Acos", floats(22)));

// y = asin(x)
ONYX_OP(kAsin, "asin")
    .doc("y = asin(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(asin(_2), host::vec::asin))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / sqrt(1.0 - x * x));
    })
    .onnx("Asin", 7)
    .exporter(typedExport("Asin", floats(22)));

// y = atan(x)
ONYX_OP(kAtan, "atan")
    .doc("y = atan(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(atan(_2), host::vec::atan))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / (1.0 + x * x));
    })
    .onnx("Atan", 7)
    .exporter(typedExport("Atan", floats(22)));

// y = sinh(x)
ONYX_OP(kSinh, "sinh")
    .doc("y = sinh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sinh(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * cosh(g.x(0))); })
    .onnx("Sinh", 9)
    .exporter(typedExport("Sinh", floats(22)));

// y = cosh(x)
ONYX_OP(kCosh, "cosh")
    .doc("y = cosh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(cosh(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * sinh(g.x(0))); })
    .onnx("Cosh", 9)
    .exporter(typedExport("Cosh", floats(22)));

// y = asinh(x)
ONYX_OP(kAsinh, "asinh")
    .doc("y = asinh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(asinh(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / sqrt(x * x + 1.0));
    })
    .onnx("Asinh", 9)
    .exporter(typedExport("Asinh", floats(22)));

// y = acosh(x)
ONYX_OP(kAcosh, "acosh")
    .doc("y = acosh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(acosh(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / sqrt(x * x - 1.0));
    })
    .onnx("Acosh", 9)
    .exporter(typedExport("Acosh", floats(22)));

// y = atanh(x)
ONYX_OP(kAtanh, "atanh")
    .doc("y = atanh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(atanh(_2), host::vec::atanh))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / (1.0 - x * x));
    })
    .onnx("Atanh", 9)
    .exporter(typedExport("Atanh", floats(22)));

Expr acos(Expr x) { return x->graph()->make(kAcos, {x}); }
Expr asin(Expr x) { return x->graph()->make(kAsin, {x}); }
Expr atan(Expr x) { return x->graph()->make(kAtan, {x}); }
Expr sinh(Expr x) { return x->graph()->make(kSinh, {x}); }
Expr cosh(Expr x) { return x->graph()->make(kCosh, {x}); }
Expr asinh(Expr x) { return x->graph()->make(kAsinh, {x}); }
Expr acosh(Expr x) { return x->graph()->make(kAcosh, {x}); }
Expr atanh(Expr x) { return x->graph()->make(kAtanh, {x}); }

}  // namespace onyx
