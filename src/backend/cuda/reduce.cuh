// GPU reductions with warp-level primitives, from the same reducers as the
// CPU's: cuda::reduceInto<T>(in, out, r) reduces `in` into `out` as
// host::reduceInto does (host::ReducePlan), where r has
//   Acc init                       the empty accumulator (a value, made on the host)
//   Acc fold(Acc acc, Acc element) folds one element in
//   Acc merge(Acc a, Acc b)        combines two partial results (associative)
//   finish(Acc acc, int64_t n)     the stored value
// Reducers are instantiated where they are used, like element-wise
// functors (a family file compiled by nvcc).
//
// Three shapes of work:
// - elements of one output contiguous, many of them: a block per output,
//   threads stride over the elements, partial results merge by warp
//   shuffles, then across warps through shared memory;
// - contiguous, fewer (< 1024): a warp per output, shuffles only;
// - strided (a reduction over outer axes, e.g. the batch): a thread per
//   output, so that neighbouring threads read neighbouring elements.
//
// Only compiled by nvcc (include it under __CUDACC__).
#pragma once
#include <cstring>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cuda/common.cuh>

namespace onyx {
namespace cuda {

// v from another lane of the warp, for any trivially copyable accumulator
// (moved as 32-bit words): from lane + arg (Down) or lane ^ arg (Xor).
enum class Shuffle { Down, Xor };
template <Shuffle kKind, class Acc>
__device__ inline Acc shuffle(const Acc& v, int arg) {
  static_assert(sizeof(Acc) % 4 == 0, "accumulators shuffle as 32-bit words");
  constexpr int kWords = sizeof(Acc) / 4;
  unsigned w[kWords];
  memcpy(w, &v, sizeof(Acc));
  for(int k = 0; k < kWords; ++k)
    w[k] = kKind == Shuffle::Down ? __shfl_down_sync(0xffffffffu, w[k], arg) : __shfl_xor_sync(0xffffffffu, w[k], arg);
  Acc r = v;
  memcpy(&r, w, sizeof(Acc));
  return r;
}

// Merges acc across the 32 lanes of a warp; every lane gets the result (r's
// merge must be commutative).
template <class Acc, class R>
__device__ inline Acc warpMergeAll(Acc acc, const R& r) {
  for(int m = 16; m > 0; m /= 2) acc = r.merge(acc, shuffle<Shuffle::Xor>(acc, m));
  return acc;
}

// Merges acc across the threads of a block (blockDim.x a multiple of 32);
// every thread gets the result. `scratch` is shared memory for 32 Accs.
template <class Acc, class R>
__device__ inline Acc blockMergeAll(Acc acc, const R& r, Acc* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  acc = warpMergeAll(acc, r);
  if(lane == 0) scratch[warp] = acc;
  __syncthreads();
  Acc all = lane < warps ? scratch[lane] : r.init;
  all = warpMergeAll(all, r);
  __syncthreads();  // scratch may be reused right after
  return all;
}

// Merges acc across the 32 lanes of a warp; lane 0 holds the result.
template <class Acc, class R>
__device__ inline Acc warpMerge(Acc acc, const R& r) {
  for(int d = 16; d > 0; d /= 2) acc = r.merge(acc, shuffle<Shuffle::Down>(acc, d));
  return acc;
}

template <class T, class TOut, class R>
__global__ void reduceBlockPerOutput(host::ReducePlan p, const T* in, TOut* out, R r) {
  using Acc = decltype(r.init);
  __shared__ alignas(16) unsigned char partial[32 * sizeof(Acc)];
  Acc* parts = reinterpret_cast<Acc*>(partial);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for(int64_t o = blockIdx.x; o < p.outN; o += gridDim.x) {
    const int64_t base = p.base(o);
    Acc acc = r.init;
    for(int64_t j = threadIdx.x; j < p.redN; j += blockDim.x) acc = r.fold(acc, static_cast<Acc>(loadDev(in, base + p.offset(j))));
    acc = warpMerge(acc, r);
    if(lane == 0) parts[warp] = acc;
    __syncthreads();
    if(warp == 0) {
      acc = lane < warps ? parts[lane] : r.init;
      acc = warpMerge(acc, r);
      if(lane == 0) storeDev(out, o, r.finish(acc, p.redN));
    }
    __syncthreads();  // parts is reused by the next output
  }
}

template <class T, class TOut, class R>
__global__ void reduceWarpPerOutput(host::ReducePlan p, const T* in, TOut* out, R r) {
  using Acc = decltype(r.init);
  const int lane = threadIdx.x % 32;
  const int64_t warpsPerBlock = blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * warpsPerBlock + threadIdx.x / 32;
  for(int64_t o = first; o < p.outN; o += static_cast<int64_t>(gridDim.x) * warpsPerBlock) {
    const int64_t base = p.base(o);
    Acc acc = r.init;
    for(int64_t j = lane; j < p.redN; j += 32) acc = r.fold(acc, static_cast<Acc>(loadDev(in, base + p.offset(j))));
    acc = warpMerge(acc, r);
    if(lane == 0) storeDev(out, o, r.finish(acc, p.redN));
  }
}

template <class T, class TOut, class R>
struct ReduceThreadPerOutput {
  host::ReducePlan p;
  const T* in;
  TOut* out;
  R r;
  __device__ void operator()(int64_t o) const {
    using Acc = decltype(r.init);
    const int64_t base = p.base(o);
    Acc acc = r.init;
    for(int64_t j = 0; j < p.redN; ++j) acc = r.fold(acc, static_cast<Acc>(loadDev(in, base + p.offset(j))));
    storeDev(out, o, r.finish(acc, p.redN));
  }
};

template <class T, class TOut = T, class R>
void reduceInto(const TensorBase& in, TensorBase& out, R r) {
  {
    host::ReducePlan p(in.shape(), out.shape());
    if(p.outN == 0) return;
    const T* ip = in.data<T>();
    TOut* op = out.data<TOut>();
    bool contiguous = p.nr > 0 && p.redStr[p.nr - 1] == 1;
    if(!contiguous || p.redN <= 1) {
      forEach(out, ReduceThreadPerOutput<T, TOut, R>{p, ip, op, r}, p.outN, "reduce");
      return;
    }
    cudaStream_t s = launchFor(out);
    const int threads = 256;
    if(p.redN >= 1024) {
      reduceBlockPerOutput<T, TOut, R><<<blocksFor(p.outN, 1), threads, 0, s>>>(p, ip, op, r);
    } else {
      reduceWarpPerOutput<T, TOut, R><<<blocksFor(p.outN, threads / 32), threads, 0, s>>>(p, ip, op, r);
    }
    checkLaunch("reduce");
  }
}

}  // namespace cuda
}  // namespace onyx
