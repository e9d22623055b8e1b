// Linear quantization: quantize_linear (round, add the zero point, saturate)
// and dequantize_linear ((x - zero point) * scale); DynamicQuantizeLinear
// and QLinearMatMul import as composites of them and the arithmetic ops
// (converters/import_quantization.cpp).
//
// ONNX scale/zero-point layouts (per tensor, per axis, blocked) become
// tensors that broadcast against x at import (alignQuantParam), so the op
// itself only broadcasts. The ops take 8- to 64-bit integers; the storage
// types (int4/uint4, int2/uint2, float8, float4e2m1) import as composites of
// round, clip and cast (quantizeToStorage, importDequantizeLinear).
#include <onyx/ops/quant.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#ifndef ONYX_GPU_PLUGIN
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONYX_QUANT_FMA 1
#endif
#endif
#include <onyx/ops/linalg.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

bool isQuantType(Type t) {
  return t == Type::int8 || t == Type::uint8 || t == Type::int16 || t == Type::uint16 || t == Type::int32 ||
         t == Type::int64;
}

// y = saturate(round(x / s) + zp) in Q, for the CPU and (nvcc builds) the
// GPU: the quotient in x's compute type, as numpy divides float32 by
// float32; nearbyint rounds half to even in the default mode; NaN gives 0
// and out-of-range values saturate, as castFromDouble.
template <class Q>
struct QuantizeOf {
  double lo, hi;
  Q qlo, qhi;
  static QuantizeOf make() {
    return {static_cast<double>(std::numeric_limits<Q>::lowest()), static_cast<double>(std::numeric_limits<Q>::max()),
            std::numeric_limits<Q>::lowest(), std::numeric_limits<Q>::max()};
  }
  template <class O, class C>
  ONYX_HD Q operator()(O, C x, C s, Q zp) const {
    return saturate(::nearbyint(static_cast<double>(x / s)) + static_cast<double>(zp));
  }
  // v (an integer or NaN) in Q: NaN gives 0, out-of-range values the end.
  ONYX_HD Q saturate(double v) const {
    if(v != v) return Q(0);
    if(v <= lo) return qlo;
    if(v >= hi) return qhi;
    return static_cast<Q>(v);
  }
};

// y = (x - zp) * s in the scale's type T: the difference computed in T (exact
// for 8- and 16-bit integers), as the composite cast, sub, mul it replaces.
struct DequantizeOf {
  template <class O, class Q, class T>
  ONYX_HD T operator()(O, Q x, T s, Q zp) const {
    return (static_cast<T>(x) - static_cast<T>(zp)) * s;
  }
};

#ifndef ONYX_GPU_PLUGIN
// The CPU's loops for the common case, one scale and one zero point (per
// tensor), written so that they vectorize; they compute what the functors
// compute. Rounding half to even adds and subtracts 1.5 * 2^52 (exact
// nearest-integer for |v| < 2^51, which the clamp to the integer range
// ensures; libonyx builds without -ffast-math).
//
// float32 to 8 bits (the QDQ and dynamic models' quantizers) rounds in
// float32: x / s is a float32 quotient (as numpy divides), and rounding a
// float32 to an integer gives the same integer in float32 as in float64
// (1.5 * 2^23 is exact for |v| < 2^22, and the clamp to the 8-bit range
// bounds v far below that), with twice the lanes; an AVX2 build beside the
// baseline one (BERT-base's 48 dynamic quantizers: 13.3 -> 3.9 ms on one
// core).
template <class Q>
__attribute__((always_inline)) inline void quantize8Body(const float* __restrict x, Q* __restrict y, int64_t n,
                                                        float s, int32_t zp, float lo, float hi) {
  for(int64_t i = 0; i < n; ++i) {
    const float v = x[i] / s;
    const int32_t keep = -int32_t(v == v);  // NaN: 0 (as QuantizeOf)
    y[i] = Q((int32_t(ops::roundClamped(v, lo, hi)) + zp) & keep);
  }
}
template <class Q>
ONYX_TARGET_AVX2 void quantize8Avx2(const float* x, Q* y, int64_t n, float s, int32_t zp, float lo, float hi) {
  quantize8Body(x, y, n, s, zp, lo, hi);
}
template <class Q>
void quantize8Base(const float* x, Q* y, int64_t n, float s, int32_t zp, float lo, float hi) {
  quantize8Body(x, y, n, s, zp, lo, hi);
}

#ifdef ONYX_QUANT_FMA
// Keeps the compiler from fusing a product into a later sum or FMA (x = pa
// + pb must round pa and pb first, as dequantize_linear does; a quotient's
// first estimate is rounded before its correction).
__attribute__((target("avx2,fma"), always_inline)) inline void opaque(__m256& v) { __asm__("" : "+x"(v)); }

// x / s without the division, for r = 1 / s (correctly rounded): q0 = x * r,
// then one FMA correction, q0 + r * (x - q0 * s), which is the correctly
// rounded quotient (Markstein's theorem) unless an intermediate overflows or
// underflows. dividesByFma(s) says when none can for finite x of the kernels'
// range (|x| <= 2^9 * 2^61, a nonzero |x| >= 2^-24 * 2^-60).
inline bool dividesByFma(float s) { return s >= 0x1p-60f && s <= 0x1p60f; }  // then 1 / s is in that range too

__attribute__((target("avx2,fma"), always_inline)) inline __m256 divideByFma(__m256 x, __m256 s, __m256 r) {
  __m256 q0 = _mm256_mul_ps(x, r);
  opaque(q0);
  return _mm256_fmadd_ps(_mm256_fnmadd_ps(q0, s, x), r, q0);
}

// q (clamped to the type's range less the zero point) rounded half to even,
// plus the zero point, stored as 8 values of Q at y; lanes of `keep` 0 store 0.
template <class Q>
__attribute__((target("avx2,fma"), always_inline)) inline void roundStore8(Q* y, __m256 q, __m256i zp,
                                                                         __m256i keep) {
  q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i v = _mm256_and_si256(_mm256_add_epi32(_mm256_cvtps_epi32(q), zp), keep);
  // In range already: the saturating packs only narrow.
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i bytes = std::is_signed<Q>::value ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), bytes);
}

// quantize8Body's steps 8 lanes at a time with x / s by divideByFma, for a
// scale where dividesByFma. Where q0 = x * r is not finite (x infinite or
// NaN, or the quotient past the float range) the quotient is q0's own value.
// The tail goes through quantize8Body.

template <class Q>
__attribute__((target("avx2,fma"))) void quantize8Fma(const float* x, Q* y, int64_t n, float s, int32_t zp, float lo,
                                                      float hi) {
  const __m256 vs = _mm256_set1_ps(s), vr = _mm256_set1_ps(1.0f / s), vlo = _mm256_set1_ps(lo),
               vhi = _mm256_set1_ps(hi), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity()),
               sign = _mm256_set1_ps(-0.0f);
  const __m256i vzp = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for(; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_loadu_ps(x + i);
    const __m256 q0 = _mm256_mul_ps(vx, vr);
    __m256 q = divideByFma(vx, vs, vr);
    q = _mm256_blendv_ps(q0, q, _mm256_cmp_ps(_mm256_andnot_ps(sign, q0), inf, _CMP_LT_OQ));
    const __m256 ordered = _mm256_cmp_ps(q, q, _CMP_ORD_Q);  // NaN: 0 (as QuantizeOf)
    q = _mm256_min_ps(_mm256_max_ps(q, vlo), vhi);
    roundStore8(y + i, q, vzp, _mm256_castps_si256(ordered));
  }
  quantize8Body(x + i, y + i, n - i, s, zp, lo, hi);
}
#endif

template <class Q, class T>
void quantizeSpan(const T* x, Q* y, int64_t n, T s, int32_t zp, double lo, double hi) {
  if constexpr(std::is_same<T, float>::value && sizeof(Q) == 1) {
#ifdef ONYX_QUANT_FMA
    // (bestIsa() above scalar: the CPU has AVX2 and FMA.)
    if(host::vec::bestIsa() != host::vec::Isa::scalar && dividesByFma(s))
      return quantize8Fma(x, y, n, s, zp, float(lo), float(hi));
#endif
    if(host::vec::bestIsa() != host::vec::Isa::scalar) quantize8Avx2(x, y, n, s, zp, float(lo), float(hi));
    else quantize8Base(x, y, n, s, zp, float(lo), float(hi));
    return;
  }
  for(int64_t i = 0; i < n; ++i) {
    const double v = double(x[i] / s);
    const int32_t keep = -int32_t(v == v);  // NaN: 0 (as QuantizeOf)
    y[i] = Q((int32_t(ops::roundClamped(v, lo, hi)) + zp) & keep);
  }
}

template <class Q, class T>
void quantizeRun(const T* x, Q* y, int64_t n, T s, int32_t zp) {
  const double lo = double(std::numeric_limits<Q>::lowest()) - zp, hi = double(std::numeric_limits<Q>::max()) - zp;
  host::parallelFor(n, n, [=](int64_t b, int64_t e) { quantizeSpan(x + b, y + b, e - b, s, zp, lo, hi); });
}

template <class Q, class T>
void dequantizeRun(const Q* x, T* y, int64_t n, T s, T zp) {
  host::parallelFor(n, n, [=](int64_t b, int64_t e) {
    for(int64_t i = b; i < e; ++i) y[i] = (T(x[i]) - zp) * s;
  });
}

// Whether a kernel's scale and zero point (inputs 1 and 2) hold one value each.
bool perTensor(const KernelCtx& c) { return c.in[1]->size() == 1 && c.in[2]->size() == 1; }
#endif

// Integer types a quantized value may have.
template <class Fn>
void dispatchQuant(Type t, const char* what, Fn&& fn) {
  switch(t) {
    case Type::int8: fn(TypeTag<int8_t>{}); return;
    case Type::uint8: fn(TypeTag<uint8_t>{}); return;
    case Type::int16: fn(TypeTag<int16_t>{}); return;
    case Type::uint16: fn(TypeTag<uint16_t>{}); return;
    case Type::int32: fn(TypeTag<int32_t>{}); return;
    case Type::int64: fn(TypeTag<int64_t>{}); return;
    default: unsupportedType(t, what, "int8, uint8, int16, uint16, int32, int64");
  }
}

}  // namespace

// ---- ONNX import

namespace {

// `p` reshaped to `s`; when p is itself a reshape of a tensor that lines up
// with x the same way as `s` (the same dims once both are padded with
// leading 1s to x's rank), that tensor: the export writes an Onyx scale of
// shape [C, 1, 1] as Reshape(scale, [C]), which thus imports back as it was.
Expr reshapeParam(Expr p, const Shape& s, int xRank) {
  if(p->kind() == NodeKind::Op && p->op()->name == "reshape") {
    Expr q = p->child(0);
    auto padded = [xRank](const Shape& t) {
      Shape::Dims d(static_cast<size_t>(std::max(0, xRank - t.rank())), 1);
      for(int64_t v : t.dims()) d.push_back(v);
      return d;
    };
    if(q->shape().rank() <= xRank && padded(q->shape()) == padded(s)) return q;
  }
  return p->shape() == s ? p : reshape(p, s);
}

}  // namespace

// A scale or zero point of QuantizeLinear/DequantizeLinear reshaped to
// broadcast against x (shape xs): one element is per tensor (also with a
// block_size, as the ONNX reference reads it); a 1-D one
// lies along `axis` ([1, .., C, .., 1]); with block_size > 0 it has x's rank
// and each entry covers block_size consecutive elements along `axis`.
Expr alignQuantParam(OnnxImportCtx& c, Expr p, const Shape& xs, int64_t axisAttr, int64_t block, const char* what) {
  const Shape& ps = p->shape();
  if(ps.elements() == 1) return reshapeParam(p, Shape(), xs.rank());
  c.check(axisAttr >= -xs.rank() && axisAttr < xs.rank(), "axis ", axisAttr, " is out of range for x of shape ", xs);
  int axis = xs.axis(axisAttr);
  if(block <= 0) {
    c.check(ps.rank() == 1 && ps[0] == xs[axis], what, " of shape ", ps, " must be a scalar or a 1-D tensor of ",
            xs[axis], " entries (x's dim along axis ", axis, ")");
    Shape::Dims d(static_cast<size_t>(xs.rank()), 1);
    d[static_cast<size_t>(axis)] = ps[0];
    return reshapeParam(p, Shape(d), xs.rank());
  }
  c.check(ps.rank() == xs.rank(), what, " of shape ", ps, " must have x's rank (", xs.rank(), ") for blocked quantization");
  // A block past x's dim covers the whole axis, as a block of that dim does
  // (the same one entry; no expansion to a block_size of 2^63 - 1 below).
  block = std::min(block, std::max<int64_t>(xs[axis], 1));
  for(int i = 0; i < xs.rank(); ++i) {
    int64_t want = i == axis ? xs[i] / block + (xs[i] % block != 0) : xs[i];
    c.check(ps[i] == want, what, " of shape ", ps, " does not fit x of shape ", xs, " with block_size ", block,
            " along axis ", axis);
  }
  // [.., B, ..] -> [.., B, 1, ..] -> [.., B, block, ..] -> [.., B * block, ..], cut to x's dim.
  Shape::Dims ins, rep, merged;
  for(int i = 0; i < ps.rank(); ++i) {
    ins.push_back(ps[i]);
    rep.push_back(ps[i]);
    merged.push_back(i == axis ? ps[i] * block : ps[i]);
    if(i == axis) {
      ins.push_back(1);
      rep.push_back(block);
    }
  }
  Expr e = reshape(expand(reshape(p, Shape(ins)), Shape(rep)), Shape(merged));
  if(merged[static_cast<size_t>(axis)] != xs[axis]) e = slice(e, axis, 0, xs[axis]);
  return e;
}

void checkQuantTarget(OnnxImportCtx& c, Type t, const char* what) {
  c.check(isQuantType(t) && t != Type::int64, what, " has element type ", t,
          "; supported: int8, uint8, int16, uint16, int32 (float8, int4 and int2 are not)");
}

namespace {

// The storage-only targets of QuantizeLinear/DequantizeLinear (21+: int4,
// uint4, float8 from 19, float4e2m1 23, int2/uint2 25). They import as
// composites of round, clip and cast (src/ops/conversion.cpp converts these
// types), computing what ONNX's reference computes.
bool isStorageQuantType(Type t) {
  switch(t) {
    case Type::int4: case Type::uint4: case Type::int2: case Type::uint2:
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz:
    case Type::float4e2m1: return true;
    default: return false;
  }
}

// x / scale (already aligned, in the division's type) quantized to t:
// integers round half to even, add the zero point and clip to t's range;
// float8 targets add the zero point (0 in valid models) and cast with
// `saturate`; float4e2m1 (no inf or NaN) always saturates.
Expr quantizeToStorage(Expr scaled, Expr zp, Type t, bool saturate) {
  const Type ft = scaled->value_type();
  if(isSmallFloat(t)) return cast(scaled + cast(zp, ft), t, t == Type::float4e2m1 || saturate);
  const int bits = typeBits(t);
  const bool isSigned = t == Type::int4 || t == Type::int2;
  const double lo = isSigned ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = isSigned ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
  // float64 from the rounding on: the sum of a rounded quotient and a small
  // zero point is then exact (numpy adds them in int32).
  return cast(clip(cast(round(scaled), Type::float64) + cast(zp, Type::float64), lo, hi), t);
}

// QuantizeLinear 10 (per tensor), 13 (axis), 19 (saturate, for float8), 21
// (block_size, output_dtype), 23 (precision).
void importQuantizeLinear(OnnxImportCtx& c) {
  Expr x = c.input(0), scale = c.input(1);
  int64_t axis = c.attrInt("axis", 1), block = c.attrInt("block_size", 0);
  const bool saturate = c.attrInt("saturate", 1) != 0;  // only float8 targets saturate optionally
  Type outType = static_cast<Type>(c.attrInt("output_dtype", 0));
  Type precision = static_cast<Type>(c.attrInt("precision", 0));
  bool hasZp = c.numInputs() > 2 && c.hasInput(2);
  Type zt = hasZp ? c.input(2)->value_type() : (outType == Type::undefined ? Type::uint8 : outType);
  c.check(!hasZp || outType == Type::undefined || outType == zt, "output_dtype ", outType,
          " differs from the zero point's type ", zt);
  if(!isStorageQuantType(zt)) checkQuantTarget(c, zt, "the quantized type");
  // An integer x (int32) divides in float64, as numpy does; `precision`
  // names the type of the division.
  Type ft = precision != Type::undefined ? precision : isFloat(x->value_type()) ? x->value_type() : Type::float64;
  c.check(isFloat(ft), "cannot quantize x of element type ", x->value_type());
  x = cast(x, ft);
  scale = cast(scale, ft);
  const Shape& xs = x->shape();
  if(isStorageQuantType(zt)) {
    Expr s = alignQuantParam(c, scale, xs, axis, block, "y_scale");
    Expr z = hasZp ? alignQuantParam(c, cast(c.input(2), Type::float64), xs, axis, block, "y_zero_point")
                   : c.graph().scalar(0, Type::float64);
    c.setOutput(0, quantizeToStorage(x / s, z, zt, saturate));
    return;
  }
  Expr zp = hasZp ? c.input(2) : c.graph().scalar(0, zt);
  c.setOutput(0, quantize_linear(x, alignQuantParam(c, scale, xs, axis, block, "y_scale"),
                                 alignQuantParam(c, zp, xs, axis, block, "y_zero_point")));
}

// DequantizeLinear 10, 13 (axis), 19, 21 (block_size), 23 (output_dtype):
// y = (x - zero_point) * scale in scale's type (or output_dtype).
void importDequantizeLinear(OnnxImportCtx& c) {
  Expr x = c.input(0), scale = c.input(1);
  int64_t axis = c.attrInt("axis", 1), block = c.attrInt("block_size", 0);
  Type outType = static_cast<Type>(c.attrInt("output_dtype", 0));
  const Type xt = x->value_type();
  if(!isStorageQuantType(xt)) checkQuantTarget(c, xt, "x");
  Type ft = outType != Type::undefined ? outType : scale->value_type();
  c.check(isFloat(ft), "the output type ", ft, " is not a float type");
  const Shape& xs = x->shape();
  const bool hasZp = c.numInputs() > 2 && c.hasInput(2);
  if(hasZp)
    c.check(c.input(2)->value_type() == xt, "x_zero_point has element type ", c.input(2)->value_type(), " but x has ", xt);
  if(isStorageQuantType(xt)) {
    // As ONNX's reference: x - zero point in float32 (exact for the small
    // integers and floats), times the scale in float32, then the output type.
    Expr d = cast(x, Type::float32);
    if(hasZp) d = d - alignQuantParam(c, cast(c.input(2), Type::float32), xs, axis, block, "x_zero_point");
    c.setOutput(0, cast(d * cast(alignQuantParam(c, scale, xs, axis, block, "x_scale"), Type::float32), ft));
    return;
  }
  Expr zp = hasZp ? c.input(2) : c.graph().scalar(0, xt);
  c.setOutput(0, dequantize_linear(x, cast(alignQuantParam(c, scale, xs, axis, block, "x_scale"), ft),
                                   alignQuantParam(c, zp, xs, axis, block, "x_zero_point")));
}

// ---- ONNX export

// The dims of a scale or zero point of shape s lined up with x's rank
// (leading 1s).
Shape::Dims alignedDims(const Shape& s, int xRank) {
  Shape::Dims d(static_cast<size_t>(xRank - s.rank()), 1);
  for(int64_t v : s.dims()) d.push_back(v);
  return d;
}

// Name `v` (a value of shape `s`) reshaped to `to` for the export; v itself
// when it already has that shape.
std::string reshapeValue(OnnxExportCtx& c, const std::string& v, const Shape& s, const Shape::Dims& to,
                         const std::string& hint) {
  if(s.dims() == to) return v;
  std::string y = c.fresh(hint);
  c.emit("Reshape", {v, c.intsConst(std::vector<int64_t>(to.begin(), to.end()), hint + "_shape")}, {y});
  return y;
}

// A name made by c.fresh(hint) without the node's prefix ("<node>/<hint>"
// -> "<hint>"): the hint under which the node that imports as that value
// names its own initializers on a later export, so that it gets the same
// names.
std::string localName(OnnxExportCtx& c, const std::string& fresh) {
  std::string prefix = c.output() + "/";
  return fresh.rfind(prefix, 0) == 0 ? fresh.substr(prefix.size()) : fresh;
}

// How QuantizeLinear/DequantizeLinear can take a node's scale (input 1) and
// zero point (input 2) on x (input 0): both one value, or (from opset 13)
// both one per entry of one axis of x.
struct ParamLayout {
  Shape::Dims scale, zeroPoint;  // lined up with x's rank
  int axis = -1, nonOne = 0;     // the axis with more than one entry, and how many such axes
  bool ok = false;
};

ParamLayout paramLayout(OnnxExportCtx& c) {
  ParamLayout p;
  const int rank = c.inputShape(0).rank();
  p.scale = alignedDims(c.inputShape(1), rank);
  p.zeroPoint = alignedDims(c.inputShape(2), rank);
  for(size_t i = 0; i < p.scale.size(); ++i)
    if(p.scale[i] != 1) {
      p.axis = static_cast<int>(i);
      ++p.nonOne;
    }
  p.ok = p.scale == p.zeroPoint && (p.nonOne == 0 || (p.nonOne == 1 && c.opset() >= 13));
  return p;
}

// opType (QuantizeLinear or DequantizeLinear) of x with the scale and zero
// point reshaped to the op's form (p.ok).
void emitLinearQuant(OnnxExportCtx& c, const char* opType, const ParamLayout& p) {
  Shape::Dims to;
  if(p.nonOne) to.push_back(p.scale[static_cast<size_t>(p.axis)]);
  std::string s = reshapeValue(c, c.input(1), c.inputShape(1), to, "scale");
  std::string z = reshapeValue(c, c.input(2), c.inputShape(2), to, "zero_point");
  OnnxAttrs attrs;
  if(p.nonOne && p.axis != 1) attrs.emplace_back("axis", AttrValue(int64_t(p.axis)));
  c.emit(opType, {c.input(0), s, z}, {c.output()}, attrs);
}

// quantize_linear as the element-wise ops it computes, for what ONNX's
// QuantizeLinear does not take (float64 x, int32/int64 zero points, a scale
// and zero point laid out differently): q = x / scale in x's compute type
// (float32 for float16/bfloat16), rounded half to even, then in float64 plus
// the zero point, clipped to the integer type's range and cast. Each step
// computes what the kernel does, so the import gives the same bits.
void exportQuantizeComposite(OnnxExportCtx& c, const std::string& why) {
  c.requireOpset(11, str(why, "; the exact element-wise form (Round)"));
  Type xt = c.inputType(0), zt = c.inputType(2);
  Type ft = xt == Type::float64 ? Type::float64 : Type::float32;
  std::string x = c.input(0), s = c.input(1);
  if(xt != ft) {
    x = c.emitCast(x, ft, "x_f32");
    s = c.emitCast(s, ft, "scale_f32");
  }
  std::string q = c.fresh("scaled");
  c.emit("Div", {x, s}, {q});
  std::string r = c.fresh("rounded");
  c.emit("Round", {q}, {r});
  if(ft != Type::float64) r = c.emitCast(r, Type::float64, "rounded_f64");
  std::string shifted = c.fresh("shifted");
  c.emit("Add", {r, c.emitCast(c.input(2), Type::float64, "zero_point_f64")}, {shifted});
  std::string clipped = c.fresh("clipped");
  std::string local = localName(c, clipped) + "/";
  double lo, hi;
  dispatchQuant(zt, "quantize_linear", [&](auto tag) {
    using Q = typename decltype(tag)::type;
    lo = static_cast<double>(std::numeric_limits<Q>::lowest());
    hi = static_cast<double>(std::numeric_limits<Q>::max());
  });
  c.emit("Clip", {shifted, c.scalarConst(lo, Type::float64, local + "min"), c.scalarConst(hi, Type::float64, local + "max")},
         {clipped});
  c.emit("Cast", {clipped}, {c.output()}, {{"to", int64_t(zt)}});
}

// QuantizeLinear takes float32 x (float16/bfloat16 from opset 19), int8/uint8
// zero points (int16/uint16 from 21) and a scale and zero point of the same
// layout: one value (a scalar) or, from opset 13, one per entry of x's
// `axis` (1-D). Onyx's broadcast forms ([C, 1, 1], [1]) are reshaped to
// those; everything else takes the element-wise form.
void exportQuantizeLinear(OnnxExportCtx& c) {
  Type xt = c.inputType(0), zt = c.inputType(2);
  const Shape& xs = c.inputShape(0);
  bool xOk = xt == Type::float32 || ((xt == Type::float16 || xt == Type::bfloat16) && c.opset() >= 19);
  bool zOk = zt == Type::int8 || zt == Type::uint8 || ((zt == Type::int16 || zt == Type::uint16) && c.opset() >= 21);
  const ParamLayout p = paramLayout(c);
  if(!xOk || !zOk || !p.ok) {
    std::string why = !xOk ? str("QuantizeLinear does not take ", xt, " x at opset ", c.opset())
                      : !zOk ? str("QuantizeLinear does not take ", zt, " zero points at opset ", c.opset())
                      : p.scale != p.zeroPoint || p.nonOne > 1
                          ? str("QuantizeLinear has no form for scale ", c.inputShape(1), " and zero point ",
                                c.inputShape(2), " on x ", xs)
                          : std::string("QuantizeLinear takes a scale per axis from opset 13");
    exportQuantizeComposite(c, why);
    return;
  }
  emitLinearQuant(c, "QuantizeLinear", p);
}

}  // namespace

// y = saturate(round_half_even(x / scale) + zero_point)
ONYX_OP(kQuantizeLinear, "quantize_linear")
    .doc("y = saturate(round(x / scale) + zero_point) in zero_point's integer type; round half to even; "
         "scale and zero_point broadcast to x")
    .inputs(3)
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      c.check(c.typeOf(1) == c.typeOf(0), "scale has element type ", c.typeOf(1), " but x has ", c.typeOf(0),
              "; cast scale to x's type");
      c.check(isQuantType(c.typeOf(2)), "zero_point has element type ", c.typeOf(2),
              " but must be an integer type (int8, uint8, int16, uint16, int32, int64)");
      const Shape& x = c.shapeOf(0);
      for(size_t i = 1; i < 3; ++i) {
        bool fits = Shape::broadcastable(c.shapeOf(i), x) && Shape::broadcast({x, c.shapeOf(i)}) == x;
        c.check(fits, i == 1 ? "scale" : "zero_point", " of shape ", c.shapeOf(i), " does not broadcast to x's shape ",
                x, "; a per-channel parameter needs 1s on the other axes (e.g. [C, 1, 1])");
      }
      c.shape = x;
      c.type = c.typeOf(2);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      dispatchFloat(c.in[0]->type(), "quantize_linear", [&](auto tag) {
        using T = typename decltype(tag)::type;
        dispatchQuant(c.out.type(), "quantize_linear", [&](auto qtag) {
          using Q = typename decltype(qtag)::type;
#ifndef ONYX_GPU_PLUGIN
          if constexpr(std::is_same_v<decltype(on), ops::OnHost> && std::is_same_v<T, float> && sizeof(Q) == 1) {
            if(perTensor(c)) {
              quantizeRun(c.in[0]->data<T>(), c.out.data<Q>(), c.out.size(), c.in[1]->data<T>()[0],
                          int32_t(c.in[2]->data<Q>()[0]));
              return;
            }
          }
#endif
          decltype(on)::template run<Q, T, T, Q>(QuantizeOf<Q>::make(), c.out, *c.in[0], *c.in[1], *c.in[2]);
        });
      });
    }))
    .notDifferentiable("integer output (its derivative is 0 almost everywhere)")
    .onnx("QuantizeLinear", 10)
    .importer(importQuantizeLinear)
    .exporter(exportQuantizeLinear);

Expr quantize_linear(Expr x, Expr scale, Expr zeroPoint) {
  return x->graph()->make(kQuantizeLinear, {x, scale, zeroPoint});
}

namespace {

// DequantizeLinear takes int8/uint8/int32 x (int16/uint16 from opset 21),
// float32 scales (float16/bfloat16 from 19) and a scale and zero point of
// one layout: a scalar, or (from opset 13) one per entry of x's `axis`.
// Everything else is written as Cast, Sub and Mul, which compute the same.
void exportDequantizeLinear(OnnxExportCtx& c) {
  Type xt = c.inputType(0), st = c.inputType(1);
  bool xOk = xt == Type::int8 || xt == Type::uint8 || xt == Type::int32 ||
             ((xt == Type::int16 || xt == Type::uint16) && c.opset() >= 21);
  bool sOk = st == Type::float32 || ((st == Type::float16 || st == Type::bfloat16) && c.opset() >= 19);
  const ParamLayout p = paramLayout(c);
  if(!xOk || !sOk || !p.ok) {
    std::string d = c.fresh("shifted");
    c.emit("Sub", {c.emitCast(c.input(0), st, "x_float"), c.emitCast(c.input(2), st, "zero_point_float")}, {d});
    c.emit("Mul", {d, c.input(1)}, {c.output()});
    return;
  }
  emitLinearQuant(c, "DequantizeLinear", p);
}

}  // namespace

// y = (x - zero_point) * scale
ONYX_OP(kDequantizeLinear, "dequantize_linear")
    .doc("y = (x - zero_point) * scale in scale's float type; x and zero_point of one integer type; scale and "
         "zero_point broadcast to x")
    .inputs(3)
    .infer([](InferCtx& c) {
      c.requireFloat(1);
      c.check(isQuantType(c.typeOf(0)), "x has element type ", c.typeOf(0),
              " but must be an integer type (int8, uint8, int16, uint16, int32, int64)");
      c.check(c.typeOf(2) == c.typeOf(0), "zero_point has element type ", c.typeOf(2), " but x has ", c.typeOf(0));
      const Shape& x = c.shapeOf(0);
      for(size_t i = 1; i < 3; ++i) {
        bool fits = Shape::broadcastable(c.shapeOf(i), x) && Shape::broadcast({x, c.shapeOf(i)}) == x;
        c.check(fits, i == 1 ? "scale" : "zero_point", " of shape ", c.shapeOf(i), " does not broadcast to x's shape ",
                x, "; a per-channel parameter needs 1s on the other axes (e.g. [C, 1, 1])");
      }
      c.shape = x;
      c.type = c.typeOf(1);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      dispatchFloat(c.out.type(), "dequantize_linear", [&](auto tag) {
        using T = typename decltype(tag)::type;
        dispatchQuant(c.in[0]->type(), "dequantize_linear", [&](auto qtag) {
          using Q = typename decltype(qtag)::type;
#ifndef ONYX_GPU_PLUGIN
          if constexpr(std::is_same_v<decltype(on), ops::OnHost> && std::is_same_v<T, float> && sizeof(Q) == 1) {
            if(perTensor(c)) {
              dequantizeRun(c.in[0]->data<Q>(), c.out.data<T>(), c.out.size(), c.in[1]->data<T>()[0],
                            T(c.in[2]->data<Q>()[0]));
              return;
            }
          }
#endif
          decltype(on)::template run<T, Q, T, Q>(DequantizeOf{}, c.out, *c.in[0], *c.in[1], *c.in[2]);
        });
      });
    }))
    // x and the zero point are integers; the scale's gradient is dy * (x - zp).
    .backward([](GradCtx& g) {
      if(g.needs(1)) {
        Type t = g.x(1)->value_type();
        g.add(1, g.dy * (cast(g.x(0), t) - cast(g.x(2), t)));
      }
    })
    .onnx("DequantizeLinear", 10)
    .importer(importDequantizeLinear)
    .exporter(exportDequantizeLinear);

Expr dequantize_linear(Expr x, Expr scale, Expr zeroPoint) {
  return x->graph()->make(kDequantizeLinear, {x, scale, zeroPoint});
}

namespace {

// A float32 product rounded on its own (nvcc would otherwise fuse the sum
// of two products into an FMA, which the unfused ops never compute).
ONYX_HD float mulRounded(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// y = saturate(round(act(dq(a) + dq(b)) / y_scale) + y_zp): the steps of
// dequantize_linear (float32), add, relu and quantize_linear (QuantizeOf),
// so the result is theirs bit for bit.
template <class Q>
struct QAddOf {
  float as, bs, ys, az, bz;
  double yz;
  bool relu;
  QuantizeOf<Q> sat = QuantizeOf<Q>::make();  // made on the host: make() is host code
  template <class O>
  ONYX_HD Q operator()(O, Q a, Q b) const {
    float x = mulRounded(static_cast<float>(a) - az, as) + mulRounded(static_cast<float>(b) - bz, bs);
    if(relu) x = x > 0.f ? x : 0.f;
    return sat.saturate(::nearbyint(static_cast<double>(x / ys)) + yz);
  }
};

#ifndef ONYX_GPU_PLUGIN
// The CPU's loop for a and b of y's shape: QAddOf's steps, written so that
// they vectorize. The quotient is rounded in float (roundClamped): the
// integer nearbyint gives in QAddOf, as the clamp bounds are integers.
// Compiled for AVX2 and for the baseline, picked at run time.
template <bool Relu, class Q>
__attribute__((always_inline)) inline void qaddSpanBody(const Q* a, const Q* b, Q* y, int64_t n, const QAddOf<Q>& f) {
  const int32_t zp = int32_t(f.yz);
  const float lo = float(std::numeric_limits<Q>::lowest() - zp), hi = float(std::numeric_limits<Q>::max() - zp);
  for(int64_t i = 0; i < n; ++i) {
    float x = (static_cast<float>(a[i]) - f.az) * f.as + (static_cast<float>(b[i]) - f.bz) * f.bs;
    if(Relu) x = x > 0.f ? x : 0.f;
    const float v = x / f.ys;
    const int32_t keep = -int32_t(v == v);  // NaN: 0 (as QAddOf)
    y[i] = Q((int32_t(ops::roundClamped(v, lo, hi)) + zp) & keep);
  }
}

template <bool Relu, class Q>
ONYX_TARGET_AVX2 void qaddSpanAvx2(const Q* a, const Q* b, Q* y, int64_t n, const QAddOf<Q>& f) {
  qaddSpanBody<Relu>(a, b, y, n, f);
}

template <bool Relu, class Q>
void qaddSpanBase(const Q* a, const Q* b, Q* y, int64_t n, const QAddOf<Q>& f) {
  qaddSpanBody<Relu>(a, b, y, n, f);
}

#ifdef ONYX_QUANT_FMA
// Whether qaddSpanFma's quotient x / y_scale is exact (divideByFma) for
// these parameters: every scale in dividesByFma's range.
template <class Q>
bool qaddDividesByFma(const QAddOf<Q>& f) {
  return dividesByFma(f.as) && dividesByFma(f.bs) && dividesByFma(f.ys);
}

// 8 int8/uint8 values as float lanes.
template <class Q>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 widen8(const Q* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(std::is_signed<Q>::value ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

// QAddOf's steps 8 lanes at a time without the division (qaddDividesByFma);
// the tail through qaddSpanBody, which gives the same bits.
template <bool Relu, class Q>
__attribute__((target("avx2,fma"))) void qaddSpanFma(const Q* a, const Q* b, Q* y, int64_t n, const QAddOf<Q>& f) {
  const int32_t zp = int32_t(f.yz);
  const __m256 as = _mm256_set1_ps(f.as), bs = _mm256_set1_ps(f.bs), az = _mm256_set1_ps(f.az),
               bz = _mm256_set1_ps(f.bz), ys = _mm256_set1_ps(f.ys), r = _mm256_set1_ps(1.0f / f.ys),
               lo = _mm256_set1_ps(float(std::numeric_limits<Q>::lowest() - zp)),
               hi = _mm256_set1_ps(float(std::numeric_limits<Q>::max() - zp)), zero = _mm256_setzero_ps();
  const __m256i vzp = _mm256_set1_epi32(zp), all = _mm256_set1_epi32(-1);
  int64_t i = 0;
  for(; i + 8 <= n; i += 8) {
    __m256 pa = _mm256_mul_ps(_mm256_sub_ps(widen8(a + i), az), as);
    __m256 pb = _mm256_mul_ps(_mm256_sub_ps(widen8(b + i), bz), bs);
    opaque(pa);
    opaque(pb);
    __m256 x = _mm256_add_ps(pa, pb);
    if(Relu) x = _mm256_max_ps(x, zero);  // x > 0 ? x : +0
    const __m256 q = _mm256_min_ps(_mm256_max_ps(divideByFma(x, ys, r), lo), hi);
    roundStore8(y + i, q, vzp, all);
  }
  qaddSpanBody<Relu>(a + i, b + i, y + i, n - i, f);
}

#endif

template <bool Relu, class Q>
void qaddSpan(const Q* a, const Q* b, Q* y, int64_t n, const QAddOf<Q>& f, bool fma) {
#ifdef ONYX_QUANT_FMA
  if(fma) return qaddSpanFma<Relu>(a, b, y, n, f);
#else
  (void)fma;
#endif
  if(host::vec::bestIsa() != host::vec::Isa::scalar) qaddSpanAvx2<Relu>(a, b, y, n, f);
  else qaddSpanBase<Relu>(a, b, y, n, f);
}
#endif

}  // namespace

// y = quantize(act(dequantize(a) + dequantize(b))), per-tensor parameters
ONYX_OP(kQLinearAdd, "qlinear_add")
    .doc("y = saturate(round(act((a - a_zero_point) * a_scale + (b - b_zero_point) * b_scale) / y_scale) + "
         "y_zero_point) in a's type (int8 or uint8, as b's), broadcasting; act: relu when relu is 1, else none; "
         "each step in float32 as dequantize_linear, add, relu and quantize_linear compute it")
    .inputs(2)
    .attr("a_scale", 1.0)
    .attr("a_zero_point", int64_t(0))
    .attr("b_scale", 1.0)
    .attr("b_zero_point", int64_t(0))
    .attr("y_scale", 1.0)
    .attr("y_zero_point", int64_t(0))
    .attr("relu", int64_t(0))
    .infer([](InferCtx& c) {
      const Type t = c.typeOf(0);
      c.check(t == Type::int8 || t == Type::uint8, "a has element type ", t, " but must be int8 or uint8");
      c.check(c.typeOf(1) == t, "b has element type ", c.typeOf(1), " but a has ", t);
      infer::broadcast(c);
    })
    .kernel(ops::onDevices([](auto on, KernelCtx& c) {
      auto run = [&](auto qtag) {
        using Q = typename decltype(qtag)::type;
        const Attrs& a = c.attrs;
        QAddOf<Q> f{float(a.f("a_scale")), float(a.f("b_scale")), float(a.f("y_scale")),
                    float(a.i("a_zero_point")), float(a.i("b_zero_point")), double(a.i("y_zero_point")),
                    a.i("relu") != 0};
#ifndef ONYX_GPU_PLUGIN
        if constexpr(std::is_same_v<decltype(on), ops::OnHost>) {
          if(c.in[0]->shape() == c.out.shape() && c.in[1]->shape() == c.out.shape()) {
            const Q *x = c.in[0]->data<Q>(), *z = c.in[1]->data<Q>();
            Q* y = c.out.data<Q>();
            const int64_t n = c.out.size();
            // (bestIsa() above scalar: the CPU has AVX2 and FMA.)
            bool fma = false;
#ifdef ONYX_QUANT_FMA
            fma = host::vec::bestIsa() != host::vec::Isa::scalar && qaddDividesByFma(f);
#endif
            host::parallelFor(n, n * 4, [&](int64_t lo, int64_t hi) {
              if(f.relu) qaddSpan<true>(x + lo, z + lo, y + lo, hi - lo, f, fma);
              else qaddSpan<false>(x + lo, z + lo, y + lo, hi - lo, f, fma);
            });
            return;
          }
        }
#endif
        decltype(on)::template run<Q, Q, Q>(f, c.out, *c.in[0], *c.in[1]);
      };
      if(c.out.type() == Type::int8) run(TypeTag<int8_t>{});
      else run(TypeTag<uint8_t>{});
    }))
    .notDifferentiable("integer output (its derivative is 0 almost everywhere)")
    .noOnnx("internal: made by the inference rewrite graph/passes/fuse_qlinear_add from DequantizeLinear, Add, "
            "[Relu], QuantizeLinear with per-tensor parameters");

Expr qlinear_add(Expr a, Expr b, const QLinearAddParams& p) {
  return a->graph()->make(kQLinearAdd, {a, b},
                          {{"a_scale", AttrValue(double(p.aScale))},
                           {"a_zero_point", AttrValue(int64_t(p.aZeroPoint))},
                           {"b_scale", AttrValue(double(p.bScale))},
                           {"b_zero_point", AttrValue(int64_t(p.bZeroPoint))},
                           {"y_scale", AttrValue(double(p.yScale))},
                           {"y_zero_point", AttrValue(int64_t(p.yZeroPoint))},
                           {"relu", AttrValue(int64_t(p.relu ? 1 : 0))}});
}

}  // namespace onyx
