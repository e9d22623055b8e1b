// GPU element-wise kernels from the same functors as the CPU's
// (src/backend/cpu/functional.h): cuda::elementwise<TOut, TIn...>(f, out,
// ins...) computes out[i] = f(out[i], ins[i]...) with ONNX/numpy
// broadcasting, like host::elementwise. A kernel is instantiated where it is
// used: a family file compiled by nvcc (ONYX_CUDA) that registers
// `.kernels(ops::unaryNumeric(sin(_2)))` gets the GPU kernel of that functor,
// with no list of instantiations anywhere.
//
// Only compiled by nvcc (include it under __CUDACC__).
#pragma once
#include <utility>

#include <cuda_runtime.h>

#include <onyx/backend/cpu/element.h>
#include <onyx/core/error.h>
#include <onyx/core/tensor.h>

namespace onyx {
namespace cuda {

// Element types the GPU kernels take so far (half types come with the mixed
// precision work).
template <class T>
constexpr bool kGpuType = !std::is_same<T, float16>::value && !std::is_same<T, bfloat16>::value;

template <class T, class V>
__device__ inline void storeDev(T* p, int64_t i, V v) {
  if constexpr(std::is_same<T, bool>::value) p[i] = v != V(0);
  else p[i] = static_cast<T>(v);
}

// out[i] = f(out[i], ins[i]...) for one flat output index i.
template <size_t K, class TOut, class F, class Idx, class... TIn>
struct ElementBody;
template <size_t K, class TOut, class F, size_t... I, class... TIn>
struct ElementBody<K, TOut, F, std::index_sequence<I...>, TIn...> {
  F f;
  TOut* out;
  host::BroadcastPlan<K> plan;
  const void* in[K];
  __device__ void operator()(int64_t i) const {
    int64_t off[K] = {};
    int64_t rem = i;
    for(int d = plan.rank - 1; d >= 0; --d) {
      int64_t idx = rem % plan.dims[d];
      rem /= plan.dims[d];
      for(size_t k = 0; k < K; ++k) off[k] += idx * plan.strides[k][d];
    }
    storeDev(out, i, f(out[i], static_cast<const TIn*>(in[I])[off[I]]...));
  }
};

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

template <class TOut, class... TIn, class F, class... Ts>
void elementwise(F f, TensorBase& out, const Ts&... ins) {
  static_assert(sizeof...(TIn) == sizeof...(Ts), "one C++ type per input tensor");
  constexpr size_t K = sizeof...(Ts);
  static_assert(K >= 1, "element-wise kernels take at least one input");
  ONYX_ASSERT(!out.onHost(), "cuda::elementwise on a host tensor");
  if constexpr(!(kGpuType<TOut> && (kGpuType<TIn> && ...))) {
    fail("element type ", out.type(), " is not supported on the GPU yet");
  } else {
    std::array<const Shape*, K> shapes{&ins.shape()...};
    host::BroadcastPlan<K> plan(out.shape(), shapes);
    if(plan.total == 0) return;
    using Body = ElementBody<K, TOut, F, std::make_index_sequence<K>, TIn...>;
    Body body{f, out.data<TOut>(), plan, {ins.raw()...}};
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((plan.total + threads - 1) / threads, 65535);
    forEachKernel<<<static_cast<unsigned>(blocks), threads>>>(body, plan.total);
    checkLaunch("elementwise");
  }
}

}  // namespace cuda
}  // namespace onyx
