// The SIMD bodies of vecmath.h, written once over a register traits struct V
// and compiled once per ISA: vecmath_avx512.cpp and vecmath_avx2.cpp define
// V (register type, loads and stores, SLEEF's functions of that width) and
// include this file, each with its own -m flags. Everything here has internal
// linkage and uses no std:: templates: a weak symbol compiled for AVX-512
// must not be picked by the linker for code that runs on any CPU.
//
// Arithmetic is GCC's vector extension on V::R (__m512 / __m256): operators
// and `mask ? a : b` compile to the ISA's instructions.
#pragma once
#include <cstdint>

#include <onyx/backend/cpu/vecmath_table.h>

namespace onyx {
namespace host {
namespace vec {
namespace {

template <class V>
struct Body {
  using R = typename V::R;
  static R splat(float v) { return V::set(v); }

  // y = op(x) over [0, n): full registers, then one masked register for the
  // tail, so a value gives the same result wherever it lies in the array.
  template <class Op>
  static void map(const float* x, float* y, int64_t n, Op op) {
    int64_t i = 0;
    for(; i + V::kWidth <= n; i += V::kWidth) V::store(y + i, op(V::load(x + i)));
    if(i < n) {
      int rest = static_cast<int>(n - i);
      V::storePart(y + i, op(V::loadPart(x + i, rest)), rest);
    }
  }

  // 1 / (1 + e^-x) from t = e^-|x| in [0, 1] (never overflows): 1 / (1 + t)
  // for x >= 0, t / (1 + t) below, which keeps the tiny values of large
  // negative x (down to the subnormals) instead of 1 / inf = 0.
  static R sigmoidOf(R x) {
    R t = V::expNonPositive(-V::abs(x));
    R r = splat(1.f) / (splat(1.f) + t);
    return x >= splat(0.f) ? r : t * r;
  }
  // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|); NaN stays NaN through log1p.
  static R softplusOf(R x) {
    R pos = x > splat(0.f) ? x : splat(0.f);
    return pos + V::log1p(V::exp(-V::abs(x)));
  }
  // min(1, v) with fmin's rule (a NaN v gives 1), then max(0, .) likewise.
  static R unitClamp(R v) {
    R m = v < splat(1.f) ? v : splat(1.f);
    return m > splat(0.f) ? m : splat(0.f);
  }

#define ONYX_VEC_UNARY(NAME, EXPR)                                       \
  static void NAME(const float* x, float* y, int64_t n, float p, float q) { \
    (void)p;                                                             \
    (void)q;                                                             \
    map(x, y, n, [=](R v) { return EXPR; });                             \
  }
  ONYX_VEC_UNARY(exp, V::exp(v))
  ONYX_VEC_UNARY(expm1, V::expm1(v))
  ONYX_VEC_UNARY(log, V::log(v))
  ONYX_VEC_UNARY(sqrt, V::sqrt(v))
  ONYX_VEC_UNARY(reciprocal, splat(1.f) / v)
  ONYX_VEC_UNARY(sin, V::sin(v))
  ONYX_VEC_UNARY(cos, V::cos(v))
  ONYX_VEC_UNARY(tan, V::tan(v))
  ONYX_VEC_UNARY(asin, V::asin(v))
  ONYX_VEC_UNARY(acos, V::acos(v))
  ONYX_VEC_UNARY(atan, V::atan(v))
  ONYX_VEC_UNARY(atanh, V::atanh(v))
  ONYX_VEC_UNARY(tanh, V::tanh(v))
  ONYX_VEC_UNARY(erf, V::erf(v))
  ONYX_VEC_UNARY(sigmoid, sigmoidOf(v))
  ONYX_VEC_UNARY(silu, v * sigmoidOf(v))
  ONYX_VEC_UNARY(softplus, softplusOf(v))
  ONYX_VEC_UNARY(mish, v * V::tanhU35(softplusOf(v)))
  // The functors' order of operations (activations.cpp), so that the two
  // paths differ only by the ULP of erf/tanh. Inside gelu and mish, tanh is
  // SLEEF's u35 (3x faster than u10).
  ONYX_VEC_UNARY(geluErf, splat(0.5f) * v * (splat(1.f) + V::erf(v * splat(0.70710678118654752440f))))
  ONYX_VEC_UNARY(geluTanh, splat(0.5f) * v *
                               (splat(1.f) + V::tanhU35(splat(0.79788456080286535588f) *
                                                     (v + splat(0.044715f) * v * v * v))))
  ONYX_VEC_UNARY(softsign, v / (splat(1.f) + V::abs(v)))
  ONYX_VEC_UNARY(relu, v < splat(0.f) ? splat(0.f) : v)
  ONYX_VEC_UNARY(hardSwish, v * unitClamp(v * splat(static_cast<float>(1.0 / 6.0)) + splat(0.5f)))
  ONYX_VEC_UNARY(elu, splat(q) * (v > splat(0.f) ? v : splat(p) * V::expm1(v)))
  ONYX_VEC_UNARY(celu, v > splat(0.f) ? v : splat(p) * V::expm1(v / splat(p)))
  ONYX_VEC_UNARY(leakyRelu, v > splat(0.f) ? v : v * splat(p))
  ONYX_VEC_UNARY(hardSigmoid, unitClamp(splat(p) * v + splat(q)))
  // maximum(v, lo) then minimum(., hi) as the functors: NaN stays NaN.
  ONYX_VEC_UNARY(clip, [&] {
    R m = v < splat(p) ? splat(p) : v;
    return splat(q) < m ? splat(q) : m;
  }())
#undef ONYX_VEC_UNARY

  template <int Op>
  static R binOp(R a, R b) {
    if constexpr(Op == 0) return a + b;
    else if constexpr(Op == 1) return a - b;
    else if constexpr(Op == 2) return a * b;
    else if constexpr(Op == 3) return a / b;
    else if constexpr(Op == 4) return a < b ? b : a;  // maximum: NaN in a stays
    else if constexpr(Op == 5) return b < a ? b : a;  // minimum
    else return V::pow(a, b);
  }
  // One operand per register: a run of n (SA, SB = 1) or a splat (0).
  template <int Op, int SA, int SB>
  static void binaryRun(const float* a, const float* b, float* y, int64_t n) {
    R ka = splat(*a), kb = splat(*b);
    int64_t i = 0;
    for(; i + V::kWidth <= n; i += V::kWidth)
      V::store(y + i, binOp<Op>(SA ? V::load(a + i) : ka, SB ? V::load(b + i) : kb));
    if(i < n) {
      int rest = static_cast<int>(n - i);
      V::storePart(y + i, binOp<Op>(SA ? V::loadPart(a + i, rest) : ka, SB ? V::loadPart(b + i, rest) : kb), rest);
    }
  }
  template <int Op>
  static void binaryOf(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
    if(sa && sb) binaryRun<Op, 1, 1>(a, b, y, n);
    else if(sa) binaryRun<Op, 1, 0>(a, b, y, n);
    else if(sb) binaryRun<Op, 0, 1>(a, b, y, n);
    else binaryRun<Op, 0, 0>(a, b, y, n);
  }
  static void binary(int op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
    if(n <= 0) return;
    switch(op) {
      case 0: binaryOf<0>(a, sa, b, sb, y, n); break;
      case 1: binaryOf<1>(a, sa, b, sb, y, n); break;
      case 2: binaryOf<2>(a, sa, b, sb, y, n); break;
      case 3: binaryOf<3>(a, sa, b, sb, y, n); break;
      case 4: binaryOf<4>(a, sa, b, sb, y, n); break;
      case 5: binaryOf<5>(a, sa, b, sb, y, n); break;
      default: binaryOf<6>(a, sa, b, sb, y, n); break;
    }
  }

  static Table table() {
    Table t{};
    t.exp = exp; t.expm1 = expm1; t.log = log; t.sqrt = sqrt; t.reciprocal = reciprocal;
    t.sin = sin; t.cos = cos; t.tan = tan; t.asin = asin; t.acos = acos; t.atan = atan;
    t.atanh = atanh;
    t.tanh = tanh; t.erf = erf; t.sigmoid = sigmoid; t.silu = silu; t.softplus = softplus; t.mish = mish;
    t.geluErf = geluErf; t.geluTanh = geluTanh; t.softsign = softsign; t.relu = relu; t.hardSwish = hardSwish;
    t.elu = elu; t.celu = celu; t.leakyRelu = leakyRelu; t.hardSigmoid = hardSigmoid; t.clip = clip;
    t.binary = binary;
    return t;
  }
};

}  // namespace
}  // namespace vec
}  // namespace host
}  // namespace onyx
