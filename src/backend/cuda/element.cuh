// GPU element-wise kernels from the same functors as the CPU's
// (src/backend/cpu/functional.h): cuda::elementwise<TOut, TIn...>(f, out,
// ins...) computes out[i] = f(out[i], ins[i]...) with ONNX/numpy
// broadcasting, like host::elementwise. A kernel is instantiated where it is
// used: a family file that registers `.kernel(ops::unaryNumeric(sin(_2)))`,
// compiled by nvcc into the CUDA plugin (ONYX_FUNCTOR_FAMILIES), gets the
// GPU kernel of that functor, with no list of instantiations anywhere.
//
// Only compiled by nvcc (include it under __CUDACC__).
#pragma once
#include <utility>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cuda/common.cuh>

namespace onyx {
namespace cuda {

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
    storeDev(out, i, f(loadDev(out, i), loadDev(static_cast<const TIn*>(in[I]), off[I])...));
  }
};

template <class TOut, class... TIn, class F, class... Ts>
void elementwise(F f, TensorBase& out, const Ts&... ins) {
  static_assert(sizeof...(TIn) == sizeof...(Ts), "one C++ type per input tensor");
  constexpr size_t K = sizeof...(Ts);
  static_assert(K >= 1, "element-wise kernels take at least one input");
  ONYX_ASSERT(!out.onHost(), "cuda::elementwise on a host tensor");
  std::array<const Shape*, K> shapes{&ins.shape()...};
  host::BroadcastPlan<K> plan(out.shape(), shapes);
  if(plan.total == 0) return;
  using Body = ElementBody<K, TOut, F, std::make_index_sequence<K>, TIn...>;
  forEach(out, Body{f, out.data<TOut>(), plan, {ins.raw()...}}, plan.total, "elementwise");
}

}  // namespace cuda
}  // namespace onyx
