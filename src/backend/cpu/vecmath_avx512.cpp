// The AVX-512 body of vecmath.h: compiled with -mavx512f -mavx2 -mfma
// (CMakeLists.txt) and run only where the CPU has AVX-512F (vecmath.cpp
// checks). SLEEF's 16-wide u10 functions: 1.0 ULP.
#include <onyx/backend/cpu/vecmath_table.h>

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>
#include <sleef.h>

namespace onyx {
namespace host {
namespace vec {
namespace {

struct Avx512 {
  using R = __m512;
  static constexpr int kWidth = 16;
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R loadPart(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void storePart(float* p, R v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static R set(float v) { return _mm512_set1_ps(v); }
  static R abs(R v) { return _mm512_abs_ps(v); }
  // Correctly rounded. The maskz form: GCC 12's _mm512_sqrt_ps trips
  // -Wmaybe-uninitialized on its own undefined pass-through operand.
  static R sqrt(R v) { return _mm512_maskz_sqrt_ps(static_cast<__mmask16>(0xFFFF), v); }
  static R pow(R a, R b) { return Sleef_powf16_u10avx512f(a, b); }
  // 3.5 ULP and three times faster than u10: for compositions (gelu, mish)
  // whose own rounding is several ULP already.
  static R tanhU35(R v) { return Sleef_tanhf16_u35avx512f(v); }
  // e^v for v <= 0, for sigmoid and silu (the AVX2 body has a faster one;
  // not measured here, so SLEEF's stays).
  static R expNonPositive(R v) { return Sleef_expf16_u10avx512f(v); }
#define ONYX_SLEEF(NAME) \
  static R NAME(R v) { return Sleef_##NAME##f16_u10avx512f(v); }
  ONYX_SLEEF(exp) ONYX_SLEEF(expm1) ONYX_SLEEF(log) ONYX_SLEEF(log1p)
  ONYX_SLEEF(sin) ONYX_SLEEF(cos) ONYX_SLEEF(tan) ONYX_SLEEF(asin) ONYX_SLEEF(acos) ONYX_SLEEF(atan)
  ONYX_SLEEF(atanh)
  ONYX_SLEEF(tanh) ONYX_SLEEF(erf)
#undef ONYX_SLEEF
};

}  // namespace
}  // namespace vec
}  // namespace host
}  // namespace onyx

#include <onyx/backend/cpu/vecmath_body.h>

namespace onyx {
namespace host {
namespace vec {
const Table* tableAvx512() {
  static const Table t = Body<Avx512>::table();
  return &t;
}
}  // namespace vec
}  // namespace host
}  // namespace onyx

#else
namespace onyx {
namespace host {
namespace vec {
const Table* tableAvx512() { return nullptr; }
}  // namespace vec
}  // namespace host
}  // namespace onyx
#endif
