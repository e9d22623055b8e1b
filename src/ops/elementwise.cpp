// Element-wise ops: arithmetic, math functions, activations, comparisons,
// logic, where, clip, cast. One entry per op; the expression operator that
// builds it sits right below the entry.
#include <onyx/ops/elementwise.h>

#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;
using ops::scalarLike;

// ---------------------------------------------------------------- arithmetic

// y = a + b
ONYX_OP(kAdd, "add")
    .doc("y = a + b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .cpu(ops::binaryNumeric(_2 + _3))
    .backward([](GradCtx& g) {
      g.add(0, g.dy);
      g.add(1, g.dy);
    })
    .onnx("Add", 7);

// y = a - b
ONYX_OP(kSub, "sub")
    .doc("y = a - b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .cpu(ops::binaryNumeric(_2 - _3))
    .backward([](GradCtx& g) {
      g.add(0, g.dy);
      if(g.needs(1)) g.add(1, -g.dy);
    })
    .onnx("Sub", 7);

// y = a * b
ONYX_OP(kMul, "mul")
    .doc("y = a * b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .cpu(ops::binaryNumeric(_2 * _3))
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.dy * g.x(1));
      if(g.needs(1)) g.add(1, g.dy * g.x(0));
    })
    .onnx("Mul", 7);

// y = a / b
ONYX_OP(kDiv, "div")
    .doc("y = a / b (broadcasting; integer division truncates)")
    .inputs(2)
    .infer(infer::broadcast)
    .cpu(ops::binaryNumeric(_2 / _3))
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.dy / g.x(1));
      if(g.needs(1)) g.add(1, -(g.dy * g.y()) / g.x(1));
    })
    .onnx("Div", 7);

// y = -x
ONYX_OP(kNeg, "neg")
    .doc("y = -x")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .cpu(ops::unaryNumeric(-_2))
    .backward([](GradCtx& g) { g.add(0, -g.dy); })
    .onnx("Neg", 6);

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

// ------------------------------------------------------------ math functions

// y = |x|
ONYX_OP(kAbs, "abs")
    .doc("y = |x|")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .cpu(ops::unaryNumeric(abs(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * sign(g.x(0))); })
    .onnx("Abs", 6);

// y = sign(x) in {-1, 0, 1}
ONYX_OP(kSign, "sign")
    .doc("y = sign(x) in {-1, 0, 1}")
    .inputs(1)
    .infer(infer::sameAsInput0)
    .cpu(ops::unaryNumeric(sign(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * 0.0); })
    .onnx("Sign", 9);

// y = sin(x)
ONYX_OP(kSin, "sin")
    .doc("y = sin(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .cpu(ops::unaryFloat(sin(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * cos(g.x(0))); })
    .onnx("Sin", 7);

// y = cos(x)
ONYX_OP(kCos, "cos")
    .doc("y = cos(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .cpu(ops::unaryFloat(cos(_2)))
    .backward([](GradCtx& g) { g.add(0, -(g.dy * sin(g.x(0)))); })
    .onnx("Cos", 7);

Expr abs(Expr x) { return x->graph()->make(kAbs, {x}); }
Expr sign(Expr x) { return x->graph()->make(kSign, {x}); }
Expr sin(Expr x) { return x->graph()->make(kSin, {x}); }
Expr cos(Expr x) { return x->graph()->make(kCos, {x}); }

// ---------------------------------------------------------------------- cast

// y = x converted to `to` (an onyx::Type, ONNX numbering)
ONYX_OP(kCast, "cast")
    .doc("y = x converted to element type `to` (ONNX numbering)")
    .inputs(1)
    .attr("to", int64_t(Type::float32))
    .infer([](InferCtx& c) {
      Type to = static_cast<Type>(c.attrs.i("to"));
      c.check(isComputeType(to), "cannot cast to ", to);
      c.check(isComputeType(c.typeOf(0)), "cannot cast from ", c.typeOf(0));
      c.shape = c.shapeOf(0);
      c.type = to;
    })
    .cpu([](KernelCtx& c) {
      dispatchAll(c.in[0]->type(), "cast", [&](auto inTag) {
        using I = typename decltype(inTag)::type;
        dispatchAll(c.out.type(), "cast", [&](auto outTag) {
          using O = typename decltype(outTag)::type;
          const I* in = c.in[0]->data<I>();
          O* out = c.out.data<O>();
          host::parallelFor(c.out.size(), c.out.size(), [&](int64_t b, int64_t e) {
            for(int64_t i = b; i < e; ++i) {
              if constexpr(std::is_integral<O>::value && !std::is_same<O, bool>::value)
                out[i] = castFromDouble<O>(static_cast<double>(host::load(in, i)));
              else
                host::store(out, i, host::load(in, i));
            }
          });
        });
      });
    })
    .backward([](GradCtx& g) {
      // Gradients flow back only between float types; GradCtx::add casts back.
      if(isFloat(g.y()->value_type()) && isFloat(g.x(0)->value_type())) g.add(0, g.dy);
    })
    .onnx("Cast", 6);

Expr cast(Expr x, Type to) {
  if(x->value_type() == to) return x;
  return x->graph()->make(kCast, {x}, {{"to", int64_t(to)}});
}

}  // namespace onyx
