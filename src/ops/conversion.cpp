// Conversion: cast between element types (the storage-only float8/float4/
// int4/int2 types and, at ONNX import, strings included) and bitcast, which
// reads x's bytes as another type of the same width; the expression API is
// in elementwise.h.
#include <onyx/ops/elementwise.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

namespace {

// Types a cast reads and writes: the compute types and the storage-only
// small floats and packed integers (not string, complex).
bool castable(Type t) { return isComputeType(t) || isSmallFloat(t) || isPacked(t); }

// The opset from which ONNX's Cast takes element type t (0: never).
int castTypeSince(Type t) {
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

// ------------------------------------------------------------- strings
// String tensors never need gradients: Cast to/from string (and Equal on
// strings, logic.cpp) are computed at import and become constants.

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
  c.check(castable(to), "cannot cast to ", to);
  if(Expr f = foldHalfMatmul(c, c.input(0), to)) {
    c.setOutput(0, f);
    return;
  }
  c.setOutput(0, cast(c.input(0), to, saturate, mode));
}

// ---------------------------------------------------------------------- cast

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

// ------------------------------------------------------------------- bitcast

// y = x's bytes read as type `to`
ONYX_OP(kBitCast, "bitcast")
    .doc("y = the bytes of x reinterpreted as element type `to` (same bit width, same shape; little endian)")
    .inputs(1)
    .attr("to", int64_t(Type::float32))
    .infer([](InferCtx& c) {
      Type from = c.typeOf(0), to = static_cast<Type>(c.attrs.i("to"));
      c.check(static_cast<int>(to) > 0 && static_cast<int>(to) < kNumTypes, "target type ", static_cast<int>(to),
              " is not an element type");
      c.check(from != Type::string && to != Type::string, "strings have no fixed bit pattern to reinterpret");
      c.check(typeBits(from) == typeBits(to), "cannot reinterpret ", from, " (", typeBits(from), " bits) as ", to,
              " (", typeBits(to), " bits): the widths must match");
      c.shape = c.shapeOf(0);
      c.type = to;
    })
    .anyDevice([](KernelCtx& c) {
      ONYX_ASSERT(c.out.bytes() == c.in[0]->bytes(), "bitcast of ", c.in[0]->bytes(), " bytes into ", c.out.bytes());
      ops::copyInput0(c);
    })
    .notDifferentiable("a reinterpretation of bits has no useful derivative")
    .onnx("BitCast", 26);

// y = bitcast(x, to)
Expr bitcast(Expr x, Type to) { return x->graph()->make(kBitCast, {x}, {{"to", int64_t(to)}}); }

}  // namespace onyx
