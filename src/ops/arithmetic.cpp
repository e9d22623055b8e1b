// Arithmetic: + - * / and negation, pow, minimum and maximum, mod, abs,
// sign, reciprocal and rounding (floor, ceil, round), with the expression
// operators (a + b, a * 2.0, ...) declared in elementwise.h. One entry per
// op; the expression operators follow each group.
#include <onyx/ops/elementwise.h>

#include <cmath>
#include <string>
#include <type_traits>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise_onnx.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;
using ops::floats;
using ops::IntBridge;
using ops::ints;
using ops::scalarLike;
using ops::typedExport;

namespace {

void inferNumericBroadcast(InferCtx& c) {
  infer::broadcast(c);
  c.check(c.type != Type::boolean, "inputs are bool but this op needs numbers; cast them with cast(x, Type::float32)");
}

// a / b; integer division truncates toward zero, and gives 0 where b is 0
// (and wraps for the lowest value / -1) instead of trapping.
struct SafeDiv {
  template <class T>
  ONYX_HD T operator()(T, T u, T w) const {
    if constexpr(std::is_integral<T>::value) {
      if(w == T(0)) return T(0);
      if constexpr(std::is_signed<T>::value) {
        using U = std::make_unsigned_t<T>;
        if(w == T(-1)) return static_cast<T>(U(0) - static_cast<U>(u));
      }
      return static_cast<T>(u / w);
    } else {
      return static_cast<T>(u / w);
    }
  }
};

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

// The functor of mod's kernels (CPU and GPU).
struct ModOf {
  bool cMod;
  template <class O, class T> ONYX_HD T operator()(O, T a, T b) const { return modOf(a, b, cMod); }
};

// ---- folds at ONNX import: matmul's alpha and affine's bias are exported
// as Mul and Add after MatMul (ONNX's MatMul has neither); importing them back
// into the one node gives the same bits as before the export (a separate
// Mul or Add would round once more, e.g. in float16, or sum in another order).

// `m` when it is a float matmul node named inside the importing node's
// output ("<y>/matmul" under "y", as the export writes them), else null.
Node* floatMatmul(OnnxImportCtx& c, Expr m) {
  if(m->kind() != NodeKind::Op || m->op()->name != "matmul" || !isFloat(m->value_type())) return nullptr;
  if(m->name().rfind(c.nodeName() + "/", 0) != 0) return nullptr;
  return m.get();
}

// Whether `other` broadcasts to `m`'s shape without growing it.
bool broadcastsInto(Expr other, Expr m) {
  if(other->value_type() != m->value_type() || !Shape::broadcastable(other->shape(), m->shape())) return false;
  return Shape::broadcast({m->shape(), other->shape()}) == m->shape();
}

// Mul(matmul(a, b), s) with alpha 1 and s a one-element constant:
// matmul(a, b) with alpha s. `i` is s's input index.
Expr foldScale(OnnxImportCtx& c, Expr m, Expr s, size_t i) {
  Node* n = floatMatmul(c, m);
  if(!n || s->kind() != NodeKind::Constant || s->shape().elements() != 1 || !broadcastsInto(s, m)) return nullptr;
  if(n->attrs().f("alpha") != 1) return nullptr;
  return c.make("matmul", {n->child(0), n->child(1)},
                {{"transA", n->attrs().i("transA")}, {"transB", n->attrs().i("transB")}, {"alpha", c.scalar(i)}});
}

// Add(matmul(x, W), b) with a 2-D W and b broadcasting into the product:
// affine(x, W, b).
Expr foldBias(OnnxImportCtx& c, Expr m, Expr b) {
  Node* n = floatMatmul(c, m);
  if(!n || n->child(1)->shape().rank() != 2 || !broadcastsInto(b, m)) return nullptr;
  return c.make("affine", {n->child(0), n->child(1), b},
                {{"transA", n->attrs().i("transA")}, {"transB", n->attrs().i("transB")}, {"alpha", n->attrs().f("alpha")}});
}

}  // namespace

// Folds the ONNX node's inputs (1..n, broadcasting) with a binary op: the
// import of the variadic Sum/Max/Min.
Expr foldInputs(OnnxImportCtx& c, Expr (*f)(Expr, Expr)) {
  size_t n = c.numInputs();
  c.check(n >= 1, "needs at least one input");
  Expr y = c.input(0);
  for(size_t i = 1; i < n; ++i) y = f(y, c.input(i));
  return y;
}

// ------------------------------------------------------ + - * / and negation

// y = a + b
ONYX_OP(kAdd, "add")
    .doc("y = a + b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .kernel(ops::binaryNumeric(_2 + _3, host::vec::Bin::add))
    .backward([](GradCtx& g) {
      g.add(0, g.dy);
      g.add(1, g.dy);
    })
    .onnx("Add", 7)
    .importer([](OnnxImportCtx& c) {
      Expr a = c.input(0), b = c.input(1);
      Expr f = foldBias(c, a, b);
      if(!f) f = foldBias(c, b, a);
      c.setOutput(0, f ? f : plus(a, b));
    })
    .exporter(typedExport("Add", ints(13, 7, 14, IntBridge::wrap)));

// y = a - b
ONYX_OP(kSub, "sub")
    .doc("y = a - b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .kernel(ops::binaryNumeric(_2 - _3, host::vec::Bin::sub))
    .backward([](GradCtx& g) {
      g.add(0, g.dy);
      if(g.needs(1)) g.add(1, -g.dy);
    })
    .onnx("Sub", 7)
    .exporter(typedExport("Sub", ints(13, 7, 14, IntBridge::wrap)));

// y = a * b
ONYX_OP(kMul, "mul")
    .doc("y = a * b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .kernel(ops::binaryNumeric(_2 * _3, host::vec::Bin::mul))
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.dy * g.x(1));
      if(g.needs(1)) g.add(1, g.dy * g.x(0));
    })
    .onnx("Mul", 7)
    .importer([](OnnxImportCtx& c) {
      Expr a = c.input(0), b = c.input(1);
      Expr f = foldScale(c, a, b, 1);
      if(!f) f = foldScale(c, b, a, 0);
      c.setOutput(0, f ? f : mul(a, b));
    })
    .exporter(typedExport("Mul", ints(13, 7, 14, IntBridge::wrap)));

// y = a / b
ONYX_OP(kDiv, "div")
    .doc("y = a / b (broadcasting; integer division truncates)")
    .inputs(2)
    .infer(infer::broadcast)
    .kernel(ops::binaryNumeric(SafeDiv{}, host::vec::Bin::div))
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.dy / g.x(1));
      if(g.needs(1)) g.add(1, -(g.dy * g.y()) / g.x(1));
    })
    .onnx("Div", 7)
    .exporter(typedExport("Div", ints(13, 7, 14, IntBridge::wrap)));

// y = -x
ONYX_OP(kNeg, "neg")
    .doc("y = -x")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .kernel(ops::unaryNumeric(-_2))
    .backward([](GradCtx& g) { g.add(0, -g.dy); })
    .onnx("Neg", 6)
    .exporter(typedExport("Neg", floats(13)));

Expr plus(Expr a, Expr b) { return a->graph()->make(kAdd, {a, b}); }
Expr minus(Expr a, Expr b) { return a->graph()->make(kSub, {a, b}); }
Expr mul(Expr a, Expr b) { return a->graph()->make(kMul, {a, b}); }
Expr div(Expr a, Expr b) { return a->graph()->make(kDiv, {a, b}); }
Expr neg(Expr a) { return a->graph()->make(kNeg, {a}); }
Expr operator+(Expr a, Expr b) { return plus(a, b); }
Expr operator-(Expr a, Expr b) { return minus(a, b); }
Expr operator*(Expr a, Expr b) { return mul(a, b); }
Expr operator/(Expr a, Expr b) { return div(a, b); }
Expr operator-(Expr a) { return neg(a); }
Expr operator+(Expr a, double b) { return plus(a, scalarLike(a, b)); }
Expr operator+(double a, Expr b) { return plus(scalarLike(b, a), b); }
Expr operator-(Expr a, double b) { return minus(a, scalarLike(a, b)); }
Expr operator-(double a, Expr b) { return minus(scalarLike(b, a), b); }
Expr operator*(Expr a, double b) { return mul(a, scalarLike(a, b)); }
Expr operator*(double a, Expr b) { return mul(scalarLike(b, a), b); }
Expr operator/(Expr a, double b) { return div(a, scalarLike(a, b)); }
Expr operator/(double a, Expr b) { return div(scalarLike(b, a), b); }

// y = a^b
ONYX_OP(kPow, "pow")
    .doc("y = a^b (broadcasting)")
    .inputs(2)
    .infer(inferNumericBroadcast)
    .kernel(ops::binaryNumeric(pow(_2, _3), host::vec::Bin::pow))
    .backward([](GradCtx& g) {
      Expr a = g.x(0), b = g.x(1);
      if(g.needs(0)) g.add(0, g.dy * b * pow(a, b - 1.0));
      // d a^b / db = a^b log(a): defined for a > 0 only.
      if(g.needs(1)) g.add(1, g.dy * g.y() * log(a));
    })
    // Opset 12 lets the exponent's type differ from the base's; the result
    // has the base's type (numpy's power(a, b).astype(a.dtype)).
    .onnx("Pow", 7)
    .importer([](OnnxImportCtx& c) {
      Expr a = c.input(0), b = c.input(1);
      Type ta = a->value_type(), tb = b->value_type();
      if(ta == tb || isFloat(ta) || !isFloat(tb))
        c.setOutput(0, pow(a, cast(b, ta)));
      else  // integer base, float exponent: compute in the float type, truncate back
        c.setOutput(0, cast(pow(cast(a, tb), b), ta));
    })
    .exporter(typedExport("Pow", ints(15, 12, 0, IntBridge::none)));

// y = min(a, b)
ONYX_OP(kMinimum, "minimum")
    .doc("y = min(a, b) (broadcasting; at ties the gradient goes to a)")
    .inputs(2)
    .infer(inferNumericBroadcast)
    .kernel(ops::binaryNumeric(minimum(_2, _3), host::vec::Bin::min))
    .backward([](GradCtx& g) {
      Expr first = le(g.x(0), g.x(1));
      if(g.needs(0)) g.add(0, where(first, g.dy, 0.0));
      if(g.needs(1)) g.add(1, where(first, 0.0, g.dy));
    })
    // ONNX's Min/Max take 1..n inputs (opset 6: same shapes, 8: broadcasting).
    .onnx("Min", 6)
    .importer([](OnnxImportCtx& c) { c.setOutput(0, foldInputs(c, minimum)); })
    .exporter(typedExport("Min", ints(13, 12, 12, IntBridge::viaFloat64, 8)));

// y = max(a, b)
ONYX_OP(kMaximum, "maximum")
    .doc("y = max(a, b) (broadcasting; at ties the gradient goes to a)")
    .inputs(2)
    .infer(inferNumericBroadcast)
    .kernel(ops::binaryNumeric(maximum(_2, _3), host::vec::Bin::max))
    .backward([](GradCtx& g) {
      Expr first = ge(g.x(0), g.x(1));
      if(g.needs(0)) g.add(0, where(first, g.dy, 0.0));
      if(g.needs(1)) g.add(1, where(first, 0.0, g.dy));
    })
    .onnx("Max", 6)
    .importer([](OnnxImportCtx& c) { c.setOutput(0, foldInputs(c, maximum)); })
    .exporter(typedExport("Max", ints(13, 12, 12, IntBridge::viaFloat64, 8)));

Expr pow(Expr x, Expr y) { return x->graph()->make(kPow, {x, y}); }
Expr pow(Expr x, double y) { return pow(x, scalarLike(x, y)); }
Expr pow(double x, Expr y) { return pow(scalarLike(y, x), y); }
Expr minimum(Expr a, Expr b) { return a->graph()->make(kMinimum, {a, b}); }
Expr minimum(Expr a, double b) { return minimum(a, scalarLike(a, b)); }
Expr minimum(double a, Expr b) { return minimum(scalarLike(b, a), b); }
Expr maximum(Expr a, Expr b) { return a->graph()->make(kMaximum, {a, b}); }
Expr maximum(Expr a, double b) { return maximum(a, scalarLike(a, b)); }
Expr maximum(double a, Expr b) { return maximum(scalarLike(b, a), b); }

// ----------------------------------------------------- abs, sign, reciprocal

// y = |x|
ONYX_OP(kAbs, "abs")
    .doc("y = |x|")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .kernel(ops::unaryNumeric(abs(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * sign(g.x(0))); })
    .onnx("Abs", 6)
    .exporter(typedExport("Abs", floats(13)));

// y = sign(x) in {-1, 0, 1}
ONYX_OP(kSign, "sign")
    .doc("y = sign(x) in {-1, 0, 1}")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .kernel(ops::unaryNumeric(sign(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Sign", 9)
    .exporter(typedExport("Sign", floats(13)));

// y = 1 / x
ONYX_OP(kReciprocal, "reciprocal")
    .doc("y = 1 / x")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(reciprocal(_2), host::vec::reciprocal))
    .backward([](GradCtx& g) { g.add(0, -(g.dy * g.y() * g.y())); })
    .onnx("Reciprocal", 6)
    .exporter(typedExport("Reciprocal", floats(13)));


Expr abs(Expr x) { return x->graph()->make(kAbs, {x}); }
Expr sign(Expr x) { return x->graph()->make(kSign, {x}); }
Expr reciprocal(Expr x) { return x->graph()->make(kReciprocal, {x}); }

// ----------------------------------------------------------------- rounding

// y = floor(x)
ONYX_OP(kFloor, "floor")
    .doc("y = floor(x) (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(floor(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Floor", 6)
    .exporter(typedExport("Floor", floats(13)));

// y = ceil(x)
ONYX_OP(kCeil, "ceil")
    .doc("y = ceil(x) (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(ceil(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Ceil", 6)
    .exporter(typedExport("Ceil", floats(13)));

// y = x rounded to the nearest integer, halves to even
ONYX_OP(kRound, "round")
    .doc("y = x rounded to the nearest integer, halfway cases to even (gradient 0)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(roundEven(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Round", 11)
    .exporter(typedExport("Round", floats(22)));

Expr floor(Expr x) { return x->graph()->make(kFloor, {x}); }
Expr ceil(Expr x) { return x->graph()->make(kCeil, {x}); }
Expr round(Expr x) { return x->graph()->make(kRound, {x}); }

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

}  // namespace onyx
