#include <onyx/backend/cpu/parallel.h>

namespace onyx {
namespace host {

namespace {
int gThreads = 0;  // 0: OpenMP's default
}

void setNumThreads(int n) { gThreads = n > 0 ? n : 0; }

int numThreads() {
#ifdef _OPENMP
  return gThreads > 0 ? gThreads : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace host
}  // namespace onyx
