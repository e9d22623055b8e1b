// The CPU backend's process-wide settings: one thread pool (OpenBLAS's
// OpenMP build, on the same libgomp as our kernels and oneDNN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include <onyx/backend/cpu/functional.h>
#include <onyx/backend/cpu/parallel.h>

namespace onyx {

TEST(CpuBackend, BlasIsTheOpenMPBuild) {
  // The pthreads build (what Debian's alternatives prefer) would run a second
  // pool beside libgomp's; libonyx's RUNPATH must have picked the OpenMP one.
  EXPECT_TRUE(host::blasIsOpenMP());
}

TEST(CpuBackend, SetNumThreadsSetsThePool) {
  int before = host::numThreads();
  host::setNumThreads(1);
  EXPECT_EQ(host::numThreads(), 1);
#ifdef _OPENMP
  EXPECT_EQ(omp_get_max_threads(), 1);  // BLAS and oneDNN read this one
#endif
  host::setNumThreads(before);
  EXPECT_EQ(host::numThreads(), before);
}

// 0 puts back OpenMP's default as the process started, for our kernels and
// for BLAS and oneDNN (which read OpenMP's count), also after a count was
// set on this thread (OpenMP keeps that one).
TEST(CpuBackend, SetNumThreadsZeroRestoresTheDefault) {
  const int before = host::numThreads();
  host::setNumThreads(0);
  const int dflt = host::numThreads();
  host::setNumThreads(dflt == 1 ? 2 : 1);
  host::setNumThreads(0);
  EXPECT_EQ(host::numThreads(), dflt);
#ifdef _OPENMP
  EXPECT_EQ(omp_get_max_threads(), dflt);
#endif
  host::setNumThreads(before);
}

// Integer Pow is exact on every device (the double pow loses bits above
// 2^53, and nvcc's gave pow(3, 1) = 2 for integers) and wraps as the type.
TEST(CpuBackend, IntegerPowIsExactAndWraps) {
  int64_t r = 1;
  for(int k = 0; k < 39; ++k) r *= 3;  // 3^39 > 2^53
  EXPECT_EQ(functional::powOf<int64_t>(3, 39), r);
  EXPECT_NE(static_cast<int64_t>(std::pow(3.0, 39.0)), r);  // what the double path gave
  for(int64_t b = -3; b <= 3; ++b)
    for(int64_t e = 0; e <= 3; ++e) {
      int64_t want = 1;
      for(int64_t k = 0; k < e; ++k) want *= b;
      EXPECT_EQ(functional::powOf<int32_t>(static_cast<int32_t>(b), static_cast<int32_t>(e)), want) << b << "^" << e;
      EXPECT_EQ(functional::powOf<int8_t>(static_cast<int8_t>(b), static_cast<int8_t>(e)), want) << b << "^" << e;
    }
  EXPECT_EQ(functional::powOf<int8_t>(3, 5), static_cast<int8_t>(static_cast<uint8_t>(243)));  // wraps
  EXPECT_EQ(functional::powOf<uint16_t>(300, 2), static_cast<uint16_t>(90000 % 65536));
  EXPECT_EQ(functional::powOf<int32_t>(2, -1), 0);  // truncated, as the double pow converted back
  EXPECT_EQ(functional::powOf<int32_t>(-1, -3), -1);
  EXPECT_EQ(functional::powOf<int32_t>(1, -5), 1);
  EXPECT_EQ(functional::powOf<double>(2.0, 0.5), std::sqrt(2.0));
}

}  // namespace onyx
