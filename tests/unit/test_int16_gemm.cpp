// host::int16Gemm (backend/cpu/int16_gemm.h): the exact product of 8-bit
// integers without VNNI, against int64 sums, on the shapes its blocking has
// edges at: odd rows (a one-row tail), K odd (a half pair) and past one
// block of pairs, N not a multiple of the 32-column panel, values at the
// ends of the 8-bit ranges.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <onyx/backend/cpu/int16_gemm.h>
#include <onyx/backend/cpu/parallel.h>

namespace onyx {
namespace {

template <class A>
void expectExact(int64_t rows, int64_t K, int64_t N, int32_t azp, uint32_t seed) {
  std::mt19937 rng(seed);
  // B - b_zp at its ends (+-255) and in between; A at its ends too.
  std::vector<int32_t> b(size_t(K * N));
  for(auto& v : b) v = (rng() % 4 == 0) ? ((rng() & 1) ? 255 : -255) : int32_t(rng() % 511) - 255;
  std::vector<A> a(size_t(rows * (K + 3)));  // lda = K + 3: rows not packed
  const int lo = std::is_signed<A>::value ? -128 : 0, hi = std::is_signed<A>::value ? 127 : 255;
  for(auto& v : a) v = A((rng() % 3 == 0) ? ((rng() & 1) ? hi : lo) : lo + int(rng() % uint32_t(hi - lo + 1)));
  // Row 0 of A at its top and column 0 of B at 255: the largest sums there.
  for(int64_t k = 0; k < K; ++k) {
    a[size_t(k)] = A(hi);
    b[size_t(k * N)] = 255;
  }
  const host::Int16Panels p = host::Int16Panels::pack(b.data(), K, N);
  std::vector<int32_t> y(size_t(rows * (N + 5)), -7);  // ldy = N + 5: what lies past N stays
  host::int16Gemm(a.data(), K + 3, azp, rows, p, y.data(), N + 5);
  int64_t most = 0;
  for(int64_t r = 0; r < rows; ++r) {
    for(int64_t n = 0; n < N; ++n) {
      int64_t want = 0;
      for(int64_t k = 0; k < K; ++k) want += (int64_t(a[size_t(r * (K + 3) + k)]) - azp) * b[size_t(k * N + n)];
      ASSERT_EQ(y[size_t(r * (N + 5) + n)], want) << "row " << r << " column " << n << " of " << rows << "x" << K
                                                  << "x" << N;
      most = std::max(most, want < 0 ? -want : want);
    }
    for(int64_t n = N; n < N + 5; ++n) {
      ASSERT_EQ(y[size_t(r * (N + 5) + n)], -7) << "wrote past N at row " << r;
    }
  }
  if(K >= 300) {
    EXPECT_GT(most, int64_t(1) << 24) << "no sum past float32's exact range: the check would be weak";
  }
}

TEST(Int16Gemm, ExactOnEveryEdgeOfItsBlocking) {
  if(!host::int16GemmFits(1)) GTEST_SKIP() << "no AVX2 on this CPU: int16Gemm does not run (callers check int16GemmFits)";
  const int before = host::numThreads();
  for(int threads : {1, 2}) {
    host::setNumThreads(threads);
    expectExact<uint8_t>(5, 301, 70, 0, 1);     // odd rows, odd K, partial panel
    expectExact<int8_t>(4, 600, 96, -128, 2);   // K past two blocks of 128 pairs, whole panels
    expectExact<uint8_t>(1, 1, 1, 255, 3);      // one of everything
    expectExact<int8_t>(3, 257, 33, 127, 4);    // a block's last pair half full, one column past a panel
    expectExact<uint8_t>(7, 0, 40, 0, 5);       // K = 0: zeros
  }
  host::setNumThreads(before);
}

TEST(Int16Gemm, FitsOnlyWhileTheSumsFitInt32) {
  if(!host::int16GemmFits(1)) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t most = (int64_t(1) << 31) / (255 * 255);  // K * 255^2 < 2^31
  EXPECT_TRUE(host::int16GemmFits(most - 1));
  EXPECT_FALSE(host::int16GemmFits(most));
  EXPECT_FALSE(host::int16GemmFits(-1));
}

}  // namespace
}  // namespace onyx
