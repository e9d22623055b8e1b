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
  // e^v for v <= 0 (NaN stays NaN), for sigmoid and silu: Cephes' expf
  // (n = round(v log2 e), r = v - n ln 2 in two FMA steps, a degree-7
  // polynomial), 2^n as two normal factors so that results down to the
  // subnormals are right; below -104 the result rounds to 0. 1 ULP, twice as
  // fast as SLEEF's u10 exp with its general range handling: silu over 1.2M
  // floats on a Zen 3 core 1.57 -> 0.85 ms (EfficientNet computes 6M per
  // image), within 2.7 ULP.
  static R expNonPositive(R v) {
    const R x = _mm256_max_ps(_mm256_set1_ps(-104.f), v);  // (x NaN: max_ps returns it)
    const R n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    R p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const R s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const R s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  }
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
