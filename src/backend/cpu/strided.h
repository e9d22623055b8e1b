// The strided copy of the CPU kernels that move elements (transpose, slice,
// concat), and its plan, shared with the GPU's (backend/cuda/copy.cu):
//   dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of dims
// with strides in elements (possibly negative). Size-1 dims are dropped and
// dims contiguous for both sides merged, so a copy dense on both sides has
// one dim.
#pragma once
#include <cstddef>
#include <cstdint>

#include <onyx/core/error.h>

namespace onyx {
namespace host {

struct StridedPlan {
  int n = 0;                       // dims after merging (at least 1)
  int64_t d[16], a[16], b[16];     // dims, dst strides, src strides
  int64_t total = 1;               // elements to copy

  StridedPlan(const int64_t* ds, const int64_t* ss, const int64_t* dims, int rank) {
    ONYX_CHECK(rank <= 16, "tensors of rank ", rank, " are not supported (at most 16)");
    for(int i = 0; i < rank; ++i) {
      total *= dims[i];
      if(dims[i] == 1) continue;
      if(n > 0 && a[n - 1] == ds[i] * dims[i] && b[n - 1] == ss[i] * dims[i]) {
        d[n - 1] *= dims[i];
        a[n - 1] = ds[i];
        b[n - 1] = ss[i];
      } else {
        d[n] = dims[i];
        a[n] = ds[i];
        b[n] = ss[i];
        ++n;
      }
    }
    if(n == 0) {
      d[0] = total;  // 1, or 0 for an empty copy
      a[0] = b[0] = 1;
      n = 1;
    }
  }
  // dst and src offsets of the i-th element copied (on either device).
#ifdef __CUDACC__
  __host__ __device__
#endif
  void offsets(int64_t i, int64_t& od, int64_t& os) const {
    od = 0;
    os = 0;
    for(int k = n - 1; k >= 0; --k) {
      int64_t idx = i % d[k];
      i /= d[k];
      od += idx * a[k];
      os += idx * b[k];
    }
  }
};

// dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of `dims`,
// elements of `esize` bytes, both buffers on the host (strided.cpp).
void copyStrided(void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims, int rank,
                 size_t esize);

}  // namespace host
}  // namespace onyx
