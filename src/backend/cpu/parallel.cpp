#include <onyx/backend/cpu/parallel.h>

#include <cblas.h>

namespace onyx {
namespace host {

namespace {
int gThreads = 0;  // 0: OpenMP's default
}

void setNumThreads(int n) {
  gThreads = n > 0 ? n : 0;
  // OpenBLAS (Debian's pthread build) keeps its own pool: without this it
  // would run its threads beside ours and oversubscribe the cores.
  if(n > 0) openblas_set_num_threads(n);
}

int numThreads() {
#ifdef _OPENMP
  return gThreads > 0 ? gThreads : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace host
}  // namespace onyx
