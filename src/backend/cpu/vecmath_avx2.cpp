// The AVX2 body of vecmath.h: compiled with -mavx2 -mfma
// (CMakeLists.txt) and run only where the CPU has AVX2 and FMA (vecmath.cpp
// checks). SLEEF's 8-wide u10 functions: 1.0 ULP.
#include <onyx/backend/cpu/vecmath_table.h>

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>

namespace onyx {
namespace host {
namespace vec {
namespace {

struct Avx2 {
  using R = __m256;
  static constexpr int kWidth = 8;
  // Lanes below n all ones: the mask of maskload/maskstore.
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R loadPart(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void storePart(float* p, R v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static R set(float v) { return _mm256_set1_ps(v); }
  static R abs(R v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), v); }
  static R sqrt(R v) { return _mm256_sqrt_ps(v); }  // correctly rounded
  static R pow(R a, R b) { return Sleef_powf8_u10avx2(a, b); }
  // 3.5 ULP and three times faster than u10: for compositions (gelu, mish)
  // whose own rounding is several ULP already.
  static R tanhU35(R v) { return Sleef_tanhf8_u35avx2(v); }
#define ONYX_SLEEF(NAME) \
  static R NAME(R v) { return Sleef_##NAME##f8_u10avx2(v); }
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
const Table* tableAvx2() {
  static const Table t = Body<Avx2>::table();
  return &t;
}
}  // namespace vec
}  // namespace host
}  // namespace onyx

#else
namespace onyx {
namespace host {
namespace vec {
const Table* tableAvx2() { return nullptr; }
}  // namespace vec
}  // namespace host
}  // namespace onyx
#endif
