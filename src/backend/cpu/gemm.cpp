#include <onyx/backend/cpu/gemm.h>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <omp.h>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cpu/functional.h>

namespace onyx {
namespace host {

namespace {

// OpenBLAS runs a GEMM on one thread up to this many multiply-adds
// (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD in its interface/gemm.c), so
// below it our own threads over the batch are the only parallelism there is.
constexpr int64_t kBlasSingleThreadWork = 65536 * 4;

// BLAS takes int dimensions.
void checkBlasDims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t lim = INT32_MAX;
  ONYX_CHECK(M <= lim && N <= lim && K <= lim && lda <= lim && ldb <= lim && ldc <= lim,
             "gemm: dimensions ", M, "x", K, "x", N, " exceed the BLAS int range");
}

// Loop GEMM for types BLAS does not have. The k-before-j order reads rows of
// B and C contiguously; one accumulator row per output row keeps float16
// sums in float and integer sums in 64 bits.
template <class T>
void loopGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
              const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  using Acc = std::conditional_t<std::is_floating_point<typename ComputeOf<T>::type>::value,
                                 typename ComputeOf<T>::type, AccOf<T>>;
  using Scale = std::conditional_t<std::is_floating_point<Acc>::value, Acc, double>;
  // acc + a * b; integer sums wrap (two's complement, as numpy's), where the
  // signed overflow was undefined (found by the fuzzer: int64 MatMul).
  auto mac = [](Acc s, Acc a, Acc b) {
    if constexpr(std::is_floating_point<Acc>::value) return s + a * b;
    else return functional::wrapAdd(s, functional::wrapMul(a, b));
  };
  parallelFor(M, M * N * (K + 1), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(static_cast<size_t>(N));
    for(int64_t i = b; i < e; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for(int64_t k = 0; k < K; ++k) {
        Acc a = static_cast<Acc>(load(A, transA ? k * lda + i : i * lda + k));
        if(!transB) {
          const T* row = B + k * ldb;
          for(int64_t j = 0; j < N; ++j) acc[j] = mac(acc[j], a, static_cast<Acc>(load(row, j)));
        } else {
          for(int64_t j = 0; j < N; ++j) acc[j] = mac(acc[j], a, static_cast<Acc>(load(B, j * ldb + k)));
        }
      }
      T* c = C + i * ldc;
      if constexpr(!std::is_floating_point<Acc>::value) {
        // Exact (wrapping) integer result in the common case, no trip through double.
        if(alpha == 1 && beta == 0) {
          for(int64_t j = 0; j < N; ++j) c[j] = static_cast<T>(acc[j]);
          continue;
        }
      }
      for(int64_t j = 0; j < N; ++j) {
        Scale v = static_cast<Scale>(alpha) * static_cast<Scale>(acc[j]);
        if(beta != 0) v += static_cast<Scale>(beta) * static_cast<Scale>(load(c, j));
        if constexpr(std::is_floating_point<Acc>::value) store(c, j, v);
        else c[j] = castFromDouble<T>(static_cast<double>(v));
      }
    }
  });
}

// C = alpha * op(A) op(B) + beta * C for M == 1 or N == 1, as one BLAS GEMV
// over the matrix operand (row-major, so a transposed operand is GEMV's Trans).
template <class T>
void gemv(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  auto blas = [](bool trans, int64_t rows, int64_t cols, T al, const T* mat, int64_t ld, const T* x, int64_t incx,
                 T be, T* y, int64_t incy) {
    auto t = trans ? CblasTrans : CblasNoTrans;
    int r = static_cast<int>(rows), c = static_cast<int>(cols), l = static_cast<int>(ld);
    int ix = static_cast<int>(incx), iy = static_cast<int>(incy);
    if constexpr(std::is_same<T, float>::value) cblas_sgemv(CblasRowMajor, t, r, c, al, mat, l, x, ix, be, y, iy);
    else cblas_dgemv(CblasRowMajor, t, r, c, al, mat, l, x, ix, be, y, iy);
  };
  if(M == 1) {
    // c[N] = op(B)^T a: B stored [N, K] (transB) or [K, N]; a's elements
    // step by lda when A is stored [K, 1].
    int64_t incA = transA ? lda : 1;
    if(transB) blas(false, N, K, alpha, B, ldb, A, incA, beta, C, 1);
    else blas(true, K, N, alpha, B, ldb, A, incA, beta, C, 1);
  } else {
    // c[M] (stride ldc) = op(A) b: A stored [M, K] or [K, M] (transA); b's
    // elements step by ldb when B is stored [K, 1].
    int64_t incB = transB ? 1 : ldb;
    if(transA) blas(true, K, M, alpha, A, lda, B, incB, beta, C, ldc);
    else blas(false, M, K, alpha, A, lda, B, incB, beta, C, ldc);
  }
}

// Whether a float32 product of this shape goes to OpenBLAS rather than
// oneDNN: on a CPU without AVX-512 whose model OpenBLAS knows (its core is
// one with AVX2 kernels, not a fallback such as Prescott), for 128 rows or
// more and K and N of 256 or more. Alternating timings on one core of a Zen
// 3 EPYC (AVX2), OpenBLAS 0.3.21's Zen kernels against oneDNN 2.6's sgemm:
// 128 x 768 by 768 x 3072 8.6 vs 15.1 ms (BERT-base's up-projection; the
// encoder at batch 1: 365 vs 422 ms), 32 x 1024 by 1024 x 1024 1.22 vs 1.71,
// 64 x 512 by 512 x 512 0.45 vs 0.56, 256^3 0.40 vs 0.44, 1024 rows even;
// oneDNN ahead for a K or N below 256 (512 x 64 by 64 x 128: 0.15 vs 0.12;
// 64 x 512 by 512 x 10) and for few rows (8 x 256 by 256 x 1024: 0.13 vs
// 0.11). At 64 rows the models' A x B^T layers were faster through oneDNN's
// matmul primitive on 2 threads (the MLP at batch 64, alternating: 0.77-0.79
// vs 0.77-0.89 ms), so they stay there. With AVX-512 oneDNN stays (see
// gemmImpl).
bool openblasTakes(int64_t M, int64_t N, int64_t K) {
  static const bool avx2Blas = [] {
    const unsigned isa = unsigned(dnnl_get_effective_cpu_isa());
    if(isa & unsigned(dnnl_cpu_isa_avx512_core) & ~unsigned(dnnl_cpu_isa_avx2)) return false;
    const std::string core = openblas_get_corename();
    for(const char* good : {"Haswell", "Zen", "SkylakeX", "CooperLake", "SapphireRapids"})
      if(core == good) return true;
    return false;
  }();
  return avx2Blas && M >= 128 && N >= 256 && K >= 256;
}

template <class T>
void gemmImpl(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
              const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  if(M == 0 || N == 0) return;
  if constexpr(std::is_same<T, float>::value || std::is_same<T, double>::value) {
    if(K == 0) {
      // The empty product: BLAS would reject lda = K = 0 as an invalid
      // leading dimension instead of computing it.
      for(int64_t i = 0; i < M; ++i)
        for(int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? T(0) : static_cast<T>(beta * C[i * ldc + j]);
      return;
    }
    checkBlasDims(M, N, K, lda, ldb, ldc);
    if constexpr(std::is_same<T, float>::value) {
      // Float32 products go to oneDNN's sgemm (but see openblasTakes),
      // which picks its kernels from the CPU's instruction sets. OpenBLAS
      // picks them from a table of CPU models: Debian's 0.3.21 does not know
      // Emerald Rapids (family 6 model 207) and falls back to its Prescott
      // (SSE3) kernels, 15 GFLOP/s
      // on one core where oneDNN's AVX-512 sgemm gives 86 (128 x 768 by
      // 768 x 3072). With OpenBLAS's right kernels (OPENBLAS_CORETYPE=
      // SkylakeX) oneDNN was still as fast or faster at every shape tried,
      // matrix-vector products included (2 threads: 149 vs 122 GFLOP/s on
      // that shape; 4 x 784 by 784 x 512: 38 vs 123 us; a GEMV streams the
      // matrix once either way); on Zen 3 the two were even at 128 rows and
      // more, and oneDNN ahead below (8 x 256 by 256 x 1024: 76 vs 98 us on 1
      // thread). The price: oneDNN generates its kernels on the first call
      // in a process, about 20 ms once. OpenBLAS stays for float64 and for
      // ONYX_DNNL=0.
      if(dnnlEnabled() && !openblasTakes(M, N, K)) {
        // A by B transposed (a linear layer's x W^T, ONNX Gemm's transB) of
        // 16 rows or more goes to oneDNN's matmul primitive (brgemm),
        // cached per shape: alternating timings on 2 threads of an Emerald
        // Rapids Xeon gave it 1.06-1.6x sgemm's speed there (256 x 2048 by
        // 2048 x 2048: 234 vs 207 GFLOP/s; 128 x 3072 by 3072 x 768: 138 vs
        // 97) and even elsewhere but for fewer rows (1 x 768 by 768 x 768:
        // 14 vs 37), while NN and TN shapes were even or favoured sgemm
        // (2048 x 256 by 256 x 2048 TN: 190 vs 231). It also spares the
        // first call sgemm's 30 ms of kernel generation for this case.
        if(transB && !transA && M >= 16 &&
           dnnlMatmulF32(false, true, M, N, K, static_cast<float>(alpha), A, lda, B, ldb, static_cast<float>(beta),
                         C, ldc))
          return;
        // beta = 0: oneDNN's sgemm does not read C (checked with a C of
        // NaNs), so no pass clears it first.
        if(dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, static_cast<float>(alpha), A, lda, B, ldb,
                      static_cast<float>(beta), C, ldc) == dnnl_success)
          return;
      }
    }
    if(M == 1 || N == 1) {
      // A matrix-vector product (a recurrent step at batch 1, a linear layer
      // on one sample): GEMM would pack the whole matrix on every call, which
      // costs more than the product itself; GEMV streams it once.
      if(beta == 0) {
        // GEMV scales y by beta, and 0 * NaN is NaN: clear it, as GEMM's
        // contract (C not read when beta is 0) asks.
        for(int64_t i = 0; i < M; ++i)
          for(int64_t j = 0; j < N; ++j) C[i * ldc + j] = T(0);
      }
      gemv(transA, transB, M, N, K, static_cast<T>(alpha), A, lda, B, ldb, static_cast<T>(beta), C, ldc);
      return;
    }
    auto ta = transA ? CblasTrans : CblasNoTrans;
    auto tb = transB ? CblasTrans : CblasNoTrans;
    int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    if constexpr(std::is_same<T, float>::value)
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(alpha), A, static_cast<int>(lda), B,
                  static_cast<int>(ldb), static_cast<float>(beta), C, static_cast<int>(ldc));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
                  static_cast<int>(ldc));
  } else {
    loopGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// Offsets i * stride for every i (stride >= 0), the form a bfloat16
// batched matmul takes in one call.
bool uniformOffsets(const int64_t* offs, int64_t batch, int64_t& stride) {
  stride = batch > 1 ? offs[1] - offs[0] : 0;
  if(stride < 0) return false;
  for(int64_t i = 1; i < batch; ++i)
    if(offs[i] - offs[0] != i * stride) return false;
  return true;
}

}  // namespace

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, double beta, T* C, int64_t ldc, bool bf16) {
  if constexpr(std::is_same<T, float>::value) {
    if(bf16 && dnnlMatmulBf16(transA, transB, 1, M, N, K, static_cast<float>(alpha), A, lda, 0, B, ldb, 0,
                      static_cast<float>(beta), C, ldc, 0))
      return;
  }
  (void)bf16;
  gemmImpl(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void gemmBatched(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                 const T* A, int64_t lda, const int64_t* aOffsets, const T* B, int64_t ldb,
                 const int64_t* bOffsets, double beta, T* C, int64_t ldc, const int64_t* cOffsets, bool bf16) {
  if(batch <= 0) return;
  if constexpr(std::is_same<T, float>::value) {
    int64_t sa = 0, sb = 0, sc = 0;
    if(bf16 && uniformOffsets(aOffsets, batch, sa) && uniformOffsets(bOffsets, batch, sb) &&
       uniformOffsets(cOffsets, batch, sc) && (sc > 0 || batch == 1) &&
       dnnlMatmulBf16(transA, transB, batch, M, N, K, static_cast<float>(alpha), A + aOffsets[0], lda, sa,
                      B + bOffsets[0], ldb, sb, static_cast<float>(beta), C + cOffsets[0], ldc, sc))
      return;
  }
  (void)bf16;
  int64_t work = M * N * K;
  auto one = [&](int64_t i) {
    gemmImpl(transA, transB, M, N, K, alpha, A + aOffsets[i], lda, B + bOffsets[i], ldb, beta, C + cOffsets[i], ldc);
  };
  // Products of up to this many multiply-adds split better over the batch
  // than inside one call: BERT-base's attention, 12 heads of 128 x 64 by
  // 64 x 128 (1M each), ran 7.4 ms on 1 thread and 6.5 ms on 2 one head at
  // a time through oneDNN's sgemm.
  constexpr int64_t kBatchSplitWork = int64_t(1) << 24;
  const bool splitBatch = std::is_same<T, float>::value && dnnlEnabled() && batch >= numThreads() &&
                          work <= kBatchSplitWork;
  if(batch > 1 && (work < kBlasSingleThreadWork || splitBatch)) {
    // Each call is single-threaded in BLAS at this size; a nested region
    // of the loop fallback runs on the calling thread (OpenMP nesting is off),
    // and so does oneDNN's sgemm inside a parallel region.
    parallelFor(batch, batch * work, [&](int64_t b, int64_t e) {
      for(int64_t i = b; i < e; ++i) one(i);
    });
  } else {
    for(int64_t i = 0; i < batch; ++i) one(i);
  }
}

#define ONYX_GEMM_INSTANTIATE(T)                                                                                  \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, double, const T*, int64_t, const T*, int64_t,     \
                        double, T*, int64_t, bool);                                                               \
  template void gemmBatched<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, double, const T*, int64_t,        \
                               const int64_t*, const T*, int64_t, const int64_t*, double, T*, int64_t,          \
                               const int64_t*, bool);

ONYX_GEMM_INSTANTIATE(float)
ONYX_GEMM_INSTANTIATE(double)
ONYX_GEMM_INSTANTIATE(float16)
ONYX_GEMM_INSTANTIATE(bfloat16)
ONYX_GEMM_INSTANTIATE(int8_t)
ONYX_GEMM_INSTANTIATE(int16_t)
ONYX_GEMM_INSTANTIATE(int32_t)
ONYX_GEMM_INSTANTIATE(int64_t)
ONYX_GEMM_INSTANTIATE(uint8_t)
ONYX_GEMM_INSTANTIATE(uint16_t)
ONYX_GEMM_INSTANTIATE(uint32_t)
ONYX_GEMM_INSTANTIATE(uint64_t)

#undef ONYX_GEMM_INSTANTIATE

SgemmWarmUp::SgemmWarmUp() {
  static std::atomic<bool> started{false};
  if(!dnnlEnabled() || started.exchange(true)) return;
  t_ = std::thread([] {
    omp_set_num_threads(1);  // this thread's own regions: no second pool of workers
    // 64^3 takes the kernel-generating path (a 1x1x1 product did not).
    std::vector<float> a(64 * 64, 0.f), c(64 * 64);
    dnnl_sgemm('N', 'N', 64, 64, 64, 1.f, a.data(), 64, a.data(), 64, 0.f, c.data(), 64);
  });
}

SgemmWarmUp::~SgemmWarmUp() {
  if(t_.joinable()) t_.join();
}

}  // namespace host
}  // namespace onyx
