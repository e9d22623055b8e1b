// Exact products of 8-bit integers on AVX2 CPUs without VNNI, where
// oneDNN's int8 kernels add pairs of u8 x s8 products in saturating int16
// (vpmaddubsw) and so are exact only for weights within [-64, 64].
//
// y [rows, N] (int32) = (A - a_zp) . B, A 8-bit [rows, K], B [K, N] given
// as int16 values within [-255, 255] (8-bit weights less their zero
// points). vpmaddwd multiplies a pair of (a - a_zp) by a pair of B's rows
// and adds the two products in int32: exact for any 8-bit values, and so is
// the sum while K * 255 * 255 < 2^31 (int16GemmFits). Its rate per
// instruction is half of vpmaddubsw's, without the second instruction and
// the add the int8 kernels need to widen their int16 sums: about the speed
// of oneDNN's int8 matmul, and half the time of the two int8 products that
// full-range weights need there.
#pragma once

#include <cstdint>
#include <vector>

namespace onyx {
namespace host {

// B [K, N] as panels of kInt16Panel columns, each [J = ceil(K / 2), 32, 2]:
// its columns' pairs of rows (2j, 2j + 1) interleaved, zeros after an odd K
// and past N.
struct Int16Panels {
  static constexpr int64_t kPanel = 32;
  int64_t K = 0, N = 0, J = 0;
  std::vector<int16_t> data;
  // From B's values, row-major [K, N]; each within [-255, 255].
  template <class T>
  static Int16Panels pack(const T* b, int64_t K, int64_t N);
  bool empty() const { return data.empty(); }
};

// True when this CPU runs int16Gemm (AVX2) and K's sums fit int32.
bool int16GemmFits(int64_t K);

// y[r * ldy + n] = sum_k (a[r * lda + k] - azp) * B[k, n] for r < rows,
// n < N; A uint8 or int8. Threads over the panels (host::parallelFor); one
// summation order whatever the thread count (integers: exact anyway).
void int16Gemm(const uint8_t* a, int64_t lda, int32_t azp, int64_t rows, const Int16Panels& b, int32_t* y,
               int64_t ldy);
void int16Gemm(const int8_t* a, int64_t lda, int32_t azp, int64_t rows, const Int16Panels& b, int32_t* y,
               int64_t ldy);

}  // namespace host
}  // namespace onyx
