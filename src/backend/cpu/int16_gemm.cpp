#include <onyx/backend/cpu/int16_gemm.h>

#include <algorithm>
#include <cstring>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/core/error.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONYX_INT16_GEMM_X86 1
#endif

namespace onyx {
namespace host {

template <class T>
Int16Panels Int16Panels::pack(const T* b, int64_t K, int64_t N) {
  Int16Panels p;
  p.K = K;
  p.N = N;
  p.J = (K + 1) / 2;
  const int64_t panels = (N + kPanel - 1) / kPanel;
  p.data.assign(size_t(panels * p.J * 2 * kPanel), 0);
  for(int64_t k = 0; k < K; ++k)
    for(int64_t n = 0; n < N; ++n) {
      const T v = b[k * N + n];
      ONYX_ASSERT(v >= -255 && v <= 255, "Int16Panels: B[", k, ", ", n, "] = ", v, " is not an 8-bit difference");
      p.data[size_t(((n / kPanel) * p.J + k / 2) * 2 * kPanel + (n % kPanel) * 2 + k % 2)] = int16_t(v);
    }
  return p;
}
template Int16Panels Int16Panels::pack<float>(const float*, int64_t, int64_t);
template Int16Panels Int16Panels::pack<int32_t>(const int32_t*, int64_t, int64_t);

bool int16GemmFits(int64_t K) {
#ifdef ONYX_INT16_GEMM_X86
  return K >= 0 && K < (int64_t(1) << 31) / (255 * 255) && vec::bestIsa() != vec::Isa::scalar;
#else
  (void)K;
  return false;
#endif
}

namespace {

#ifdef ONYX_INT16_GEMM_X86
// R rows by one panel's 32 columns over the pairs [0, jn) of `panel` (at
// its first pair): 4 vectors of 8 int32 sums per row, each pair of k one
// vpmaddwd per vector. R = 2 at most: 8 sums, 4 of B, a broadcast and the
// products' temporaries fill AVX2's 16 registers (3 rows spilled sums to
// the stack). pairs[r * ldp + j] holds row r's (a - a_zp) at k = 2j
// and 2j + 1 as two int16 in one int32. With accumulate the sums are added
// to y; only `cols` columns are written.
template <int R>
__attribute__((target("avx2"))) void tile(const int32_t* pairs, int64_t ldp, const int16_t* panel, int64_t jn,
                                          bool accumulate, int32_t* y, int64_t ldy, int64_t cols) {
  __m256i acc[R][4];
#pragma GCC unroll 4
  for(int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for(int q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_si256();
  for(int64_t j = 0; j < jn; ++j) {
    const __m256i* row = reinterpret_cast<const __m256i*>(panel + j * 64);
    const __m256i b0 = _mm256_loadu_si256(row), b1 = _mm256_loadu_si256(row + 1), b2 = _mm256_loadu_si256(row + 2),
                  b3 = _mm256_loadu_si256(row + 3);
#pragma GCC unroll 4
    for(int r = 0; r < R; ++r) {
      const __m256i p = _mm256_set1_epi32(pairs[r * ldp + j]);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(p, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(p, b1));
      acc[r][2] = _mm256_add_epi32(acc[r][2], _mm256_madd_epi16(p, b2));
      acc[r][3] = _mm256_add_epi32(acc[r][3], _mm256_madd_epi16(p, b3));
    }
  }
#pragma GCC unroll 4
  for(int r = 0; r < R; ++r) {
    int32_t* yr = y + r * ldy;
    if(cols == 32) {
#pragma GCC unroll 4
      for(int q = 0; q < 4; ++q) {
        __m256i* at = reinterpret_cast<__m256i*>(yr + 8 * q);
        _mm256_storeu_si256(at, accumulate ? _mm256_add_epi32(_mm256_loadu_si256(at), acc[r][q]) : acc[r][q]);
      }
    } else {
      alignas(32) int32_t out[32];
      for(int q = 0; q < 4; ++q) _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8 * q), acc[r][q]);
      for(int64_t n = 0; n < cols; ++n) yr[n] = accumulate ? yr[n] + out[n] : out[n];
    }
  }
}
#endif

// Pairs of k per block: a block of a panel (128 x 32 x 2 int16, 16 KiB)
// stays in L1 while every row of A passes over it.
constexpr int64_t kPairsPerBlock = 128;

template <class T>
void int16GemmT(const T* a, int64_t lda, int32_t azp, int64_t rows, const Int16Panels& b, int32_t* y,
                int64_t ldy) {
  const int64_t K = b.K, N = b.N, J = b.J;
  if(rows <= 0 || N <= 0) return;
  ONYX_ASSERT(int16GemmFits(K), "int16Gemm: K = ", K, " on this CPU (check int16GemmFits first)");
  if(J == 0) {
    for(int64_t r = 0; r < rows; ++r) std::fill(y + r * ldy, y + r * ldy + N, 0);
    return;
  }
#ifdef ONYX_INT16_GEMM_X86
  std::vector<int32_t> pairs(size_t(rows * J));
  parallelFor(rows, rows * K, [&](int64_t rb, int64_t re) {
    for(int64_t r = rb; r < re; ++r) {
      const T* ar = a + r * lda;
      int32_t* pr = pairs.data() + r * J;
      for(int64_t j = 0; j < J; ++j) {
        const int32_t a0 = int32_t(ar[2 * j]) - azp, a1 = 2 * j + 1 < K ? int32_t(ar[2 * j + 1]) - azp : 0;
        pr[j] = int32_t(uint32_t(uint16_t(int16_t(a0))) | (uint32_t(uint16_t(int16_t(a1))) << 16));
      }
    }
  });
  const int64_t panels = (N + Int16Panels::kPanel - 1) / Int16Panels::kPanel;
  parallelFor(panels, rows * K * N, [&](int64_t pb, int64_t pe) {
    for(int64_t p = pb; p < pe; ++p) {
      const int64_t n0 = p * Int16Panels::kPanel, cols = std::min<int64_t>(Int16Panels::kPanel, N - n0);
      for(int64_t j0 = 0; j0 < J; j0 += kPairsPerBlock) {
        const int64_t jn = std::min(kPairsPerBlock, J - j0);
        const int16_t* block = b.data.data() + (p * J + j0) * 2 * Int16Panels::kPanel;
        const bool acc = j0 > 0;
        int64_t r = 0;
        for(; r + 2 <= rows; r += 2)
          tile<2>(pairs.data() + r * J + j0, J, block, jn, acc, y + r * ldy + n0, ldy, cols);
        if(r < rows) tile<1>(pairs.data() + r * J + j0, J, block, jn, acc, y + r * ldy + n0, ldy, cols);
      }
    }
  });
#else
  (void)a, (void)lda, (void)azp, (void)y;
#endif
}

}  // namespace

void int16Gemm(const uint8_t* a, int64_t lda, int32_t azp, int64_t rows, const Int16Panels& b, int32_t* y,
               int64_t ldy) {
  int16GemmT(a, lda, azp, rows, b, y, ldy);
}
void int16Gemm(const int8_t* a, int64_t lda, int32_t azp, int64_t rows, const Int16Panels& b, int32_t* y,
               int64_t ldy) {
  int16GemmT(a, lda, azp, rows, b, y, ldy);
}

}  // namespace host
}  // namespace onyx
