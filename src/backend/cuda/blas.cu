// GPU GEMM (kernels.h): cuBLAS for the float types, a kernel for integers.
// Row-major C = op(A) . op(B) is column-major C^T = op(B)^T . op(A)^T, so
// cuBLAS gets the operands swapped and the same leading dimensions.
#include <onyx/backend/cuda/kernels.h>

#include <cublas_v2.h>
#include <cuda/std/limits>

#include <climits>
#include <mutex>
#include <vector>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

const char* statusName(cublasStatus_t s) {
  switch(s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

void check(cublasStatus_t s, const char* call, size_t dev) {
  ONYX_CHECK(s == CUBLAS_STATUS_SUCCESS, "gpu", dev, ": ", call, " failed: ", statusName(s));
}

// One cuBLAS handle per device for the process, bound to the device's
// stream (made on first use).
cublasHandle_t handle(size_t dev) {
  cudaStream_t s = launchOn(dev);
  thread_local std::vector<cublasHandle_t> seen;  // as the streams: the lock only the first time
  if(dev < seen.size() && seen[dev]) return seen[dev];
  if(seen.size() <= dev) seen.resize(dev + 1, nullptr);
  static std::mutex m;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(m);
  if(handles.size() <= dev) handles.resize(dev + 1, nullptr);
  if(!handles[dev]) {
    check(cublasCreate(&handles[dev]), "cublasCreate", dev);
    check(cublasSetStream(handles[dev], s), "cublasSetStream", dev);
  }
  return seen[dev] = handles[dev];
}

struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool f64;  // alpha/beta as double (else float)
};

// The cuBLAS types of t, or false for types cuBLAS does not multiply.
bool blasTypes(Type t, BlasTypes& b) {
  switch(t) {
    case Type::float32: b = {CUDA_R_32F, CUBLAS_COMPUTE_32F, false}; return true;
    case Type::float64: b = {CUDA_R_64F, CUBLAS_COMPUTE_64F, true}; return true;
    case Type::float16: b = {CUDA_R_16F, CUBLAS_COMPUTE_32F, false}; return true;
    case Type::bfloat16: b = {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false}; return true;
    default: return false;
  }
}

void checkDims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t lim = INT_MAX;
  ONYX_CHECK(M <= lim && N <= lim && K <= lim && lda <= lim && ldb <= lim && ldc <= lim, "gemm: dimensions ", M, "x",
             K, "x", N, " exceed cuBLAS's int range");
}

// Integer GEMM, one output element per index, summed in 64 bits; the
// result as host::gemm's loop stores it (wrapping when alpha is 1 and beta
// 0, else scaled in double and saturated).
template <class T>
struct IntGemmBody {
  using Acc = host::AccOf<T>;
  bool transA, transB;
  int64_t N, K, lda, ldb, ldc;
  double alpha, beta;
  const T* A;
  const T* B;
  T* C;
  __device__ void operator()(int64_t idx) const {
    int64_t i = idx / N, j = idx % N;
    Acc acc = 0;
    for(int64_t k = 0; k < K; ++k)
      acc += static_cast<Acc>(A[transA ? k * lda + i : i * lda + k]) * static_cast<Acc>(B[transB ? j * ldb + k : k * ldb + j]);
    T* c = C + i * ldc + j;
    if(alpha == 1 && beta == 0) {
      *c = static_cast<T>(acc);
      return;
    }
    double v = alpha * static_cast<double>(acc);
    if(beta != 0) v += beta * static_cast<double>(*c);
    if(v != v) *c = T(0);
    else if(v <= static_cast<double>(::cuda::std::numeric_limits<T>::lowest())) *c = ::cuda::std::numeric_limits<T>::lowest();
    else if(v >= static_cast<double>(::cuda::std::numeric_limits<T>::max())) *c = ::cuda::std::numeric_limits<T>::max();
    else *c = static_cast<T>(v);
  }
};

void intGemm(size_t dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
             const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc) {
  dispatchNumeric(t, "gemm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(std::is_integral<T>::value) {
      IntGemmBody<T> body{transA, transB, N, K, lda, ldb, ldc, alpha, beta,
                          static_cast<const T*>(A), static_cast<const T*>(B), static_cast<T*>(C)};
      forEachOn(dev, body, M * N, "integer gemm");
    } else {
      ONYX_ASSERT(false, "intGemm on ", t);
    }
  });
}

// Scalars as cuBLAS reads them for the compute type.
struct Scalars {
  float fa, fb;
  double da, db;
  const void* alpha(bool f64) const { return f64 ? static_cast<const void*>(&da) : &fa; }
  const void* beta(bool f64) const { return f64 ? static_cast<const void*>(&db) : &fb; }
};

}  // namespace

void gemm(size_t dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
          const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc) {
  if(M == 0 || N == 0) return;
  BlasTypes bt;
  if(!blasTypes(t, bt)) return intGemm(dev, t, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  // Leading dims of at least 1: with K = 0 nothing is read, but cuBLAS
  // still checks them.
  lda = std::max<int64_t>(lda, 1);
  ldb = std::max<int64_t>(ldb, 1);
  checkDims(M, N, K, lda, ldb, ldc);
  Scalars s{static_cast<float>(alpha), static_cast<float>(beta), alpha, beta};
  check(cublasGemmEx(handle(dev), transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                     static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), s.alpha(bt.f64), B, bt.data,
                     static_cast<int>(ldb), A, bt.data, static_cast<int>(lda), s.beta(bt.f64), C, bt.data,
                     static_cast<int>(ldc), bt.compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx", dev);
}

void gemmBatched(size_t dev, Type t, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                 double alpha, const void* A, int64_t lda, const int64_t* aOffsets, const void* B, int64_t ldb,
                 const int64_t* bOffsets, double beta, void* C, int64_t ldc, const int64_t* cOffsets) {
  if(batch == 0 || M == 0 || N == 0) return;
  size_t esize = static_cast<size_t>(typeBits(t) / 8);
  auto at = [esize](const void* p, int64_t off) {
    return static_cast<const char*>(p) + off * static_cast<int64_t>(esize);
  };
  // Evenly spaced offsets: one strided-batched call.
  auto spacing = [batch](const int64_t* o, int64_t& step) {
    step = batch > 1 ? o[1] - o[0] : 0;
    for(int64_t i = 2; i < batch; ++i)
      if(o[i] - o[i - 1] != step) return false;
    return true;
  };
  int64_t sa, sb, sc;
  BlasTypes bt;
  if(blasTypes(t, bt) && spacing(aOffsets, sa) && spacing(bOffsets, sb) && spacing(cOffsets, sc) && batch <= INT_MAX) {
    lda = std::max<int64_t>(lda, 1);
    ldb = std::max<int64_t>(ldb, 1);
    checkDims(M, N, K, lda, ldb, ldc);
    Scalars s{static_cast<float>(alpha), static_cast<float>(beta), alpha, beta};
    check(cublasGemmStridedBatchedEx(handle(dev), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                     static_cast<int>(K), s.alpha(bt.f64), at(B, bOffsets[0]), bt.data,
                                     static_cast<int>(ldb), sb, at(A, aOffsets[0]), bt.data, static_cast<int>(lda), sa,
                                     s.beta(bt.f64), const_cast<char*>(at(C, cOffsets[0])), bt.data,
                                     static_cast<int>(ldc), sc, static_cast<int>(batch), bt.compute,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx", dev);
    return;
  }
  // Offsets with no common spacing (batch dims broadcast on both sides),
  // and integer types: one GEMM per matrix, in order on the stream.
  for(int64_t i = 0; i < batch; ++i)
    gemm(dev, t, transA, transB, M, N, K, alpha, at(A, aOffsets[i]), lda, at(B, bOffsets[i]), ldb, beta,
         const_cast<char*>(at(C, cOffsets[i])), ldc);
}

}  // namespace cuda
}  // namespace onyx
