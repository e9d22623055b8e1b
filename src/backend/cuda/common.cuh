// What the GPU kernel headers share: the element types they take, stores,
// the grid-stride loop, and launching on a tensor's device and stream.
//
// Only compiled by nvcc (include it under __CUDACC__).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include <onyx/backend/cuda/device.h>
#include <onyx/core/error.h>
#include <onyx/core/tensor.h>
#include <onyx/core/types.h>

namespace onyx {
namespace cuda {

// Element i in its compute type (float for float16/bfloat16), and stores
// converting through it, as host::load/store (backend/cpu/element.h).
template <class T>
__device__ inline typename ComputeOf<T>::type loadDev(const T* p, int64_t i) {
  return static_cast<typename ComputeOf<T>::type>(p[i]);
}
template <class T, class V>
__device__ inline void storeDev(T* p, int64_t i, V v) {
  if constexpr(std::is_same<T, bool>::value) p[i] = v != V(0);
  else p[i] = static_cast<T>(static_cast<typename ComputeOf<T>::type>(v));
}

// body(i) for i in [0, n), grid-stride.
template <class Body>
__global__ void forEachKernel(Body body, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for(int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

inline void checkLaunch(const char* what) {
  cudaError_t e = cudaGetLastError();
  ONYX_CHECK(e == cudaSuccess, what, ": kernel launch failed: ", cudaGetErrorString(e));
}

// Makes gpu<dev> current and returns the stream its work goes on.
inline cudaStream_t launchOn(size_t dev) {
  setCurrent(dev);
  return static_cast<cudaStream_t>(stream(dev));
}
// The same for the device of `t`.
inline cudaStream_t launchFor(const TensorBase& t) {
  ONYX_ASSERT(!t.onHost(), "a GPU kernel was handed a host tensor of shape ", t.shape());
  return launchOn(t.getDeviceId().no);
}

// Grid size for a grid-stride loop over n items with `threads` per block.
inline unsigned blocksFor(int64_t n, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 65535)));
}

// body(i) for i in [0, n) on gpu<dev>'s stream.
template <class Body>
void forEachOn(size_t dev, Body body, int64_t n, const char* what) {
  if(n <= 0) return;
  cudaStream_t s = launchOn(dev);
  const int threads = 256;
  forEachKernel<<<blocksFor(n, threads), threads, 0, s>>>(body, n);
  checkLaunch(what);
}
// The same on the device of `out`.
template <class Body>
void forEach(const TensorBase& out, Body body, int64_t n, const char* what) {
  ONYX_ASSERT(!out.onHost(), what, ": a GPU kernel was handed a host tensor of shape ", out.shape());
  forEachOn(out.getDeviceId().no, body, n, what);
}

}  // namespace cuda
}  // namespace onyx
