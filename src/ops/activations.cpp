// Activations: tanh, sigmoid, the relu family (leaky, elu, selu, celu,
// thresholded, prelu), gelu, swish, mish, softplus, softsign, hard sigmoid
// and hard swish, shrink and clip; the expression API is in elementwise.h.
// One entry per op; the expression operators follow each group.
#include <onyx/ops/elementwise.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise_onnx.h>
#include <onyx/ops/kernel_helpers.h>
#ifndef ONYX_GPU_PLUGIN
#include <onyx/backend/cpu/dnnl_conv.h>
#endif

namespace onyx {

using namespace functional;
using ops::floats;
using ops::IntBridge;
using ops::ints;
using ops::typedExport;
using ops::vecWith;

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;

// y = f(x) on float types, for functors that capture attribute values (so
// they are built per call, not once per op like ops::unaryFloat).
template <class On, class F>
void runUnaryFloat(On, KernelCtx& c, F f) {
  dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    On::template run<T, T>(f, c.out, *c.in[0]);
  });
}

// dx = f(dy, x) on float types (dy and x of one shape), for kernels that
// pick their functor at run time.
template <class On, class F>
void runBinaryFloat(On, KernelCtx& c, F f) {
  dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    On::template run<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
  });
}

// Numeric (not bool) input, output like it.
void inferNumericUnary(InferCtx& c) {
  c.check(c.typeOf(0) != Type::boolean, "input is bool but this op needs a number; cast it with cast(x, Type::float32)");
  infer::sameAsInput0(c);
}

}  // namespace

// y = tanh(x)
ONYX_OP(kTanh, "tanh")
    .doc("y = tanh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(tanh(_2), host::vec::tanh))
    .backward([](GradCtx& g) { g.add(0, g.dy * (1.0 - g.y() * g.y())); })
    .onnx("Tanh", 6)
    .exporter(typedExport("Tanh", floats(13)));

// y = 1 / (1 + e^-x)
ONYX_OP(kSigmoid, "sigmoid")
    .doc("y = 1 / (1 + e^-x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sigmoid(_2), host::vec::sigmoid))
    .backward([](GradCtx& g) { g.add(0, g.dy * g.y() * (1.0 - g.y())); })
    .onnx("Sigmoid", 6)
    .exporter(typedExport("Sigmoid", floats(13)));

// dx = dy where x > 0, else 0
ONYX_OP(kReluGrad, "relu_grad")
    .doc("dx = dy if x > 0 else 0 (NaN x: 0): the gradient of relu, one pass over dy and x")
    .inputs(2)
    .infer([](InferCtx& c) {
      c.type = c.commonType();
      c.check(c.type != Type::boolean, "inputs are bool but relu_grad needs numbers");
      c.check(c.shapeOf(0) == c.shapeOf(1), "dy of shape ", c.shapeOf(0), " and x of shape ", c.shapeOf(1),
              " must have one shape");
      c.shape = c.shapeOf(0);
    })
    .kernel(ops::binaryNumeric(reluGrad(_2, _3)))
    // Linear in dy; x only selects (its derivative is 0 wherever it exists).
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.graph.make(kReluGrad, {g.dy, g.x(1)}));
    })
    .noOnnx("internal: the gradient of relu (where(x > 0, dy, 0) in ONNX terms)");

// y = max(x, 0)
ONYX_OP(kRelu, "relu")
    .doc("y = max(x, 0)")
    .inputs(1)
    .infer(inferNumericUnary)
    .kernel(ops::unaryNumeric(relu(_2), host::vec::relu))
    // One pass (was gt, then where: two, with a bool tensor between).
    .backward([](GradCtx& g) { g.add(0, g.graph.make(kReluGrad, {g.dy, g.x(0)})); })
    .onnx("Relu", 6)
    .exporter(typedExport("Relu", ints(13, 14, 14, IntBridge::viaFloat64)));

// y = x if x > 0 else alpha * x
ONYX_OP(kLeakyRelu, "leaky_relu")
    .doc("y = x if x > 0 else alpha * x")
    .inputs(1)
    .attr("alpha", 0.01)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, 0.0), _2, _2 * a.f("alpha")); },
                                 vecWith([](const float* x, float* y, int64_t n, float alpha, float) {
                                   host::vec::leakyRelu(x, y, n, alpha);
                                 }, "alpha")))
    .backward([](GradCtx& g) {
      g.add(0, where(gt(g.x(0), 0.0), g.dy, g.dy * g.attrs.f("alpha")));
    })
    .onnx("LeakyRelu", 6)
    .exporter(typedExport("LeakyRelu", floats(16)));

// y = x if x > 0 else alpha * (e^x - 1)
ONYX_OP(kElu, "elu")
    .doc("y = x if x > 0 else alpha * (e^x - 1)")
    .inputs(1)
    .attr("alpha", 1.0)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, 0.0), _2, a.f("alpha") * expm1(_2)); },
                                 vecWith([](const float* x, float* y, int64_t n, float alpha, float) {
                                   host::vec::elu(x, y, n, alpha, 1.f);
                                 }, "alpha")))
    .backward([](GradCtx& g) {
      // For x <= 0, dy/dx = alpha e^x = y + alpha.
      g.add(0, where(gt(g.x(0), 0.0), g.dy, g.dy * (g.y() + g.attrs.f("alpha"))));
    })
    .onnx("Elu", 6)
    .exporter(typedExport("Elu", floats(22)));

// y = gamma * (x if x > 0 else alpha * (e^x - 1))
ONYX_OP(kSelu, "selu")
    .doc("y = gamma * (x if x > 0 else alpha * (e^x - 1)), ONNX's alpha and gamma by default")
    .inputs(1)
    .attr("alpha", 1.67326319217681884765625)
    .attr("gamma", 1.05070102214813232421875)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) {
      return a.f("gamma") * if_then_else(gt(_2, 0.0), _2, a.f("alpha") * expm1(_2));
    }, vecWith(host::vec::elu, "alpha", "gamma")))
    .backward([](GradCtx& g) {
      double alpha = g.attrs.f("alpha"), gamma = g.attrs.f("gamma");
      // For x <= 0, dy/dx = gamma alpha e^x = y + gamma alpha.
      g.add(0, where(gt(g.x(0), 0.0), g.dy * gamma, g.dy * (g.y() + gamma * alpha)));
    })
    .onnx("Selu", 6)
    .exporter(typedExport("Selu", floats(22)));

// dx = dy * gelu'(x): erf form gelu' = Phi(x) + x phi(x); tanh form, with
// t = tanh(u), u = sqrt(2/pi) (x + 0.044715 x^3):
// gelu' = (1 + t)/2 + x/2 (1 - t^2) u'.
ONYX_OP(kGeluGrad, "gelu_grad")
    .doc("dx = dy * gelu'(x) (approximate as gelu's): the gradient of gelu, one pass over dy and x")
    .inputs(2)
    .attr("approximate", std::string("none"))
    .infer([](InferCtx& c) {
      const std::string& a = c.attrs.s("approximate");
      c.check(a == "none" || a == "tanh", "approximate is '", a, "' but must be \"none\" or \"tanh\"");
      c.requireFloat(0);
      c.requireFloat(1);
      c.type = c.commonType();
      c.check(c.shapeOf(0) == c.shapeOf(1), "dy of shape ", c.shapeOf(0), " and x of shape ", c.shapeOf(1),
              " must have one shape");
      c.shape = c.shapeOf(0);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      bool tanhForm = c.attrs.s("approximate") == "tanh";
#ifndef ONYX_GPU_PLUGIN
      if constexpr(std::is_same<decltype(on), ops::OnHost>::value) {
        const TensorBase &dy = *c.in[0], &x = *c.in[1];
        if(dy.type() == Type::float32 && x.type() == Type::float32 && c.out.type() == Type::float32 &&
           host::dnnlGeluGrad(tanhForm, dy.data<float>(), x.data<float>(), c.out.data<float>(), x.size()))
          return;
      }
#endif
      if(tanhForm) {
        auto t = tanh(kSqrt2OverPi * (_3 + kGeluCubic * _3 * _3 * _3));
        runBinaryFloat(on, c,
                       _2 * (0.5 * (1.0 + t) +
                             0.5 * _3 * (1.0 - t * t) * (kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * _3 * _3))));
      } else {
        runBinaryFloat(on, c, _2 * (0.5 * (1.0 + erf(_3 * kSqrtHalf)) + _3 * exp(_3 * _3 * -0.5) * kInvSqrt2Pi));
      }
    }))
    // Linear in dy; in x through gelu'': erf form phi(x) (2 - x^2); tanh form
    // (1 - t^2) (u' - x t u'^2 + 3 sqrt(2/pi) 0.044715 x^2).
    .backward([](GradCtx& g) {
      Expr x = g.x(1);
      if(g.needs(0)) g.add(0, gelu_grad(g.dy, x, g.attrs.s("approximate") == "tanh"));
      if(!g.needs(1)) return;
      Expr second;
      if(g.attrs.s("approximate") == "tanh") {
        Expr t = tanh((x + x * x * x * kGeluCubic) * kSqrt2OverPi);
        Expr du = (1.0 + x * x * (3 * kGeluCubic)) * kSqrt2OverPi;
        second = (1.0 - t * t) * (du - x * t * du * du + x * x * (3 * kGeluCubic * kSqrt2OverPi));
      } else {
        second = exp(x * x * -0.5) * kInvSqrt2Pi * (2.0 - x * x);
      }
      g.add(1, g.dy * g.x(0) * second);
    })
    .noOnnx("internal: the gradient of gelu (its derivative's expression in ONNX terms)");

// y = x * Phi(x) = x/2 (1 + erf(x / sqrt 2)), or with approximate = "tanh"
// y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
ONYX_OP(kGelu, "gelu")
    .doc("y = x/2 (1 + erf(x/sqrt(2))); approximate=\"tanh\": x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))")
    .inputs(1)
    .attr("approximate", std::string("none"))
    .infer([](InferCtx& c) {
      const std::string& a = c.attrs.s("approximate");
      c.check(a == "none" || a == "tanh", "approximate is '", a, "' but must be \"none\" or \"tanh\"");
      ops::inferFloatUnary(c);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      bool tanhForm = c.attrs.s("approximate") == "tanh";
#ifndef ONYX_GPU_PLUGIN
      if constexpr(std::is_same<decltype(on), ops::OnHost>::value) {
        const TensorBase& x = *c.in[0];
        if(x.type() == Type::float32 && c.out.type() == Type::float32 && x.shape() == c.out.shape() &&
           host::dnnlGelu(tanhForm, x.data<float>(), c.out.data<float>(), x.size()))
          return;
      }
#endif
      if(on.vectorUnary(c, tanhForm ? host::vec::geluTanh : host::vec::geluErf)) return;
      if(tanhForm)
        runUnaryFloat(on, c, 0.5 * _2 * (1.0 + tanh(kSqrt2OverPi * (_2 + kGeluCubic * _2 * _2 * _2))));
      else
        runUnaryFloat(on, c, 0.5 * _2 * (1.0 + erf(_2 * kSqrtHalf)));
    }))
    // One pass over dy and x (gelu_grad), where the expression of gelu'
    // was eight element-wise nodes.
    .backward([](GradCtx& g) { g.add(0, gelu_grad(g.dy, g.x(0), g.attrs.s("approximate") == "tanh")); })
    .onnx("Gelu", 20);

// y = x * sigmoid(x)
ONYX_OP(kSwish, "swish")
    .doc("y = x * sigmoid(x) (SiLU)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(_2 * sigmoid(_2), host::vec::silu))
    .backward([](GradCtx& g) {
      // dy/dx = s + x s (1 - s) = s + y (1 - s), s = sigmoid(x).
      Expr s = sigmoid(g.x(0));
      g.add(0, g.dy * (s + g.y() * (1.0 - s)));
    })
    // Swish-24: x * sigmoid(alpha x); alpha = 1 is this op.
    .onnx("Swish", 24)
    .importer([](OnnxImportCtx& c) {
      double alpha = c.attrFloat("alpha", 1.0);
      Expr x = c.input(0);
      c.setOutput(0, alpha == 1.0 ? swish(x) : x * sigmoid(x * alpha));
    });

// y = ln(1 + e^x)
ONYX_OP(kSoftplus, "softplus")
    .doc("y = ln(1 + e^x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(softplus(_2), host::vec::softplus))
    .backward([](GradCtx& g) { g.add(0, g.dy * sigmoid(g.x(0))); })
    .onnx("Softplus", 1)
    .exporter(typedExport("Softplus", floats(22)));

namespace {
// Clip with its bounds as attributes (opsets 6-10, float32 values) or as
// optional inputs in x's type (11+). An infinite bound is no bound: it is
// left out (the attribute's default or an absent input), so that the import
// gives it back as infinite. Clip takes integers from opset 12 and bfloat16
// from 13; before, 8- to 32-bit integers go through float64 with the bounds
// as the kernel uses them (saturated to x's type and truncated), and
// bfloat16 through float32, both exact.
void exportClip(OnnxExportCtx& c, bool attrForm) {
  Type t = c.inputType(0);
  double bound[2] = {c.attrs().f("min"), c.attrs().f("max")};
  Type ct = t;  // the type Clip runs in
  if(isInt(t) && c.opset() < 12) {
    if(typeBits(t) > 32) c.requireOpset(12, str("Clip on ", t));
    ct = Type::float64;
    for(double& b : bound) {
      if(std::isinf(b)) continue;
      Tensor v = TensorBase::create(Shape(std::vector<int64_t>{}), t);
      storeFromDouble(v->raw(), t, 0, b);
      b = loadAsDouble(v->raw(), t, 0);
    }
  } else if(t == Type::bfloat16 && c.opset() < 13) {
    ct = Type::float32;
  }
  c.check(ct == t || c.opset() >= 6, "Clip on ", t, " needs a Cast, which this exporter writes from opset 6 on");
  std::string x = c.input(0);
  if(ct != t) {
    x = c.fresh(std::string("x_") + typeName(ct));
    c.emit("Cast", {c.input(0)}, {x}, {{"to", int64_t(ct)}});
  }
  std::string y = ct == t ? c.output() : c.fresh(std::string("y_") + typeName(ct));
  // Initializers named after the value they bound (see the reduce export).
  std::string prefix = c.output() + "/";
  std::string local = y.rfind(prefix, 0) == 0 ? y.substr(prefix.size()) + "/" : "";
  const char* names[2] = {"min", "max"};
  if(attrForm) {
    OnnxAttrs attrs;
    for(int k = 0; k < 2; ++k) {
      double v = bound[k];
      if(std::isinf(v)) continue;
      // Kernels below float64 compare with the bound as a float32 anyway.
      c.check(ct != Type::float64 || std::isnan(v) || static_cast<double>(static_cast<float>(v)) == v, names[k],
              " = ", v, " is not a float32 value, which Clip's attribute is before opset 11");
      attrs.emplace_back(names[k], AttrValue(v));
    }
    c.emit("Clip", {x}, {y}, attrs);
  } else {
    std::vector<std::string> ins{x};
    if(!std::isinf(bound[0]) || !std::isinf(bound[1]))
      ins.push_back(std::isinf(bound[0]) ? "" : c.scalarConst(bound[0], ct, local + "min"));
    if(!std::isinf(bound[1])) ins.push_back(c.scalarConst(bound[1], ct, local + "max"));
    c.emit("Clip", ins, {y});
  }
  if(ct != t) c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
}
}  // namespace

// y = min(max(x, min), max)
ONYX_OP(kClip, "clip")
    .doc("y = min(max(x, min), max); min > max gives max everywhere, as in ONNX")
    .inputs(1)
    .attr("min", -std::numeric_limits<double>::infinity())
    .attr("max", std::numeric_limits<double>::infinity())
    .infer(inferNumericUnary)
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      double lo = c.attrs.f("min"), hi = c.attrs.f("max");
      auto vecClip = [lo, hi](const float* x, float* y, int64_t n) {
        host::vec::clip(x, y, n, static_cast<float>(lo), static_cast<float>(hi));
      };
      if(on.vectorUnary(c, vecClip)) return;
      dispatchNumeric(c.out.type(), "clip", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = typename ComputeOf<T>::type;
        // Integer bounds saturate (an infinite bound means no bound).
        C l, h;
        if constexpr(std::is_integral<T>::value) {
          l = castFromDouble<T>(lo);
          h = castFromDouble<T>(hi);
        } else {
          l = static_cast<C>(lo);
          h = static_cast<C>(hi);
        }
        decltype(on)::template run<T, T>(minimum(maximum(_2, l), h), c.out, *c.in[0]);
      });
    }))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, where(logical_and(gt(x, g.attrs.f("min")), lt(x, g.attrs.f("max"))), g.dy, 0.0));
    })
    // Opset 11 moved min and max from attributes to optional inputs. An
    // infinite bound is no bound: it is left out (the attribute's default
    // or an absent input), so that the import gives it back as infinite.
    .onnx("Clip", 6, 10)
    .exporter([](OnnxExportCtx& c) { exportClip(c, true); })
    .onnx("Clip", 11)
    .exporter([](OnnxExportCtx& c) { exportClip(c, false); })
    .importer([](OnnxImportCtx& c) {
      // Constant bounds become attributes; bounds computed by the graph
      // apply as maximum/minimum (so the graph stays valid for any values).
      Expr x = c.input(0);
      double bound[2] = {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
      Expr dyn[2];
      bool anyConst = false;
      for(size_t i = 1; i <= 2; ++i) {
        if(i >= c.numInputs() || !c.hasInput(i)) continue;
        Expr b = c.input(i);
        if(b->kind() == NodeKind::Constant) {
          bound[i - 1] = c.scalar(i);
          anyConst = true;
        } else {
          c.check(b->shape().elements() == 1, "input ", i, " (", i == 1 ? "min" : "max",
                  ") must hold one value, got shape ", b->shape());
          dyn[i - 1] = cast(b, x->value_type());
        }
      }
      Expr y = x;
      if(dyn[0]) y = maximum(y, dyn[0]);
      // No bounds at all is clip(x) still, as the export of such a clip
      // writes it.
      if(anyConst || (!dyn[0] && !dyn[1])) y = clip(y, bound[0], bound[1]);
      if(dyn[1]) y = minimum(y, dyn[1]);
      c.setOutput(0, y);
    });

Expr tanh(Expr x) { return x->graph()->make(kTanh, {x}); }
Expr sigmoid(Expr x) { return x->graph()->make(kSigmoid, {x}); }
Expr relu(Expr x) { return x->graph()->make(kRelu, {x}); }
Expr relu_grad(Expr dy, Expr x) { return x->graph()->make(kReluGrad, {dy, x}); }
Expr leaky_relu(Expr x, float alpha) { return x->graph()->make(kLeakyRelu, {x}, {{"alpha", attr(alpha)}}); }
Expr elu(Expr x, float alpha) { return x->graph()->make(kElu, {x}, {{"alpha", attr(alpha)}}); }
Expr selu(Expr x) { return x->graph()->make(kSelu, {x}); }
Expr gelu(Expr x, bool tanhApprox) {
  return x->graph()->make(kGelu, {x}, {{"approximate", attr(tanhApprox ? "tanh" : "none")}});
}
Expr gelu_grad(Expr dy, Expr x, bool tanhApprox) {
  return x->graph()->make(kGeluGrad, {dy, x}, {{"approximate", attr(tanhApprox ? "tanh" : "none")}});
}
Expr swish(Expr x) { return x->graph()->make(kSwish, {x}); }
Expr softplus(Expr x) { return x->graph()->make(kSoftplus, {x}); }
Expr clip(Expr x, double lo, double hi) { return x->graph()->make(kClip, {x}, {{"min", lo}, {"max", hi}}); }

// y = x / (1 + |x|)
ONYX_OP(kSoftsign, "softsign")
    .doc("y = x / (1 + |x|)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(softsign(_2), host::vec::softsign))
    .backward([](GradCtx& g) {
      Expr d = 1.0 + abs(g.x(0));
      g.add(0, g.dy / (d * d));
    })
    .onnx("Softsign", 1)
    .exporter(typedExport("Softsign", floats(22)));

// y = max(0, min(1, alpha x + beta))
ONYX_OP(kHardSigmoid, "hard_sigmoid")
    .doc("y = max(0, min(1, alpha x + beta))")
    .inputs(1)
    .attr("alpha", 0.2)
    .attr("beta", 0.5)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) {
      return fmaxOf(0.0, fminOf(1.0, a.f("alpha") * _2 + a.f("beta")));
    }, vecWith(host::vec::hardSigmoid, "alpha", "beta")))
    .backward([](GradCtx& g) {
      // alpha where 0 < alpha x + beta < 1, 0 on the flat parts.
      Expr y = g.y();
      g.add(0, where(logical_and(gt(y, 0.0), lt(y, 1.0)), g.dy * g.attrs.f("alpha"), 0.0));
    })
    .onnx("HardSigmoid", 6)
    .exporter(typedExport("HardSigmoid", floats(22)));

// y = x * max(0, min(1, x/6 + 1/2))
ONYX_OP(kHardSwish, "hard_swish")
    .doc("y = x * max(0, min(1, x/6 + 1/2))")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(hardSwish(_2), host::vec::hardSwish))
    .backward([](GradCtx& g) {
      // 0 for x < -3, x/3 + 1/2 in between, 1 for x > 3.
      Expr x = g.x(0);
      Expr inner = logical_and(gt(x, -3.0), lt(x, 3.0));
      g.add(0, where(inner, g.dy * (x * (1.0 / 3.0) + 0.5), where(ge(x, 3.0), g.dy, 0.0)));
    })
    .onnx("HardSwish", 14)
    .exporter(typedExport("HardSwish", floats(22)));

// y = x * tanh(ln(1 + e^x))
ONYX_OP(kMish, "mish")
    .doc("y = x * tanh(softplus(x))")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(mish(_2), host::vec::mish))
    .backward([](GradCtx& g) {
      // dy/dx = t + x (1 - t^2) sigmoid(x), t = tanh(softplus(x)).
      Expr x = g.x(0);
      Expr t = tanh(softplus(x));
      g.add(0, g.dy * (t + x * (1.0 - t * t) * sigmoid(x)));
    })
    .onnx("Mish", 18)
    .exporter(typedExport("Mish", floats(22)));

// y = x if x > alpha else 0
ONYX_OP(kThresholdedRelu, "thresholded_relu")
    .doc("y = x if x > alpha else 0")
    .inputs(1)
    .attr("alpha", 1.0)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, a.f("alpha")), _2, 0.0); }))
    .backward([](GradCtx& g) { g.add(0, where(gt(g.x(0), g.attrs.f("alpha")), g.dy, 0.0)); })
    .onnx("ThresholdedRelu", 10)
    .exporter(typedExport("ThresholdedRelu", floats(22)));

// y = max(0, x) + min(0, alpha (e^(x/alpha) - 1))
ONYX_OP(kCelu, "celu")
    .doc("y = max(0, x) + min(0, alpha (e^(x/alpha) - 1))")
    .inputs(1)
    .attr("alpha", 1.0)
    .infer([](InferCtx& c) {
      c.check(c.attrs.f("alpha") != 0, "alpha must not be 0");
      ops::inferFloatUnary(c);
    })
    .kernel(ops::unaryFloatWith([](const auto& a) {
      double alpha = a.f("alpha");
      return if_then_else(gt(_2, 0.0), _2, alpha * expm1(_2 / alpha));
    }, vecWith([](const float* x, float* y, int64_t n, float alpha, float) { host::vec::celu(x, y, n, alpha); },
               "alpha")))
    .backward([](GradCtx& g) {
      // For x <= 0, dy/dx = e^(x/alpha) = y/alpha + 1.
      double alpha = g.attrs.f("alpha");
      g.add(0, where(gt(g.x(0), 0.0), g.dy, g.dy * (g.y() * (1.0 / alpha) + 1.0)));
    })
    .onnx("Celu", 12)
    .exporter(typedExport("Celu", floats(28, 28, 28)));

// y = x if x >= 0 else slope * x
ONYX_OP(kPrelu, "prelu")
    .doc("y = x if x >= 0 else slope * x (slope broadcasts to x)")
    .inputs(2)
    .infer([](InferCtx& c) {
      infer::broadcast(c);
      c.check(c.type != Type::boolean, "inputs are bool but prelu needs numbers");
      c.check(c.shape == c.shapeOf(0), "slope of shape ", c.shapeOf(1), " does not broadcast to x's shape ",
              c.shapeOf(0));
    })
    .kernel(ops::binaryNumeric(prelu(_2, _3)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      Expr negative = lt(x, 0.0);
      if(g.needs(0)) g.add(0, where(negative, g.dy * g.x(1), g.dy));
      if(g.needs(1)) g.add(1, where(negative, g.dy * x, 0.0));
    })
    // Opsets 1-6 are imported by kOnnxPReluLegacy (converters/import_elementwise.cpp).
    .onnx("PRelu", 7)
    .exporter(typedExport("PRelu", floats(16)));

namespace {
// Shrink of one element, computed in double as ONNX's reference does.
struct ShrinkOf {
  double lambd, bias;
  template <class O, class V>
  ONYX_HD V operator()(O, V v) const {
    double d = static_cast<double>(v);
    if(d < -lambd) return toV<V>(d + bias);
    if(d > lambd) return toV<V>(d - bias);
    return V(0);
  }
  // Integers: a NaN result (a NaN bias) is 0 and one past the type's range
  // saturates, where the plain cast was undefined (found by the fuzzer).
  template <class V>
  static ONYX_HD V toV(double r) {
    if constexpr(std::is_integral<V>::value && !std::is_same<V, bool>::value) return saturateToInt<V>(r);
    else return static_cast<V>(r);
  }
};
}  // namespace

// y = x + bias if x < -lambd, x - bias if x > lambd, else 0
ONYX_OP(kShrink, "shrink")
    .doc("y = x + bias if x < -lambd; x - bias if x > lambd; 0 otherwise")
    .inputs(1)
    .attr("lambd", 0.5)
    .attr("bias", 0.0)
    .infer(inferNumericUnary)
    .kernel(ops::unaryNumericWith([](const Attrs& a) { return ShrinkOf{a.f("lambd"), a.f("bias")}; }))
    .backward([](GradCtx& g) {
      double lambd = g.attrs.f("lambd");
      Expr x = g.x(0);
      g.add(0, where(logical_or(lt(x, -lambd), gt(x, lambd)), g.dy, 0.0));
    })
    .onnx("Shrink", 9)
    .exporter(typedExport("Shrink", floats(0)));

Expr softsign(Expr x) { return x->graph()->make(kSoftsign, {x}); }
Expr hard_sigmoid(Expr x, float alpha, float beta) {
  return x->graph()->make(kHardSigmoid, {x}, {{"alpha", attr(alpha)}, {"beta", attr(beta)}});
}
Expr hard_swish(Expr x) { return x->graph()->make(kHardSwish, {x}); }
Expr mish(Expr x) { return x->graph()->make(kMish, {x}); }
Expr thresholded_relu(Expr x, float alpha) { return x->graph()->make(kThresholdedRelu, {x}, {{"alpha", attr(alpha)}}); }
Expr celu(Expr x, float alpha) { return x->graph()->make(kCelu, {x}, {{"alpha", attr(alpha)}}); }
Expr prelu(Expr x, Expr slope) { return x->graph()->make(kPrelu, {x, slope}); }
Expr shrink(Expr x, float lambd, float bias) {
  return x->graph()->make(kShrink, {x}, {{"lambd", attr(lambd)}, {"bias", attr(bias)}});
}

}  // namespace onyx
