// Row-major GEMM on the CPU:  C = alpha * op(A) * op(B) + beta * C
// with op(A) [M, K], op(B) [K, N], C [M, N]. A is stored [M, K] (transA false)
// or [K, M] (transA true) with row stride lda; likewise B with ldb, C with ldc.
// float and double go to OpenBLAS; float16/bfloat16 compute in float and the
// integer types in their 64-bit accumulator with plain loops. When beta is 0,
// C is not read (it may hold garbage or NaN).
//
// bf16 (float only, ComputePrecision::bfloat16): A and B are rounded to
// bfloat16 and the products summed in float32 (oneDNN's matmul, AMX or
// AVX512_BF16), where the CPU has bfloat16 instructions and the call is not
// inside a parallel region; else, and for the other types, it is ignored.
#pragma once
#include <cstdint>
#include <thread>

namespace onyx {
namespace host {

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, double beta, T* C, int64_t ldc, bool bf16 = false);

// `batch` independent GEMMs of one size; matrix i uses A + aOffsets[i],
// B + bOffsets[i], C + cOffsets[i] (offsets in elements, so broadcast batch
// dims simply repeat an offset). Small matrices are spread over threads; big
// ones run one after the other and let the threaded BLAS split each. With
// bf16, offsets that step evenly (i * stride) are one bfloat16 matmul.
template <class T>
void gemmBatched(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                 const T* A, int64_t lda, const int64_t* aOffsets, const T* B, int64_t ldb,
                 const int64_t* bOffsets, double beta, T* C, int64_t ldc, const int64_t* cOffsets,
                 bool bf16 = false);

// While it lives, oneDNN's sgemm kernels are generated on a thread of its
// own (one OpenMP thread, so no second pool): 20-30 ms that the first
// float32 GEMM of a process would otherwise wait for (a Zen 3 EPYC, AVX2),
// overlapped with what the caller does meanwhile (Model::load reads and
// parses the file). Once per process, only while oneDNN is on; a GEMM
// that comes first simply waits (oneDNN generates once). The destructor
// joins the thread: none outlives its scope (a process exiting, or forking,
// under a running generation crashed or could hang).
class SgemmWarmUp {
public:
  SgemmWarmUp();
  ~SgemmWarmUp();
  SgemmWarmUp(const SgemmWarmUp&) = delete;
  SgemmWarmUp& operator=(const SgemmWarmUp&) = delete;

private:
  std::thread t_;
};

}  // namespace host
}  // namespace onyx
