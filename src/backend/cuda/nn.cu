// GPU kernels of the fused normalisations (kernels.h): softmax and
// log-softmax along an axis, layer norm over trailing dims. They compute as
// the CPU kernels in ops/nn.cpp do (statistics in double, the max
// subtracted before exp), one line of elements per warp or block, partial
// results merged with warp shuffles (reduce.cuh).
#include <onyx/backend/cuda/kernels.h>

#include <cuda/std/limits>

#include <onyx/backend/cuda/common.cuh>
#include <onyx/backend/cuda/reduce.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

template <class A>
struct MaxMerge {
  A init;
  __device__ A merge(A a, A b) const { return b > a || b != b ? b : a; }  // NaN wins
};
struct SumMerge {
  double init = 0;
  __device__ double merge(double a, double b) const { return a + b; }
};

// Threads that share a line: a warp (kBlock false) or the whole block.
template <bool kBlock, class Acc, class R>
__device__ inline Acc mergeLine(Acc acc, const R& r, Acc* scratch) {
  if constexpr(kBlock) return blockMergeAll(acc, r, scratch);
  else return warpMergeAll(acc, r);
}

// Lines of n elements with stride st starting at start(k) = (k / inner) *
// n * inner + k % inner; `lane`/`width` split a line among threads.
struct Lines {
  int64_t count, n, inner;
  __device__ int64_t start(int64_t k) const { return (k / inner) * n * inner + k % inner; }
};

template <class T>
__device__ void softmaxLine(const T* x, T* y, int64_t o, int64_t n, int64_t st, bool logOut, int lane, int width,
                            T m, double s) {
  // m and s are the line's max and sum of exp(x - m), already merged.
  if(logOut) {
    const T lse = m + static_cast<T>(log(s));
    for(int64_t j = lane; j < n; j += width) y[o + j * st] = x[o + j * st] - lse;
  } else {
    const T inv = static_cast<T>(1.0 / s);
    for(int64_t j = lane; j < n; j += width) y[o + j * st] = static_cast<T>(exp(x[o + j * st] - m)) * inv;
  }
}

// One line per warp or block (lines contiguous: inner == 1).
template <class T, bool kBlock>
__global__ void softmaxGroups(Lines L, const T* x, T* y, bool logOut, T lowest) {
  __shared__ alignas(16) unsigned char scratchBytes[32 * sizeof(double)];
  const int width = kBlock ? blockDim.x : 32;
  const int lane = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t groupsPerBlock = kBlock ? 1 : blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groupsPerBlock + (kBlock ? 0 : threadIdx.x / 32);
  for(int64_t k = first; k < L.count; k += static_cast<int64_t>(gridDim.x) * groupsPerBlock) {
    const int64_t o = L.start(k);
    MaxMerge<T> mx{lowest};
    T m = lowest;
    for(int64_t j = lane; j < L.n; j += width) m = mx.merge(m, x[o + j]);
    m = mergeLine<kBlock>(m, mx, reinterpret_cast<T*>(scratchBytes));
    double s = 0;
    for(int64_t j = lane; j < L.n; j += width) s += exp(x[o + j] - m);
    s = mergeLine<kBlock>(s, SumMerge(), reinterpret_cast<double*>(scratchBytes));
    softmaxLine(x, y, o, L.n, 1, logOut, lane, width, m, s);
  }
}

// One line per thread (lines strided, inner > 1: neighbouring threads read
// neighbouring elements).
template <class T>
struct SoftmaxThreadLine {
  Lines L;
  const T* x;
  T* y;
  bool logOut;
  T lowest;
  __device__ void operator()(int64_t k) const {
    const int64_t o = L.start(k), st = L.inner;
    MaxMerge<T> mx{lowest};
    T m = lowest;
    for(int64_t j = 0; j < L.n; ++j) m = mx.merge(m, x[o + j * st]);
    double s = 0;
    for(int64_t j = 0; j < L.n; ++j) s += exp(x[o + j * st] - m);
    softmaxLine(x, y, o, L.n, st, logOut, 0, 1, m, s);
  }
};

// Layer norm of one row of n contiguous elements; gamma and beta reach the
// row's j-th element through a broadcast plan over the normalised dims.
template <class T, bool kBlock>
__global__ void layerNormGroups(int64_t rows, int64_t n, const T* x, const T* gamma, const T* beta,
                                host::BroadcastPlan<2> gb, T* y, double eps) {
  __shared__ alignas(16) unsigned char scratchBytes[32 * sizeof(double)];
  double* scratch = reinterpret_cast<double*>(scratchBytes);
  const int width = kBlock ? blockDim.x : 32;
  const int lane = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t groupsPerBlock = kBlock ? 1 : blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groupsPerBlock + (kBlock ? 0 : threadIdx.x / 32);
  for(int64_t r = first; r < rows; r += static_cast<int64_t>(gridDim.x) * groupsPerBlock) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double s = 0;
    for(int64_t j = lane; j < n; j += width) s += static_cast<double>(xr[j]);
    s = mergeLine<kBlock>(s, SumMerge(), scratch);
    const double mean = s / double(n);
    double v = 0;
    for(int64_t j = lane; j < n; j += width) {
      double d = static_cast<double>(xr[j]) - mean;
      v += d * d;
    }
    v = mergeLine<kBlock>(v, SumMerge(), scratch);
    const T rstd = static_cast<T>(1.0 / sqrt(v / double(n) + eps));
    const T mu = static_cast<T>(mean);
    for(int64_t j = lane; j < n; j += width) {
      int64_t og = 0, ob = 0, rem = j;
      for(int d = gb.rank - 1; d >= 0; --d) {
        int64_t idx = rem % gb.dims[d];
        rem /= gb.dims[d];
        og += idx * gb.strides[0][d];
        ob += idx * gb.strides[1][d];
      }
      yr[j] = (xr[j] - mu) * rstd * gamma[og] + beta[ob];
    }
  }
}

// Warps for lines shorter than this, blocks for longer ones.
constexpr int64_t kBlockLine = 1024;
constexpr int kThreads = 256;

}  // namespace

void softmax(const TensorBase& x, TensorBase& y, int axis, bool logOut) {
  const Shape& s = x.shape();
  Lines L{1, 1, 1};
  for(int i = 0; i < s.rank(); ++i) {
    int64_t d = s.dims()[i];
    if(i < axis) L.count *= d;
    else if(i == axis) L.n = d;
    else L.inner *= d;
  }
  L.count *= L.inner;
  if(L.count == 0 || L.n == 0) return;
  dispatchFloat(x.type(), logOut ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(!kGpuType<T>) {
      fail("element type ", x.type(), " is not supported on the GPU yet");
    } else {
      const T lowest = -::cuda::std::numeric_limits<T>::infinity();
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      if(L.inner > 1) {
        forEach(y, SoftmaxThreadLine<T>{L, xp, yp, logOut, lowest}, L.count, "softmax");
        return;
      }
      cudaStream_t st = launchFor(y);
      if(L.n >= kBlockLine) softmaxGroups<T, true><<<blocksFor(L.count, 1), kThreads, 0, st>>>(L, xp, yp, logOut, lowest);
      else softmaxGroups<T, false><<<blocksFor(L.count, kThreads / 32), kThreads, 0, st>>>(L, xp, yp, logOut, lowest);
      checkLaunch("softmax");
    }
  });
}

void layerNorm(const TensorBase& x, const TensorBase& gamma, const TensorBase& beta, TensorBase& y, int axis,
               double eps) {
  const Shape& s = x.shape();
  Shape::Dims block(s.dims().begin() + axis, s.dims().end());
  int64_t n = 1;
  for(auto d : block) n *= d;
  if(n == 0 || x.size() == 0) return;
  const int64_t rows = x.size() / n;
  host::BroadcastPlan<2> gb(Shape(block), {&gamma.shape(), &beta.shape()});
  dispatchFloat(x.type(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(!kGpuType<T>) {
      fail("element type ", x.type(), " is not supported on the GPU yet");
    } else {
      cudaStream_t st = launchFor(y);
      const T *xp = x.data<T>(), *gp = gamma.data<T>(), *bp = beta.data<T>();
      T* yp = y.data<T>();
      if(n >= kBlockLine)
        layerNormGroups<T, true><<<blocksFor(rows, 1), kThreads, 0, st>>>(rows, n, xp, gp, bp, gb, yp, eps);
      else
        layerNormGroups<T, false><<<blocksFor(rows, kThreads / 32), kThreads, 0, st>>>(rows, n, xp, gp, bp, gb, yp, eps);
      checkLaunch("layer_norm");
    }
  });
}

}  // namespace cuda
}  // namespace onyx
