#include <onyx/backend/cpu/few_rows_gemm.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/core/error.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONYX_FEW_ROWS_X86 1
#endif

namespace onyx {
namespace host {

namespace {

constexpr int64_t kPanel = FewRowsPacked::kPanel;

#ifdef ONYX_FEW_ROWS_X86
// R rows of A times one panel [K, 24]: 3 vectors of 8 columns per row, and
// U interleaved sets of accumulators over consecutive k (summed at the end)
// so that at least 9 FMA chains are in flight whatever R is (an FMA's
// latency is 4 cycles at 2 per cycle on the cores measured).
template <int R, int U>
__attribute__((target("avx2,fma"))) void panelRows(const float* A, int64_t lda, const float* p, int64_t K,
                                                   bool accumulate, float* C, int64_t ldc, int64_t cols) {
  __m256 acc[U][R][3];
#pragma GCC unroll 16
  for(int u = 0; u < U; ++u)
#pragma GCC unroll 4
    for(int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for(int j = 0; j < 3; ++j) acc[u][r][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for(; k + U <= K; k += U) {
#pragma GCC unroll 16
    for(int u = 0; u < U; ++u) {
      const float* pk = p + (k + u) * kPanel;
      const __m256 b0 = _mm256_loadu_ps(pk), b1 = _mm256_loadu_ps(pk + 8), b2 = _mm256_loadu_ps(pk + 16);
#pragma GCC unroll 4
      for(int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(A + r * lda + k + u);
        acc[u][r][0] = _mm256_fmadd_ps(a, b0, acc[u][r][0]);
        acc[u][r][1] = _mm256_fmadd_ps(a, b1, acc[u][r][1]);
        acc[u][r][2] = _mm256_fmadd_ps(a, b2, acc[u][r][2]);
      }
    }
  }
  for(; k < K; ++k) {
    const float* pk = p + k * kPanel;
    const __m256 b0 = _mm256_loadu_ps(pk), b1 = _mm256_loadu_ps(pk + 8), b2 = _mm256_loadu_ps(pk + 16);
#pragma GCC unroll 4
    for(int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
      acc[0][r][0] = _mm256_fmadd_ps(a, b0, acc[0][r][0]);
      acc[0][r][1] = _mm256_fmadd_ps(a, b1, acc[0][r][1]);
      acc[0][r][2] = _mm256_fmadd_ps(a, b2, acc[0][r][2]);
    }
  }
#pragma GCC unroll 16
  for(int u = 1; u < U; ++u)
#pragma GCC unroll 4
    for(int r = 0; r < R; ++r)
#pragma GCC unroll 3
      for(int j = 0; j < 3; ++j) acc[0][r][j] = _mm256_add_ps(acc[0][r][j], acc[u][r][j]);
#pragma GCC unroll 4
  for(int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    if(cols == kPanel) {
#pragma GCC unroll 3
      for(int j = 0; j < 3; ++j) {
        __m256 v = acc[0][r][j];
        if(accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(c + 8 * j));
        _mm256_storeu_ps(c + 8 * j, v);
      }
    } else {
      // The last panel: only its columns below N are C's.
      alignas(32) float t[kPanel];
#pragma GCC unroll 3
      for(int j = 0; j < 3; ++j) _mm256_store_ps(t + 8 * j, acc[0][r][j]);
      for(int64_t j = 0; j < cols; ++j) c[j] = accumulate ? c[j] + t[j] : t[j];
    }
  }
}

void panelAllRows(int64_t M, const float* A, int64_t lda, const float* p, int64_t K, bool accumulate, float* C,
                  int64_t ldc, int64_t cols) {
  int64_t r = 0;
  for(; r + 4 <= M; r += 4) panelRows<4, 1>(A + r * lda, lda, p, K, accumulate, C + r * ldc, ldc, cols);
  switch(M - r) {
    case 3: panelRows<3, 1>(A + r * lda, lda, p, K, accumulate, C + r * ldc, ldc, cols); break;
    case 2: panelRows<2, 2>(A + r * lda, lda, p, K, accumulate, C + r * ldc, ldc, cols); break;
    case 1: panelRows<1, 4>(A + r * lda, lda, p, K, accumulate, C + r * ldc, ldc, cols); break;
    default: break;
  }
}
#endif

}  // namespace

bool fewRowsGemmRuns() {
#ifdef ONYX_FEW_ROWS_X86
  static const bool runs = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return runs;
#else
  return false;
#endif
}

bool fewRowsGemmTakes(int64_t M) { return M >= 1 && M <= 64 && fewRowsGemmRuns() && vec::bestIsa() == vec::Isa::avx2; }

FewRowsPacked fewRowsPack(const float* B, int64_t ldb, bool transB, int64_t K, int64_t N) {
  FewRowsPacked out;
  out.K = K;
  out.N = N;
  const int64_t panels = (N + kPanel - 1) / kPanel;
  out.panels.assign(static_cast<size_t>(panels * K * kPanel), 0.f);
  for(int64_t q = 0; q < panels; ++q) {
    float* p = out.panels.data() + q * K * kPanel;
    const int64_t n0 = q * kPanel, cols = std::min(kPanel, N - n0);
    for(int64_t k = 0; k < K; ++k)
      for(int64_t j = 0; j < cols; ++j) p[k * kPanel + j] = transB ? B[(n0 + j) * ldb + k] : B[k * ldb + n0 + j];
  }
  return out;
}

std::shared_ptr<const FewRowsPacked> fewRowsPackShared(const float* B, int64_t ldb, bool transB, int64_t K,
                                                       int64_t N) {
  using Key = std::tuple<const float*, int64_t, bool, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::weak_ptr<const FewRowsPacked>> made;
  const Key key{B, ldb, transB, K, N};
  {
    std::lock_guard<std::mutex> lock(mu);
    if(auto p = made[key].lock()) return p;
  }
  // Packed outside the lock; two threads packing the same matrix at once
  // both pack it, and the later one's is kept.
  auto p = std::make_shared<const FewRowsPacked>(fewRowsPack(B, ldb, transB, K, N));
  std::lock_guard<std::mutex> lock(mu);
  for(auto it = made.begin(); it != made.end();) it = it->second.expired() ? made.erase(it) : std::next(it);
  made[key] = p;
  return p;
}

void fewRowsGemm(int64_t M, const float* A, int64_t lda, const FewRowsPacked& B, bool accumulate, float* C,
                 int64_t ldc) {
#ifdef ONYX_FEW_ROWS_X86
  ONYX_ASSERT(fewRowsGemmRuns() && M >= 0, "fewRowsGemm: ", M, " rows, or a CPU without AVX2 and FMA");
  const int64_t K = B.K, N = B.N, panels = (N + kPanel - 1) / kPanel;
  if(N == 0) return;
  if(K == 0) {
    if(!accumulate)
      for(int64_t r = 0; r < M; ++r) std::fill(C + r * ldc, C + r * ldc + N, 0.f);
    return;
  }
  parallelFor(panels, M * N * K, [&](int64_t lo, int64_t hi) {
    for(int64_t q = lo; q < hi; ++q)
      panelAllRows(M, A, lda, B.panels.data() + q * K * kPanel, K, accumulate, C + q * kPanel, ldc,
                   std::min(kPanel, N - q * kPanel));
  });
#else
  (void)M, (void)A, (void)lda, (void)B, (void)accumulate, (void)C, (void)ldc;
  ONYX_ASSERT(false, "fewRowsGemm: not built for this CPU");
#endif
}

}  // namespace host
}  // namespace onyx
