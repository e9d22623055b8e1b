// Float32 products of a few rows by a matrix that is reused many times (a
// recurrent layer's R at every step, a constant weight): the matrix is packed
// once into panels of kPanel columns, each [K, kPanel] contiguous, and every
// product streams the panels through an AVX2/FMA kernel of up to 4 rows. On a
// Zen 3 core (AVX2) oneDNN's sgemm ran 8 x 256 by 256 x 1024 at about 40% of
// the FMA peak, repacking the matrix on every call; this kernel at 75-95%.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace onyx {
namespace host {

struct FewRowsPacked {
  static constexpr int64_t kPanel = 24;  // columns per panel: three AVX2 vectors
  int64_t K = 0, N = 0;
  std::vector<float> panels;  // ceil(N / kPanel) panels of [K, kPanel], zeros past N
};

// Whether this CPU can run fewRowsGemm (AVX2 and FMA).
bool fewRowsGemmRuns();
// Whether kernels should use it for M rows: 1 to 64 rows on a CPU that runs
// it and has no AVX-512 (measured only there; with AVX-512 oneDNN's sgemm
// stays).
bool fewRowsGemmTakes(int64_t M);

// Packs op(B) [K, N]: B is stored [N, K] when transB (a layer's weight
// W [out, in] for x W^T), [K, N] otherwise; ldb its row stride.
FewRowsPacked fewRowsPack(const float* B, int64_t ldb, bool transB, int64_t K, int64_t N);

// The same, for a matrix that stays unchanged while the result is held (a
// model's constant): one packing per matrix in the process, shared by every
// holder (the graphs a Session builds for different input shapes each ask
// for it) while any holds it. Packing keeps a second copy of the matrix.
std::shared_ptr<const FewRowsPacked> fewRowsPackShared(const float* B, int64_t ldb, bool transB, int64_t K,
                                                       int64_t N);

// C [M, N] (row stride ldc) = A [M, K] (row stride lda) times the packed
// matrix, plus C itself when accumulate. The panels are split over the
// threads (on the calling thread inside a parallel region).
void fewRowsGemm(int64_t M, const float* A, int64_t lda, const FewRowsPacked& B, bool accumulate, float* C,
                 int64_t ldc);

}  // namespace host
}  // namespace onyx
