// Logic: comparisons (bool out), logic on bool tensors, where, the NaN/Inf
// tests, and shifts and bitwise ops on integers; the expression API is in
// elementwise.h. One entry per op; the expression operators follow each
// group.
#include <onyx/ops/elementwise.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

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

// Every input bool; the output is their broadcast, bool.
void inferLogic(InferCtx& c) {
  for(size_t i = 0; i < c.n(); ++i)
    c.check(c.typeOf(i) == Type::boolean, "input ", i, " has element type ", c.typeOf(i),
            " but logical ops need bool; compare first (e.g. ne(x, 0.0)) or cast(x, Type::boolean)");
  infer::broadcastToBool(c);
}

// a == b on string tensors (broadcasting), computed now.
Tensor equalStrings(const Tensor& a, const Tensor& b) {
  Shape shapes[2] = {a->shape(), b->shape()};
  Shape out = Shape::broadcast(shapes, 2);
  Tensor y = TensorBase::create(out, Type::boolean);
  const auto& dims = out.dims();
  size_t rank = dims.size();
  // Index of output element i in x (dims aligned right, size-1 dims repeat).
  auto index = [&](const Tensor& x, int64_t i) {
    const auto& xd = x->shape().dims();
    size_t off = rank - xd.size();
    int64_t idx = 0, stride = 1;
    for(size_t k = rank; k-- > 0;) {
      int64_t coord = i % dims[k];
      i /= dims[k];
      if(k >= off) {
        int64_t d = xd[k - off];
        idx += (d == 1 ? 0 : coord) * stride;
        stride *= d;
      }
    }
    return static_cast<size_t>(idx);
  };
  bool* yd = static_cast<bool*>(y->raw());
  for(int64_t i = 0; i < out.elements(); ++i) yd[i] = a->strings()[index(a, i)] == b->strings()[index(b, i)];
  return y;
}

// Integer types only (bitwise ops).
template <class Fn>
void dispatchInteger(Type t, const char* what, Fn&& fn) {
  dispatchNumeric(t, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(std::is_integral<T>::value) fn(tag);
    else unsupportedType(t, what, "integer types");
  });
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

// Functors of the shift, bitwise and NaN/Inf kernels below (CPU and GPU).
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

}  // namespace

// --------------------------------------------------------------- comparisons

namespace {
// Equal(a, b) into `out`. ONNX's Equal compares bool, int32 and int64 from
// opset 7, the other numbers from 11 and bfloat16 from 13 (before, the
// operands go through float32, which holds every bfloat16 exactly).
void emitEqual(OnnxExportCtx& c, const std::string& out) {
  Type t = c.inputType(0);
  int need = t == Type::boolean || t == Type::int32 || t == Type::int64 ? 7 : 11;
  c.requireOpset(need, str("Equal on ", t));
  std::vector<std::string> ins = c.inputs();
  if(t == Type::bfloat16 && c.opset() < 13)
    for(size_t i = 0; i < ins.size(); ++i) {
      std::string w = c.fresh("in" + std::to_string(i) + "_f32");
      c.emit("Cast", {ins[i]}, {w}, {{"to", int64_t(Type::float32)}});
      ins[i] = w;
    }
  c.emit("Equal", ins, {out});
}
}  // namespace

// y = a < b
ONYX_OP(kLt, "lt")
    .doc("y = a < b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(lt(_2, _3)))
    .notDifferentiable("boolean output")
    .onnx("Less", 7)
    .exporter(typedExport("Less", ints(13, 9, 9, IntBridge::viaFloat64)));

// y = a <= b
ONYX_OP(kLe, "le")
    .doc("y = a <= b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(le(_2, _3)))
    .notDifferentiable("boolean output")
    .onnx("LessOrEqual", 12)
    .exporter(typedExport("LessOrEqual", ints(16, 12, 12, IntBridge::viaFloat64)));

// y = a > b
ONYX_OP(kGt, "gt")
    .doc("y = a > b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(gt(_2, _3)))
    .notDifferentiable("boolean output")
    .onnx("Greater", 7)
    .exporter(typedExport("Greater", ints(13, 9, 9, IntBridge::viaFloat64)));

// y = a >= b
ONYX_OP(kGe, "ge")
    .doc("y = a >= b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(ge(_2, _3)))
    .notDifferentiable("boolean output")
    .onnx("GreaterOrEqual", 12)
    .exporter(typedExport("GreaterOrEqual", ints(16, 12, 12, IntBridge::viaFloat64)));

// y = a == b
ONYX_OP(kEq, "eq")
    .doc("y = a == b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(eq(_2, _3)))
    .notDifferentiable("boolean output")
    // Equal takes float inputs from opset 11 (ints and bool before), strings from 19.
    .onnx("Equal", 7)
    .importer([](OnnxImportCtx& c) {
      if(c.input(0)->value_type() == Type::string || c.input(1)->value_type() == Type::string) {
        c.check(c.input(0)->value_type() == c.input(1)->value_type(), "cannot compare a string with a number");
        c.setOutput(0, c.constant(equalStrings(c.value(0), c.value(1))));
        return;
      }
      c.setOutput(0, eq(c.input(0), c.input(1)));
    })
    .exporter([](OnnxExportCtx& c) { emitEqual(c, c.output()); });

// y = a != b
ONYX_OP(kNe, "ne")
    .doc("y = a != b (broadcasting, bool)")
    .inputs(2)
    .infer(infer::broadcastToBool)
    .kernel(ops::compare(ne(_2, _3)))
    .notDifferentiable("boolean output")
    .noOnnx("composite: Not(Equal(a, b))")
    .onnxExport(7, [](OnnxExportCtx& c) {
      std::string e = c.fresh("equal");
      emitEqual(c, e);
      c.emit("Not", {e}, {c.output()});
    });

Expr lt(Expr a, Expr b) { return a->graph()->make(kLt, {a, b}); }
Expr le(Expr a, Expr b) { return a->graph()->make(kLe, {a, b}); }
Expr gt(Expr a, Expr b) { return a->graph()->make(kGt, {a, b}); }
Expr ge(Expr a, Expr b) { return a->graph()->make(kGe, {a, b}); }
Expr eq(Expr a, Expr b) { return a->graph()->make(kEq, {a, b}); }
Expr ne(Expr a, Expr b) { return a->graph()->make(kNe, {a, b}); }
Expr lt(Expr a, double b) { return lt(a, scalarLike(a, b)); }
Expr le(Expr a, double b) { return le(a, scalarLike(a, b)); }
Expr gt(Expr a, double b) { return gt(a, scalarLike(a, b)); }
Expr ge(Expr a, double b) { return ge(a, scalarLike(a, b)); }
Expr eq(Expr a, double b) { return eq(a, scalarLike(a, b)); }
Expr ne(Expr a, double b) { return ne(a, scalarLike(a, b)); }

// --------------------------------------------------------------------- logic

// y = a and b
ONYX_OP(kLogicalAnd, "logical_and")
    .doc("y = a and b (bool, broadcasting)")
    .inputs(2)
    .infer(inferLogic)
    .kernel(ops::logicalBinary(logicalAnd(_2, _3)))
    .notDifferentiable("boolean inputs and output")
    .onnx("And", 7);

// y = a or b
ONYX_OP(kLogicalOr, "logical_or")
    .doc("y = a or b (bool, broadcasting)")
    .inputs(2)
    .infer(inferLogic)
    .kernel(ops::logicalBinary(logicalOr(_2, _3)))
    .notDifferentiable("boolean inputs and output")
    .onnx("Or", 7);

// y = a xor b
ONYX_OP(kLogicalXor, "logical_xor")
    .doc("y = a xor b (bool, broadcasting)")
    .inputs(2)
    .infer(inferLogic)
    .kernel(ops::logicalBinary(logicalXor(_2, _3)))
    .notDifferentiable("boolean inputs and output")
    .onnx("Xor", 7);

// y = not x
ONYX_OP(kLogicalNot, "logical_not")
    .doc("y = not x (bool)")
    .inputs(1)
    .infer(inferLogic)
    .kernel(ops::logicalUnary(logicalNot(_2)))
    .notDifferentiable("boolean input and output")
    .onnx("Not", 1);

Expr logical_and(Expr a, Expr b) { return a->graph()->make(kLogicalAnd, {a, b}); }
Expr logical_or(Expr a, Expr b) { return a->graph()->make(kLogicalOr, {a, b}); }
Expr logical_xor(Expr a, Expr b) { return a->graph()->make(kLogicalXor, {a, b}); }
Expr logical_not(Expr a) { return a->graph()->make(kLogicalNot, {a}); }

// ------------------------------------------------------------------- select

// y = cond ? a : b
ONYX_OP(kWhere, "where")
    .doc("y = cond ? a : b (cond bool; all three broadcast)")
    .inputs(3)
    .infer([](InferCtx& c) {
      c.check(c.typeOf(0) == Type::boolean, "cond (input 0) has element type ", c.typeOf(0),
              " but must be bool; build it with a comparison such as gt(x, 0.0)");
      c.check(c.typeOf(1) == c.typeOf(2), "a and b have different element types ", c.typeOf(1), " and ",
              c.typeOf(2), "; cast one of them with cast()");
      Shape shapes[3] = {c.shapeOf(0), c.shapeOf(1), c.shapeOf(2)};
      try {
        c.shape = Shape::broadcast(shapes, 3);
      } catch(const Error& e) {
        c.fail(e.what());
      }
      c.type = c.typeOf(1);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      dispatchAll(c.out.type(), "where", [&](auto tag) {
        using T = typename decltype(tag)::type;
        decltype(on)::template run<T, bool, T, T>(if_then_else(_2, _3, _4), c.out, *c.in[0], *c.in[1], *c.in[2]);
      });
    }))
    .backward([](GradCtx& g) {
      if(g.needs(1)) g.add(1, where(g.x(0), g.dy, 0.0));
      if(g.needs(2)) g.add(2, where(g.x(0), 0.0, g.dy));
    })
    .onnx("Where", 9)
    .exporter(typedExport("Where", floats(16)));

Expr where(Expr cond, Expr a, Expr b) { return cond->graph()->make(kWhere, {cond, a, b}); }
Expr where(Expr cond, Expr a, double b) { return where(cond, a, scalarLike(a, b)); }
Expr where(Expr cond, double a, Expr b) { return where(cond, scalarLike(b, a), b); }

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
    .exporter(typedExport("IsNaN", floats(13)));

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
    .exporter(typedExport("IsInf", floats(20, 20)));

Expr is_nan(Expr x) { return x->graph()->make(kIsNan, {x}); }
Expr is_inf(Expr x, bool detectNegative, bool detectPositive) {
  return x->graph()->make(kIsInf, {x},
                          {{"detect_negative", attr(detectNegative)}, {"detect_positive", attr(detectPositive)}});
}

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
