// The CPU backend's process-wide settings: one thread pool (OpenBLAS's
// OpenMP build, on the same libgomp as our kernels and oneDNN).
#include <gtest/gtest.h>

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

}  // namespace onyx
