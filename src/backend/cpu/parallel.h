// OpenMP helpers: split work only when it is big enough to pay for the threads.
#pragma once
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace onyx {
namespace host {

// Below this many elements a kernel runs on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

// The most threads a caller may ask for: more only oversubscribes the
// machine, and OpenMP ran out of stack creating 100000 of them.
constexpr int kMaxThreads = 1024;

// Number of threads kernels use (default: OpenMP's, i.e. all cores).
// One pool: every parallel region of Onyx, BLAS's and oneDNN's included, runs
// on libgomp's, so this sets all of them.
// n <= 0: OpenMP's default as the process started (OMP_NUM_THREADS or every
// core), also after a count was set; above kMaxThreads an onyx::Error.
void setNumThreads(int n);
int numThreads();
// True when the OpenBLAS loaded is its OpenMP build (one pool, not two).
bool blasIsOpenMP();

// Calls fn(begin, end) over [0, n) in contiguous blocks, in parallel when
// `work` (elements touched) is large.
template <class Fn>
void parallelFor(int64_t n, int64_t work, Fn&& fn) {
#ifdef _OPENMP
  int threads = numThreads();
  // Inside a parallel region (work already split across threads, e.g. a
  // bidirectional LSTM's two directions) it runs on the calling thread.
  if(work >= kParallelGrain && threads > 1 && n > 1 && !omp_in_parallel()) {
    int64_t blocks = n < threads ? n : threads;
#pragma omp parallel for num_threads(threads) schedule(static)
    for(int64_t b = 0; b < blocks; ++b) fn(n * b / blocks, n * (b + 1) / blocks);
    return;
  }
#endif
  (void)work;
  fn(int64_t(0), n);
}

}  // namespace host
}  // namespace onyx
