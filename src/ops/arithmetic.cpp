// Element-wise ops: arithmetic, math functions, activations, comparisons,
// logic, where, clip, cast. One entry per op; the expression operator that
// builds it sits right below the entry.
#include <onyx/ops/elementwise.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;
using ops::scalarLike;

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
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

// Numeric (not bool) input, output like it.
void inferNumericUnary(InferCtx& c) {
  c.check(c.typeOf(0) != Type::boolean, "input is bool but this op needs a number; cast it with cast(x, Type::float32)");
  infer::sameAsInput0(c);
}

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

namespace {

// Every input bool; the output is their broadcast, bool.
void inferLogic(InferCtx& c) {
  for(size_t i = 0; i < c.n(); ++i)
    c.check(c.typeOf(i) == Type::boolean, "input ", i, " has element type ", c.typeOf(i),
            " but logical ops need bool; compare first (e.g. ne(x, 0.0)) or cast(x, Type::boolean)");
  infer::broadcastToBool(c);
}

// dy where `mask` holds and 0 elsewhere (or the other way round); the result
// has the broadcast shape of mask and dy, which GradCtx::add sums down.
Expr maskGrad(Expr mask, Expr dy, bool whereTrue) {
  Expr zero = scalarLike(dy, 0.0);
  return whereTrue ? where(mask, dy, zero) : where(mask, zero, dy);
}

// ------------------------------------------------------------- strings
// String tensors never need gradients: Cast to/from string and Equal on
// strings are computed at import and become constants.

// v rounded to the precision of `t` (the round-trip check of formatFloat).
double roundTo(double v, Type t) {
  switch(t) {
    case Type::float64: return v;
    case Type::float16: return static_cast<float>(float16(static_cast<float>(v)));
    case Type::bfloat16: return static_cast<float>(bfloat16(static_cast<float>(v)));
    default: return static_cast<float>(v);
  }
}

// A float as numpy's str() writes it (what ONNX's reference Cast produces):
// the shortest digits that read back to the same value of type `t`,
// positional for 1e-4 <= |v| < 1e16 ("0.5", "100.0"; 1e6 for float32, 1e3
// for float16), else scientific ("1e-05", "1.5e+06").
std::string formatFloat(double v, Type t) {
  if(std::isnan(v)) return "nan";
  if(std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string sign = std::signbit(v) ? "-" : "";
  double a = std::fabs(v);
  if(a == 0) return sign + "0.0";
  char buf[64];
  for(int p = 0; p < 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p, a);
    if(roundTo(std::strtod(buf, nullptr), t) == roundTo(a, t)) break;
  }
  // buf is "d.ddde[+-]XX": digits and the decimal exponent.
  std::string m(buf, std::strchr(buf, 'e'));
  int e = std::atoi(std::strchr(buf, 'e') + 1);
  std::string digits;
  for(char ch : m)
    if(ch != '.') digits += ch;
  while(digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int n = static_cast<int>(digits.size());
  double upper = t == Type::float64 ? 1e16 : t == Type::float16 ? 1e3 : 1e6;
  if(a >= 1e-4 && a < upper) {
    if(e >= n - 1) return sign + digits + std::string(static_cast<size_t>(e - (n - 1)), '0') + ".0";
    if(e >= 0) return sign + digits.substr(0, static_cast<size_t>(e + 1)) + "." + digits.substr(static_cast<size_t>(e + 1));
    return sign + "0." + std::string(static_cast<size_t>(-e - 1), '0') + digits;
  }
  std::string r = sign + digits.substr(0, 1);
  if(n > 1) r += "." + digits.substr(1);
  std::snprintf(buf, sizeof buf, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
  return r + buf;
}

// Element i of x (any numeric type) as text.
std::string formatElement(const TensorBase& x, size_t i) {
  Type t = x.type();
  const void* d = x.raw();
  switch(t) {
    case Type::boolean: return static_cast<const bool*>(d)[i] ? "True" : "False";
    case Type::int64: return std::to_string(static_cast<const int64_t*>(d)[i]);
    case Type::uint64: return std::to_string(static_cast<const uint64_t*>(d)[i]);
    default: break;
  }
  double v = loadAsDouble(d, t, i);
  if(isInt(t) || t == Type::int4 || t == Type::uint4 || t == Type::int2 || t == Type::uint2)
    return std::to_string(static_cast<int64_t>(v));
  return formatFloat(v, t);
}

// x cast to or from string, computed now.
Tensor castStrings(const Tensor& x, Type to, bool saturate, E8M0Round mode) {
  Tensor y = TensorBase::create(x->shape(), to);
  size_t n = static_cast<size_t>(x->shape().elements());
  if(to == Type::string) {
    if(x->type() == Type::string) y->strings() = x->strings();
    else
      for(size_t i = 0; i < n; ++i) y->strings()[i] = formatElement(*x, i);
    return y;
  }
  if(y->bytes()) std::memset(y->raw(), 0, y->bytes());
  for(size_t i = 0; i < n; ++i) {
    const std::string& s = x->strings()[i];
    if(to == Type::int64 || to == Type::uint64) {
      char* end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if(end && *end == 0 && !s.empty()) {
        if(to == Type::int64) static_cast<int64_t*>(y->raw())[i] = v;
        else static_cast<uint64_t*>(y->raw())[i] = static_cast<uint64_t>(v);
        continue;
      }
    }
    // strtod reads "NaN", "INF", "+INF", "-inf", "1e-3".
    storeFromDouble(y->raw(), to, i, std::strtod(s.c_str(), nullptr), saturate, mode);
  }
  return y;
}

// Cast(matmul(Cast(a), Cast(b)), t) with a and b of float16/bfloat16 type t
// cast to float32: matmul(a, b) in t, which accumulates and applies alpha
// in float32 just so. It is how a float16 matmul whose alpha float16 cannot
// hold exports (see linalg.cpp), and imports back as it was.
Expr foldHalfMatmul(OnnxImportCtx& c, Expr x, Type to) {
  if(to != Type::float16 && to != Type::bfloat16) return nullptr;
  if(x->kind() != NodeKind::Op || x->op()->name != "matmul" || x->value_type() != Type::float32) return nullptr;
  // Only values the export named inside this Cast's output.
  std::string inside = c.nodeName() + "/";
  if(x->name().rfind(inside, 0) != 0) return nullptr;
  Expr in[2];
  for(size_t i = 0; i < 2; ++i) {
    Expr k = x->child(i);
    if(k->kind() != NodeKind::Op || k->op()->name != "cast" || k->child(0)->value_type() != to ||
       k->name().rfind(inside, 0) != 0)
      return nullptr;
    in[i] = k->child(0);
  }
  Attrs a = x->attrs();
  return c.make("matmul", {in[0], in[1]},
                {{"transA", a.i("transA")}, {"transB", a.i("transB")}, {"alpha", a.f("alpha")}});
}

}  // namespace

// Cast / CastLike to `to`: saturate (19+) and round_mode (24+) steer the
// float8 targets.
void importCast(OnnxImportCtx& c, Type to) {
  bool saturate = c.attrInt("saturate", 1) != 0;
  E8M0Round mode = e8m0RoundFromName(c.attrString("round_mode", "up"));
  if(to == Type::string || c.input(0)->value_type() == Type::string) {
    c.setOutput(0, c.constant(castStrings(c.value(0), to, saturate, mode)));
    return;
  }
  c.check(isComputeType(to) || isSmallFloat(to) || isPacked(to), "cannot cast to ", to);
  if(Expr f = foldHalfMatmul(c, c.input(0), to)) {
    c.setOutput(0, f);
    return;
  }
  c.setOutput(0, cast(c.input(0), to, saturate, mode));
}

namespace {

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

// ---- ONNX export

using OnnxExportFn = std::function<void(OnnxExportCtx&)>;

// The element type that decides an element-wise node's ONNX types: its first
// input that is not bool (where's condition is), else bool.
Type decidingType(OnnxExportCtx& c) {
  for(size_t i = 0; i < c.numInputs(); ++i)
    if(c.inputType(i) != Type::boolean) return c.inputType(i);
  return Type::boolean;
}

// How the integer types that an ONNX op takes only from a later opset are
// bridged below it: not at all (the export fails naming the opset), through
// float64 (8- to 32-bit integers, for selections and comparisons, which
// float64 holds exactly), or through int64 with the result wrapped back into
// the 8/16-bit type by Mod (arithmetic, which wraps in Onyx; needs Mod,
// opset 10).
enum class IntBridge { none, viaFloat64, wrap };

// From which opset an ONNX op takes each kind of element type (0: never).
struct OnnxTypeRule {
  int bf16 = 1, f16 = 1, f64 = 1;
  int wideInts = 1;    // int32, int64, uint32, uint64
  int narrowInts = 1;  // int8, int16, uint8, uint16
  IntBridge bridge = IntBridge::none;
  int broadcast = 0;   // numpy broadcasting of the inputs
};

OnnxTypeRule floats(int bf16) {
  OnnxTypeRule r;
  r.bf16 = bf16;
  return r;
}
OnnxTypeRule ints(int bf16, int wide, int narrow, IntBridge bridge, int broadcast = 0) {
  OnnxTypeRule r;
  r.bf16 = bf16;
  r.wideInts = wide;
  r.narrowInts = narrow;
  r.bridge = bridge;
  r.broadcast = broadcast;
  return r;
}

bool isNarrowInt(Type t) { return t == Type::int8 || t == Type::uint8 || t == Type::int16 || t == Type::uint16; }
bool isSigned(Type t) { return t == Type::int8 || t == Type::int16 || t == Type::int32 || t == Type::int64; }

std::string emitCastTo(OnnxExportCtx& c, const std::string& v, Type to, const std::string& hint) {
  std::string y = c.fresh(hint);
  c.emit("Cast", {v}, {y}, {{"to", int64_t(to)}});
  return y;
}

// int64 value v wrapped into 8/16-bit type t as C++'s conversion does (two's
// complement): Python's mod by 2^bits, shifted for signed types, and cast.
void emitWrap(OnnxExportCtx& c, const std::string& v, Type t, const std::string& out) {
  int64_t m = int64_t(1) << typeBits(t), h = m / 2;
  std::string half = isSigned(t) ? c.scalarConst(double(h), Type::int64, "half_range") : "";
  std::string x = v;
  if(isSigned(t)) {
    x = c.fresh("shifted");
    c.emit("Add", {v, half}, {x});
  }
  std::string r = c.fresh("wrapped");
  c.emit("Mod", {x, c.scalarConst(double(m), Type::int64, "range")}, {r});
  if(isSigned(t)) {
    std::string u = c.fresh("unshifted");
    c.emit("Sub", {r, half}, {u});
    r = u;
  }
  c.emit("Cast", {r}, {out}, {{"to", int64_t(t)}});
}

// The default export as `opType`, except where ONNX's op takes the node's
// element type only from a later opset (rule): float16 and bfloat16 then go
// through float32 (the CPU kernels compute them in float32 and round once at
// the end, so the Cast-op-Cast form gives the same bits), integers as
// rule.bridge says; float64 and 64-bit integers have no such form.
OnnxExportFn typedExport(const char* opType, OnnxTypeRule rule) {
  std::string op = opType;
  return [op, rule](OnnxExportCtx& c) {
    for(size_t i = 1; i < c.numInputs() && c.opset() < rule.broadcast; ++i)
      if(c.inputShape(i) != c.inputShape(0))
        c.requireOpset(rule.broadcast, str(op, " broadcasting ", c.inputShape(0), " with ", c.inputShape(i)));
    Type t = decidingType(c);
    int since = t == Type::bfloat16 ? rule.bf16 : t == Type::float16 ? rule.f16 : t == Type::float64 ? rule.f64
                : isNarrowInt(t) ? rule.narrowInts : isInt(t) ? rule.wideInts : 1;
    if(since > 0 && c.opset() >= since) {
      c.emitDefault(op);
      return;
    }
    std::string when = since > 0 ? str("from opset ", since) : std::string("at no opset");
    Type wide = Type::undefined;  // the type computed in
    bool wrap = false;
    if(t == Type::float16 || t == Type::bfloat16) {
      wide = Type::float32;
    } else if(isInt(t) && rule.bridge == IntBridge::viaFloat64 && typeBits(t) <= 32) {
      wide = Type::float64;
    } else if(isNarrowInt(t) && rule.bridge == IntBridge::wrap && c.opset() >= 10) {
      wide = Type::int64;
      wrap = true;
    }
    if(wide == Type::undefined) {
      c.check(since > 0, op, " takes ", t, " ", when);
      c.requireOpset(since, str(op, " on ", t));
    }
    c.check(c.opset() >= 6, op, " on ", t, " needs a Cast, which this exporter writes from opset 6 on");
    std::vector<std::string> ins;
    for(size_t i = 0; i < c.numInputs(); ++i)
      ins.push_back(c.inputType(i) == t ? emitCastTo(c, c.input(i), wide, "in" + std::to_string(i) + "_" + typeName(wide))
                                        : c.input(i));
    if(c.node().value_type() != t) {  // a test or comparison: bool out
      c.emit(op, ins, {c.output()}, c.nodeAttrs());
      return;
    }
    std::string y = c.fresh(std::string("y_") + typeName(wide));
    c.emit(op, ins, {y}, c.nodeAttrs());
    if(wrap) emitWrap(c, y, t, c.output());
    else c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
  };
}

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

// ---------------------------------------------------------------- arithmetic

// y = a + b
ONYX_OP(kAdd, "add")
    .doc("y = a + b (broadcasting)")
    .inputs(2)
    .infer(infer::broadcast)
    .kernel(ops::binaryNumeric(_2 + _3))
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
    .kernel(ops::binaryNumeric(_2 - _3))
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
    .kernel(ops::binaryNumeric(_2 * _3))
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
    .kernel(ops::binaryNumeric(SafeDiv{}))
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
    .kernel(ops::binaryNumeric(pow(_2, _3)))
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
    .kernel(ops::binaryNumeric(minimum(_2, _3)))
    .backward([](GradCtx& g) {
      Expr first = le(g.x(0), g.x(1));
      if(g.needs(0)) g.add(0, maskGrad(first, g.dy, true));
      if(g.needs(1)) g.add(1, maskGrad(first, g.dy, false));
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
    .kernel(ops::binaryNumeric(maximum(_2, _3)))
    .backward([](GradCtx& g) {
      Expr first = ge(g.x(0), g.x(1));
      if(g.needs(0)) g.add(0, maskGrad(first, g.dy, true));
      if(g.needs(1)) g.add(1, maskGrad(first, g.dy, false));
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

// ------------------------------------------------------------ math functions

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

// y = sin(x)
ONYX_OP(kSin, "sin")
    .doc("y = sin(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sin(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * cos(g.x(0))); })
    .onnx("Sin", 7)
    .exporter(typedExport("Sin", floats(22)));

// y = cos(x)
ONYX_OP(kCos, "cos")
    .doc("y = cos(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(cos(_2)))
    .backward([](GradCtx& g) { g.add(0, -(g.dy * sin(g.x(0)))); })
    .onnx("Cos", 7)
    .exporter(typedExport("Cos", floats(22)));

Expr abs(Expr x) { return x->graph()->make(kAbs, {x}); }
Expr sign(Expr x) { return x->graph()->make(kSign, {x}); }
Expr sin(Expr x) { return x->graph()->make(kSin, {x}); }
Expr cos(Expr x) { return x->graph()->make(kCos, {x}); }

// y = tan(x)
ONYX_OP(kTan, "tan")
    .doc("y = tan(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(tan(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * (1.0 + g.y() * g.y())); })
    .onnx("Tan", 7)
    .exporter(typedExport("Tan", floats(22)));

// y = e^x
ONYX_OP(kExp, "exp")
    .doc("y = e^x")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(exp(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * g.y()); })
    .onnx("Exp", 6)
    .exporter(typedExport("Exp", floats(13)));

// y = ln(x)
ONYX_OP(kLog, "log")
    .doc("y = ln(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(log(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy / g.x(0)); })
    .onnx("Log", 6)
    .exporter(typedExport("Log", floats(13)));

// y = sqrt(x)
ONYX_OP(kSqrt, "sqrt")
    .doc("y = sqrt(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sqrt(_2)))
    .backward([](GradCtx& g) { g.add(0, (g.dy * 0.5) / g.y()); })
    .onnx("Sqrt", 6)
    .exporter(typedExport("Sqrt", floats(13)));

// y = 1 / x
ONYX_OP(kReciprocal, "reciprocal")
    .doc("y = 1 / x")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(reciprocal(_2)))
    .backward([](GradCtx& g) { g.add(0, -(g.dy * g.y() * g.y())); })
    .onnx("Reciprocal", 6)
    .exporter(typedExport("Reciprocal", floats(13)));

// y = erf(x) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt
ONYX_OP(kErf, "erf")
    .doc("y = erf(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(erf(_2)))
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
Expr reciprocal(Expr x) { return x->graph()->make(kReciprocal, {x}); }
Expr erf(Expr x) { return x->graph()->make(kErf, {x}); }

// --------------------------------------------------------------- activations

// y = tanh(x)
ONYX_OP(kTanh, "tanh")
    .doc("y = tanh(x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(tanh(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * (1.0 - g.y() * g.y())); })
    .onnx("Tanh", 6)
    .exporter(typedExport("Tanh", floats(13)));

// y = 1 / (1 + e^-x)
ONYX_OP(kSigmoid, "sigmoid")
    .doc("y = 1 / (1 + e^-x)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(sigmoid(_2)))
    .backward([](GradCtx& g) { g.add(0, g.dy * g.y() * (1.0 - g.y())); })
    .onnx("Sigmoid", 6)
    .exporter(typedExport("Sigmoid", floats(13)));

// y = max(x, 0)
ONYX_OP(kRelu, "relu")
    .doc("y = max(x, 0)")
    .inputs(1)
    .infer(inferNumericUnary)
    .kernel(ops::unaryNumeric(relu(_2)))
    .backward([](GradCtx& g) { g.add(0, maskGrad(gt(g.x(0), 0.0), g.dy, true)); })
    .onnx("Relu", 6)
    .exporter(typedExport("Relu", ints(13, 14, 14, IntBridge::viaFloat64)));

// y = x if x > 0 else alpha * x
ONYX_OP(kLeakyRelu, "leaky_relu")
    .doc("y = x if x > 0 else alpha * x")
    .inputs(1)
    .attr("alpha", 0.01)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, 0.0), _2, _2 * a.f("alpha")); }))
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
    .kernel(ops::unaryFloatWith([](const auto& a) { return if_then_else(gt(_2, 0.0), _2, a.f("alpha") * expm1(_2)); }))
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
    }))
    .backward([](GradCtx& g) {
      double alpha = g.attrs.f("alpha"), gamma = g.attrs.f("gamma");
      // For x <= 0, dy/dx = gamma alpha e^x = y + gamma alpha.
      g.add(0, where(gt(g.x(0), 0.0), g.dy * gamma, g.dy * (g.y() + gamma * alpha)));
    })
    .onnx("Selu", 6)
    .exporter(typedExport("Selu", floats(22)));

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
      if(c.attrs.s("approximate") == "tanh")
        runUnaryFloat(on, c, 0.5 * _2 * (1.0 + tanh(kSqrt2OverPi * (_2 + kGeluCubic * _2 * _2 * _2))));
      else
        runUnaryFloat(on, c, 0.5 * _2 * (1.0 + erf(_2 * kSqrtHalf)));
    }))
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      if(g.attrs.s("approximate") == "tanh") {
        Expr t = tanh((x + x * x * x * kGeluCubic) * kSqrt2OverPi);
        Expr du = (1.0 + x * x * (3 * kGeluCubic)) * kSqrt2OverPi;
        g.add(0, g.dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du));
      } else {
        Expr cdf = 0.5 * (1.0 + erf(x * kSqrtHalf));
        Expr pdf = exp(x * x * -0.5) * kInvSqrt2Pi;
        g.add(0, g.dy * (cdf + x * pdf));
      }
    })
    .onnx("Gelu", 20);

// y = x * sigmoid(x)
ONYX_OP(kSwish, "swish")
    .doc("y = x * sigmoid(x) (SiLU)")
    .inputs(1)
    .infer(ops::inferFloatUnary)
    .kernel(ops::unaryFloat(_2 * sigmoid(_2)))
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
    .kernel(ops::unaryFloat(softplus(_2)))
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
      g.add(0, maskGrad(logical_and(gt(x, g.attrs.f("min")), lt(x, g.attrs.f("max"))), g.dy, true));
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
Expr leaky_relu(Expr x, float alpha) { return x->graph()->make(kLeakyRelu, {x}, {{"alpha", attr(alpha)}}); }
Expr elu(Expr x, float alpha) { return x->graph()->make(kElu, {x}, {{"alpha", attr(alpha)}}); }
Expr selu(Expr x) { return x->graph()->make(kSelu, {x}); }
Expr gelu(Expr x, bool tanhApprox) {
  return x->graph()->make(kGelu, {x}, {{"approximate", attr(tanhApprox ? "tanh" : "none")}});
}
Expr swish(Expr x) { return x->graph()->make(kSwish, {x}); }
Expr softplus(Expr x) { return x->graph()->make(kSoftplus, {x}); }
Expr clip(Expr x, double lo, double hi) { return x->graph()->make(kClip, {x}, {{"min", lo}, {"max", hi}}); }

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
      if(g.needs(1)) g.add(1, maskGrad(g.x(0), g.dy, true));
      if(g.needs(2)) g.add(2, maskGrad(g.x(0), g.dy, false));
    })
    .onnx("Where", 9)
    .exporter(typedExport("Where", floats(16)));

Expr where(Expr cond, Expr a, Expr b) { return cond->graph()->make(kWhere, {cond, a, b}); }
Expr where(Expr cond, Expr a, double b) { return where(cond, a, scalarLike(a, b)); }
Expr where(Expr cond, double a, Expr b) { return where(cond, scalarLike(b, a), b); }

// ---------------------------------------------------------------------- cast

// Types a cast reads and writes: the compute types and the storage-only
// small floats and packed integers (not string, complex).
static bool castable(Type t) { return isComputeType(t) || isSmallFloat(t) || isPacked(t); }

// The opset from which ONNX's Cast takes element type t (0: never).
static int castTypeSince(Type t) {
  switch(t) {
    case Type::bfloat16: return 13;
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz: return 19;
    case Type::int4: case Type::uint4: return 21;
    case Type::float4e2m1: return 23;
    case Type::float8e8m0: return 24;
    case Type::int2: case Type::uint2: return 25;
    case Type::string: return 9;
    case Type::complex64: case Type::complex128: case Type::undefined: return 0;
    default: return 6;
  }
}

// y = x converted to `to` (an onyx::Type, ONNX numbering)
ONYX_OP(kCast, "cast")
    .doc("y = x converted to element type `to` (ONNX numbering); into float8 types out-of-range values "
         "saturate to the largest finite value when `saturate` is 1 (else NaN/inf); into float8e8m0 "
         "`round_mode` rounds the exponent (0 up, 1 down, 2 nearest); int4/int2 targets wrap")
    .inputs(1)
    .attr("to", int64_t(Type::float32))
    .attr("saturate", int64_t(1))
    .attr("round_mode", int64_t(E8M0Round::up))
    .infer([](InferCtx& c) {
      Type to = static_cast<Type>(c.attrs.i("to"));
      c.check(castable(to), "cannot cast to ", to);
      c.check(castable(c.typeOf(0)), "cannot cast from ", c.typeOf(0));
      int64_t mode = c.attrs.i("round_mode");
      c.check(mode >= 0 && mode <= 2, "round_mode must be 0 (up), 1 (down) or 2 (nearest), got ", mode);
      c.shape = c.shapeOf(0);
      c.type = to;
    })
    .cpu([](KernelCtx& c) {
      Type ti = c.in[0]->type(), to = c.out.type();
      if(!isComputeType(ti) || !isComputeType(to)) {
        // Storage-only types go element by element through double (exact for
        // every source but 64-bit integers beyond 2^53); packed outputs share
        // bytes, so this loop stays serial.
        bool saturate = c.attrs.i("saturate") != 0;
        auto mode = static_cast<E8M0Round>(c.attrs.i("round_mode"));
        const void* in = c.in[0]->raw();
        void* out = c.out.raw();
        if(c.out.bytes()) std::memset(out, 0, c.out.bytes());
        for(size_t i = 0, n = static_cast<size_t>(c.out.size()); i < n; ++i)
          storeFromDouble(out, to, i, loadAsDouble(in, ti, i), saturate, mode);
        return;
      }
      dispatchAll(ti, "cast", [&](auto inTag) {
        using I = typename decltype(inTag)::type;
        dispatchAll(to, "cast", [&](auto outTag) {
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
    .onnx("Cast", 6)
    .importer([](OnnxImportCtx& c) { importCast(c, static_cast<Type>(c.attrInt("to"))); })
    // saturate (opset 19) only matters for the float8 targets and round_mode
    // (24, a string) only for float8e8m0: each is written only when it is
    // not the default and the target type reads it, which also keeps it out
    // of opsets that lack it (those lack the types too).
    .exporter([](OnnxExportCtx& c) {
      Type from = c.inputType(0), to = static_cast<Type>(c.attrs().i("to"));
      for(Type t : {from, to}) {
        int need = castTypeSince(t);
        c.check(need > 0, "ONNX Cast has no element type ", t);
        c.requireOpset(need, str("element type ", t));
      }
      OnnxAttrs attrs{{"to", int64_t(to)}};
      if(c.attrs().i("saturate") == 0 && isSmallFloat(to) && to != Type::float4e2m1)
        attrs.emplace_back("saturate", int64_t(0));
      auto mode = static_cast<E8M0Round>(c.attrs().i("round_mode"));
      if(to == Type::float8e8m0 && mode != E8M0Round::up)
        attrs.emplace_back("round_mode", std::string(mode == E8M0Round::down ? "down" : "nearest"));
      c.emit("Cast", {c.input(0)}, {c.output()}, attrs);
    });

Expr cast(Expr x, Type to) {
  if(x->value_type() == to) return x;
  return x->graph()->make(kCast, {x}, {{"to", int64_t(to)}});
}

Expr cast(Expr x, Type to, bool saturate, E8M0Round roundMode) {
  if(x->value_type() == to) return x;
  return x->graph()->make(kCast, {x},
                          {{"to", int64_t(to)}, {"saturate", int64_t(saturate)}, {"round_mode", int64_t(roundMode)}});
}

}  // namespace onyx
