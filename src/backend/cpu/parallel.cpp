#include <onyx/backend/cpu/parallel.h>

#include <cblas.h>

#include <thread>

#include <onyx/core/error.h>

namespace onyx {
namespace host {

namespace {
// Per calling thread, like OpenMP's own nthreads setting: two sessions on two
// server threads each keep their own count. 0: OpenMP's default.
thread_local int gThreads = 0;

// OpenMP's default thread count as the process started (OMP_NUM_THREADS or
// every core), what setNumThreads(0) goes back to.
int defaultThreads() {
#ifdef _OPENMP
  static const int n = omp_get_max_threads();
  return n;
#else
  return 1;
#endif
}
const int gReadAtLoad = defaultThreads();  // before anything sets a count
}  // namespace

void setNumThreads(int n) {
  ONYX_CHECK(n <= kMaxThreads, "threads = ", n, ": at most ", kMaxThreads, " (this machine has ",
             std::thread::hardware_concurrency(), " hardware threads)");
  (void)gReadAtLoad;
  gThreads = n > 0 ? n : 0;
  // BLAS (OpenBLAS's OpenMP build) and oneDNN size their parallel regions
  // from OpenMP's default; our kernels pass num_threads explicitly. n <= 0
  // puts back the default (OpenMP keeps a count once set on a thread).
  const int t = n > 0 ? n : defaultThreads();
#ifdef _OPENMP
  omp_set_num_threads(t);
#endif
  openblas_set_num_threads(t);
}

int numThreads() {
#ifdef _OPENMP
  return gThreads > 0 ? gThreads : omp_get_max_threads();
#else
  return 1;
#endif
}

bool blasIsOpenMP() {
  // OPENBLAS_OPENMP (2) when the loaded libopenblas is the OpenMP build; the
  // pthreads build (1) would spin its own pool beside libgomp's.
  return openblas_get_parallel() == 2;
}

}  // namespace host
}  // namespace onyx
