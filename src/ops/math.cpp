// More element-wise ops: inverse trigonometric and hyperbolic functions,
// rounding, NaN/Inf tests, further activations (hard sigmoid/swish, mish,
// thresholded relu, celu, prelu, shrink, softsign), mod and bitwise ops.
// The expression API is in elementwise.h; one entry per op as in
// elementwise.cpp.
#include <onyx/ops/elementwise.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/shape.h>

namespace onyx {

using namespace functional;
using ops::scalarLike;

namespace {

// Integer types only (bitwise ops).
template <class Fn>
void dispatchInteger(Type t, const char* what, Fn&& fn) {
  dispatchNumeric(t, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(std::is_integral<T>::value) fn(tag);
    else unsupportedType(t, what, "integer types");
  });
}

void inferNumericUnary(InferCtx& c) {
  c.check(c.typeOf(0) != Type::boolean, "input is bool but this op needs a number; cast it with cast(x, Type::float32)");
  infer::sameAsInput0(c);
}

void inferIntegerBroadcast(InferCtx& c) {
  infer::broadcast(c);
  c.check(isInt(c.type), "inputs have element type ", c.type, " but this op needs integers");
}

// Float input, bool output of the same shape.
void inferFloatTest(InferCtx& c) {
  c.requireFloat(0);
  c.shape = c.shapeOf(0);
  c.type = Type::boolean;
}

Expr maskGrad(Expr mask, Expr dy, bool whereTrue) {
  Expr zero = scalarLike(dy, 0.0);
  return whereTrue ? where(mask, dy, zero) : where(mask, zero, dy);
}

// a mod b: with fmod the sign of a (C's %, fmod), without it the sign of b
// (Python's %). Integer b = 0 gives 0 instead of trapping.
template <class T>
ONYX_HD T modOf(T a, T b, bool cMod) {
  if constexpr(std::is_integral<T>::value) {
    if(b == T(0)) return T(0);
    if constexpr(std::is_signed<T>::value) {
      if(b == T(-1)) return T(0);  // also avoids lowest % -1 overflowing
      T r = static_cast<T>(a % b);
      if(!cMod && r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
      return r;
    } else {
      (void)cMod;
      return static_cast<T>(a % b);
    }
  } else {
    T r = std::fmod(a, b);
    if(!cMod && r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
    return r;
  }
}

// a << b or a >> b; shifts by a negative amount or by the width or more give
// 0 (or -1 for a right shift of a negative value), as ONNX's reference.
template <class T>
ONYX_HD T shiftOf(T a, T b, bool left) {
  constexpr int bits = static_cast<int>(sizeof(T) * 8);
  using U = std::make_unsigned_t<T>;
  bool inRange = !isNegative(b) && static_cast<uint64_t>(b) < static_cast<uint64_t>(bits);
  if(left) return inRange ? static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<int>(b))) : T(0);
  if(inRange) return static_cast<T>(a >> static_cast<int>(b));
  return isNegative(a) ? static_cast<T>(-1) : T(0);
}

// Functors of the integer and float tests below (CPU and GPU kernels).
struct ModOf {
  bool cMod;
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return modOf(a, b, cMod); }
};
struct ShiftOf {
  bool left;
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return shiftOf(a, b, left); }
};
struct BitAnd {
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return static_cast<T>(a & b); }
};
struct BitOr {
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return static_cast<T>(a | b); }
};
struct BitXor {
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return static_cast<T>(a ^ b); }
};
struct BitNot {
  template <class O, class T> ONYX_HD T operator()(O, T a) const { return static_cast<T>(~a); }
};
struct IsNanOf {
  template <class O, class V> ONYX_HD bool operator()(O, V v) const { return v != v; }
};
struct IsInfOf {
  bool neg, pos;
  template <class O, class V> ONYX_HD bool operator()(O, V v) const {
    double d = static_cast<double>(v);
    return (d == HUGE_VAL && pos) || (d == -HUGE_VAL && neg);
  }
};

// ---- ONNX export (as in elementwise.cpp)

using OnnxExportFn = std::function<void(OnnxExportCtx&)>;

// The default export as `opType`, except where ONNX's op takes x's float16 /
// bfloat16 / float64 type only from opset f16Since / bf16Since / f64Since on
// (0: never): below that, the inputs of x's type go through float32 and the
// result back. The kernels compute float16 and bfloat16 in float32 (shrink:
// through float32 from double) and round once at the end, so that form
// computes the same bits; float64 has no such form.
OnnxExportFn floatExport(const char* opType, int bf16Since, int f16Since = 1, int f64Since = 1) {
  std::string op = opType;
  return [op, bf16Since, f16Since, f64Since](OnnxExportCtx& c) {
    Type t = c.inputType(0);
    int since = t == Type::bfloat16 ? bf16Since : t == Type::float16 ? f16Since : t == Type::float64 ? f64Since : 1;
    if(since > 0 && c.opset() >= since) {
      c.emitDefault(op);
      return;
    }
    if(t == Type::float64) {
      c.check(since > 0, op, " has no float64 form in ONNX");
      c.requireOpset(since, str(op, " on float64"));
    }
    c.check(c.opset() >= 6, op, " on ", t, " needs a Cast to float32, which this exporter writes from opset 6 on");
    std::vector<std::string> ins;
    for(size_t i = 0; i < c.numInputs(); ++i) {
      if(c.inputType(i) != t) {
        ins.push_back(c.input(i));
        continue;
      }
      std::string w = c.fresh("in" + std::to_string(i) + "_f32");
      c.emit("Cast", {c.input(i)}, {w}, {{"to", int64_t(Type::float32)}});
      ins.push_back(w);
    }
    if(c.node().value_type() != t) {  // a test: bool out
      c.emit(op, ins, {c.output()}, c.nodeAttrs());
      return;
    }
    std::string y = c.fresh("y_f32");
    c.emit(op, ins, {y}, c.nodeAttrs());
    c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
  };
}

}  // namespace

// ------------------------------------------------- inverse trig, hyperbolic

// y = acos(x)
ONYX_OP(kAcos, "acos")
    .doc("y = acos(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(acos(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, -(g.dy / sqrt(1.0 - x * x)));
    })
    .onnx("Acos", 7)
    .exporter(floatExport("Acos", 22));

// y = asin(x)
ONYX_OP(kAsin, "asin")
    .doc("y = asin(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(asin(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / sqrt(1.0 - x * x));
    })
    .onnx("Asin", 7)
    .exporter(floatExport("Asin", 22));

// y = atan(x)
ONYX_OP(kAtan, "atan")
    .doc("y = atan(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(atan(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / (1.0 + x * x));
    })
    .onnx("Atan", 7)
    .exporter(floatExport("Atan", 22));

// y = sinh(x)
ONYX_OP(kSinh, "sinh")
    .doc("y = sinh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sinh(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * cosh(g.x(0))); })
    .onnx("Sinh", 9)
    .exporter(floatExport("Sinh", 22));

// y = cosh(x)
ONYX_OP(kCosh, "cosh")
    .doc("y = cosh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(cosh(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * sinh(g.x(0))); })
    .onnx("Cosh", 9)
    .exporter(floatExport("Cosh", 22));

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
    .exporter(floatExport("Asinh", 22));

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
    .exporter(floatExport("Acosh", 22));

// y = atanh(x)
ONYX_OP(kAtanh, "atanh")
    .doc("y = atanh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(atanh(_2)))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      g.add(0, g.dy / (1.0 - x * x));
    })
    .onnx("Atanh", 9)
    .exporter(floatExport("Atanh", 22));

Expr acos(Expr x) { return x->graph()->make(kAcos, {x}); }
Expr asin(Expr x) { return x->graph()->make(kAsin, {x}); }
Expr atan(Expr x) { return x->graph()->make(kAtan, {x}); }
Expr sinh(Expr x) { return x->graph()->make(kSinh, {x}); }
Expr cosh(Expr x) { return x->graph()->make(kCosh, {x}); }
Expr asinh(Expr x) { return x->graph()->make(kAsinh, {x}); }
Expr acosh(Expr x) { return x->graph()->make(kAcosh, {x}); }
Expr atanh(Expr x) { return x->graph()->make(kAtanh, {x}); }

// ----------------------------------------------------------------- rounding

// y = floor(x)
ONYX_OP(kFloor, "floor")
    .doc("y = floor(x) (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(floor(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Floor", 6)
    .exporter(floatExport("Floor", 13));

// y = ceil(x)
ONYX_OP(kCeil, "ceil")
    .doc("y = ceil(x) (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(ceil(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Ceil", 6)
    .exporter(floatExport("Ceil", 13));

// y = x rounded to the nearest integer, halves to even
ONYX_OP(kRound, "round")
    .doc("y = x rounded to the nearest integer, halfway cases to even (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(roundEven(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Round", 11)
    .exporter(floatExport("Round", 22));

Expr floor(Expr x) { return x->graph()->make(kFloor, {x}); }
Expr ceil(Expr x) { return x->graph()->make(kCeil, {x}); }
Expr round(Expr x) { return x->graph()->make(kRound, {x}); }

// ----------------------------------------------------------- NaN/Inf tests

// y = x is NaN
ONYX_OP(kIsNan, "is_nan")
    .doc("y = x is NaN (bool)")
    .inputs(1)
    .infer(inferFloatTest)
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      dispatchFloat(c.in[0]->type(), "is_nan", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<bool, T>(IsNanOf(), c.out, *c.in[0]);
      });
    }))
    .notDifferentiable("boolean output")
    .onnx("IsNaN", 9)
    .exporter(floatExport("IsNaN", 13));

// y = x is +inf (detect_positive) or -inf (detect_negative)
ONYX_OP(kIsInf, "is_inf")
    .doc("y = (x == +inf and detect_positive) or (x == -inf and detect_negative) (bool)")
    .inputs(1)
    .attr("detect_negative", int64_t(1))
    .attr("detect_positive", int64_t(1))
    .infer(inferFloatTest)
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      IsInfOf f{c.attrs.i("detect_negative") != 0, c.attrs.i("detect_positive") != 0};
      dispatchFloat(c.in[0]->type(), "is_inf", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<bool, T>(f, c.out, *c.in[0]);
      });
    }))
    .notDifferentiable("boolean output")
    .onnx("IsInf", 10)
    .exporter(floatExport("IsInf", 20, 20));

Expr is_nan(Expr x) { return x->graph()->make(kIsNan, {x}); }
Expr is_inf(Expr x, bool detectNegative, bool detectPositive) {
  return x->graph()->make(kIsInf, {x},
                          {{"detect_negative", attr(detectNegative)}, {"detect_positive", attr(detectPositive)}});
}

// -------------------------------------------------------------- activations

// y = x / (1 + |x|)
ONYX_OP(kSoftsign, "softsign")
    .doc("y = x / (1 + |x|)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(softsign(_2)))
    .backward([](GradCtx& g) {
      Expr d = 1.0 + abs(g.x(0));
      g.add(0, g.dy / (d * d));
    })
    .onnx("Softsign", 1)
    .exporter(floatExport("Softsign", 22));

// y = max(0, min(1, alpha x + beta))
ONYX_OP(kHardSigmoid, "hard_sigmoid")
    .doc("y = max(0, min(1, alpha x + beta))")
    .inputs(1)
    .attr("alpha", 0.2)
    .attr("beta", 0.5)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) {
      return fmaxOf(0.0, fminOf(1.0, a.f("alpha") * _2 + a.f("beta")));
    }))
    .backward([](GradCtx& g) {
      // alpha where 0 < alpha x + beta < 1, 0 on the flat parts.
      Expr y = g.y();
      g.add(0, maskGrad(logical_and(gt(y, 0.0), lt(y, 1.0)), g.dy * g.attrs.f("alpha"), true));
    })
    .onnx("HardSigmoid", 6)
    .exporter(floatExport("HardSigmoid", 22));

// y = x * max(0, min(1, x/6 + 1/2))
ONYX_OP(kHardSwish, "hard_swish")
    .doc("y = x * max(0, min(1, x/6 + 1/2))")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(hardSwish(_2)))
    .backward([](GradCtx& g) {
      // 0 for x < -3, x/3 + 1/2 in between, 1 for x > 3.
      Expr x = g.x(0);
      Expr inner = logical_and(gt(x, -3.0), lt(x, 3.0));
      g.add(0, where(inner, g.dy * (x * (1.0 / 3.0) + 0.5), maskGrad(ge(x, 3.0), g.dy, true)));
    })
    .onnx("HardSwish", 14)
    .exporter(floatExport("HardSwish", 22));

// y = x * tanh(ln(1 + e^x))
ONYX_OP(kMish, "mish")
    .doc("y = x * tanh(softplus(x))")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(mish(_2)))
    .backward([](GradCtx& g) {
      // dy/dx = t + x (1 - t^2) sigmoid(x), t = tanh(softplus(x)).
      Expr x = g.x(0);
      Expr t = tanh(softplus(x));
      g.add(0, g.dy * (t + x * (1.0 - t * t) * sigmoid(x)));
    })
    .onnx("Mish", 18)
    .exporter(floatExport("Mish", 22));

// y = x if x > alpha else 0
ONYX_OP(kThresholdedRelu, "thresholded_relu")
    .doc("y = x if x > alpha else 0")
    .inputs(1)
    .attr("alpha", 1.0)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, a.f("alpha")), _2, 0.0); }))
    .backward([](GradCtx& g) { g.add(0, maskGrad(gt(g.x(0), g.attrs.f("alpha")), g.dy, true)); })
    .onnx("ThresholdedRelu", 10)
    .exporter(floatExport("ThresholdedRelu", 22));

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
    }))
    .backward([](GradCtx& g) {
      // For x <= 0, dy/dx = e^(x/alpha) = y/alpha + 1.
      double alpha = g.attrs.f("alpha");
      g.add(0, where(gt(g.x(0), 0.0), g.dy, g.dy * (g.y() * (1.0 / alpha) + 1.0)));
    })
    .onnx("Celu", 12)
    .exporter(floatExport("Celu", 28, 28, 28));

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
      if(g.needs(1)) g.add(1, maskGrad(negative, g.dy * x, true));
    })
    // Opsets 1-6 are imported by kOnnxPReluLegacy below.
    .onnx("PRelu", 7)
    .exporter(floatExport("PRelu", 16));

namespace {
// Shrink of one element, computed in double as ONNX's reference does.
struct ShrinkOf {
  double lambd, bias;
  template <class O, class V>
  ONYX_HD V operator()(O, V v) const {
    double d = static_cast<double>(v);
    if(d < -lambd) return static_cast<V>(d + bias);
    if(d > lambd) return static_cast<V>(d - bias);
    return V(0);
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
      g.add(0, maskGrad(logical_or(lt(x, -lambd), gt(x, lambd)), g.dy, true));
    })
    .onnx("Shrink", 9)
    .exporter(floatExport("Shrink", 0));

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

// ---------------------------------------------------------------------- mod

// y = a mod b
ONYX_OP(kMod, "mod")
    .doc("y = a mod b (broadcasting); sign of b (Python), or of a with fmod=1 (C fmod)")
    .inputs(2)
    .attr("fmod", int64_t(0))
    .infer([](InferCtx& c) {
      infer::broadcast(c);
      c.check(c.type != Type::boolean, "inputs are bool but mod needs numbers");
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      ModOf f{c.attrs.i("fmod") != 0};
      dispatchNumeric(c.out.type(), "mod", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
      });
    }))
    .backward([](GradCtx& g) {
      // a = q b + y with q integer (constant almost everywhere): dy/da = 1,
      // dy/db = -q.
      if(g.needs(0)) g.add(0, g.dy);
      if(g.needs(1)) g.add(1, -(g.dy * round((g.x(0) - g.y()) / g.x(1))));
    })
    // ONNX's Mod needs fmod=1 for floats; Python's mod of floats is C's fmod
    // r plus b where r != 0 and r and b differ in sign, written as such
    // (r != 0 as r < 0 or r > 0: Equal takes floats only from opset 11).
    // Each step is exact or rounds once as the kernel does (r + b in the
    // compute type), so the import computes the same bits.
    .onnx("Mod", 10)
    .exporter([](OnnxExportCtx& c) {
      Type t = c.inputType(0);
      if(t == Type::bfloat16) c.requireOpset(13, "Mod on bfloat16");
      bool cMod = c.attrs().i("fmod") != 0;
      if(cMod || !isFloat(t)) {
        OnnxAttrs attrs;
        if(cMod) attrs.emplace_back("fmod", AttrValue(int64_t(1)));
        c.emit("Mod", c.inputs(), {c.output()}, attrs);
        return;
      }
      std::string a = c.input(0), b = c.input(1);
      auto node = [&](const char* op, const std::vector<std::string>& ins, const char* hint) {
        std::string y = c.fresh(hint);
        c.emit(op, ins, {y});
        return y;
      };
      std::string r = c.fresh("fmod");
      c.emit("Mod", {a, b}, {r}, {{"fmod", AttrValue(int64_t(1))}});
      std::string zero = c.scalarConst(0.0, t, "zero");
      std::string rNeg = node("Less", {r, zero}, "r_negative");
      std::string nonzero = node("Or", {rNeg, node("Greater", {r, zero}, "r_positive")}, "r_nonzero");
      std::string signs = node("Xor", {rNeg, node("Less", {b, zero}, "b_negative")}, "signs_differ");
      std::string fix = node("And", {nonzero, signs}, "needs_b");
      c.emit("Where", {fix, node("Add", {r, b}, "r_plus_b"), r}, {c.output()});
    });

Expr mod(Expr a, Expr b, bool fmod) { return a->graph()->make(kMod, {a, b}, {{"fmod", attr(fmod)}}); }

// ------------------------------------------------------------------ bitwise

// y = a << b or a >> b
ONYX_OP(kBitShift, "bit_shift")
    .doc("y = a << b (direction \"LEFT\") or a >> b (\"RIGHT\"); integers, broadcasting")
    .inputs(2)
    .attr("direction", std::string("LEFT"))
    .infer([](InferCtx& c) {
      const std::string& d = c.attrs.s("direction");
      c.check(d == "LEFT" || d == "RIGHT", "direction is '", d, "' but must be \"LEFT\" or \"RIGHT\"");
      inferIntegerBroadcast(c);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      ShiftOf f{c.attrs.s("direction") == "LEFT"};
      dispatchInteger(c.out.type(), "bit_shift", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
      });
    }))
    .notDifferentiable("integer inputs and output")
    .onnx("BitShift", 11)
    .exporter([](OnnxExportCtx& c) {
      Type t = c.inputType(0);
      bool isUnsigned = t == Type::uint8 || t == Type::uint16 || t == Type::uint32 || t == Type::uint64;
      // A Cast to the unsigned type would saturate negative values.
      if(!isUnsigned) c.requireOpset(28, str("BitShift on signed integers (", t, ")"));
      c.emitDefault("BitShift");
    });

// y = a & b, a | b, a ^ b
#define EW_BITWISE(VAR, NAME, ONNX, OPER, FUNCTOR)                                                         \
  ONYX_OP(VAR, NAME)                                                                                       \
      .doc("y = a " #OPER " b (bitwise; integers, broadcasting)")                                          \
      .inputs(2)                                                                                           \
      .infer(inferIntegerBroadcast)                                                                        \
      .kernel(ops::onDevices([](auto on, KernelCtx& c) {                                                   \
        dispatchInteger(c.out.type(), NAME, [&](auto tag) {                                                \
          using T = typename decltype(tag)::type;                                                          \
          decltype(on)::template run<T, T, T>(FUNCTOR(), c.out, *c.in[0], *c.in[1]);                       \
        });                                                                                                \
      }))                                                                                                  \
      .notDifferentiable("integer inputs and output")                                                      \
      .onnx(ONNX, 18)

EW_BITWISE(kBitwiseAnd, "bitwise_and", "BitwiseAnd", &, BitAnd);
EW_BITWISE(kBitwiseOr, "bitwise_or", "BitwiseOr", |, BitOr);
EW_BITWISE(kBitwiseXor, "bitwise_xor", "BitwiseXor", ^, BitXor);
#undef EW_BITWISE

// y = ~x
ONYX_OP(kBitwiseNot, "bitwise_not")
    .doc("y = ~x (bitwise; integers)")
    .inputs(1)
    .infer([](InferCtx& c) {
      c.check(isInt(c.typeOf(0)), "input has element type ", c.typeOf(0), " but bitwise_not needs integers");
      infer::sameAsInput0(c);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      dispatchInteger(c.out.type(), "bitwise_not", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<T, T>(BitNot(), c.out, *c.in[0]);
      });
    }))
    .notDifferentiable("integer input and output")
    .onnx("BitwiseNot", 18);

Expr bit_shift(Expr a, Expr b, bool left) {
  return a->graph()->make(kBitShift, {a, b}, {{"direction", attr(left ? "LEFT" : "RIGHT")}});
}
Expr bitwise_and(Expr a, Expr b) { return a->graph()->make(kBitwiseAnd, {a, b}); }
Expr bitwise_or(Expr a, Expr b) { return a->graph()->make(kBitwiseOr, {a, b}); }
Expr bitwise_xor(Expr a, Expr b) { return a->graph()->make(kBitwiseXor, {a, b}); }
Expr bitwise_not(Expr a) { return a->graph()->make(kBitwiseNot, {a}); }

}  // namespace onyx
