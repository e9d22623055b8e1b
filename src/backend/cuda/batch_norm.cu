// Device code of the training batch norm (ops/norm.cpp): batch_moments and
// batch_norm_grad_sums reduce each channel in one block (double sums, a
// tree in shared memory), batch_normalize and batch_moments_grad are one
// thread per element in the CPU kernels' T arithmetic.
#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cuda/common.cuh>

namespace onyx {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// The sum over the block's threads of v (every thread gets it).
__device__ double blockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for(int s = kThreads / 2; s > 0; s /= 2) {
    if(threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  double r = shared[0];
  __syncthreads();
  return r;
}

// Element j (of N * inner) of channel ch.
__device__ inline int64_t at(BatchNormDims d, int64_t ch, int64_t j) {
  return ((j / d.inner) * d.C + ch) * d.inner + j % d.inner;
}

template <class T>
__global__ void momentsKernel(const T* x, T* m, BatchNormDims d) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, count = d.N * d.inner;
  double s = 0;
  for(int64_t j = threadIdx.x; j < count; j += kThreads) s += double(x[at(d, ch, j)]);
  const T mean = static_cast<T>(count > 0 ? blockSum(s, shared) / double(count) : 0.0);
  double v = 0;
  for(int64_t j = threadIdx.x; j < count; j += kThreads) {
    const T e = x[at(d, ch, j)] - mean;
    v += double(T(e * e));
  }
  v = blockSum(v, shared);
  if(threadIdx.x == 0) {
    m[ch] = mean;
    m[d.C + ch] = static_cast<T>(count > 0 ? v / double(count) : 0.0);
  }
}

template <class T>
__global__ void gradSumsKernel(const T* dy, const T* x, const T* m, T* out, BatchNormDims d) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, count = d.N * d.inner;
  const double mean = double(m[ch]);
  double s = 0, sx = 0;
  for(int64_t j = threadIdx.x; j < count; j += kThreads) {
    const int64_t i = at(d, ch, j);
    s += double(dy[i]);
    sx += double(dy[i]) * (double(x[i]) - mean);
  }
  s = blockSum(s, shared);
  sx = blockSum(sx, shared);
  if(threadIdx.x == 0) {
    out[ch] = static_cast<T>(s);
    out[d.C + ch] = static_cast<T>(sx);
  }
}

template <class T>
struct NormalizeBody {
  const T *x, *mean, *var, *scale, *bias, *eps;
  T* y;
  BatchNormDims d;
  __device__ void operator()(int64_t i) const {
    const int64_t ch = (i / d.inner) % d.C;
    const T sd = sqrt(T(var[ch] + eps[0]));
    const T f = scale[ch] / sd;
    const T t = bias[ch] - mean[ch] * f;
    y[i] = x[i] * f + t;
  }
};

template <class T>
struct MomentsGradBody {
  const T *x, *m, *dm;
  T* dx;
  BatchNormDims d;
  __device__ void operator()(int64_t i) const {
    const int64_t ch = (i / d.inner) % d.C;
    const double count = double(d.N * d.inner > 0 ? d.N * d.inner : 1);
    const T a = static_cast<T>(double(dm[ch]) / count), b = static_cast<T>(2.0 * double(dm[d.C + ch]) / count);
    dx[i] = a + b * (x[i] - m[ch]);
  }
};

// fn(T{}) for float32 or float64.
template <class Fn>
void floatOrDouble(Type t, Fn fn) {
  if(t == Type::float32) fn(float{});
  else fn(double{});
}

}  // namespace

void batchMoments(size_t dev, Type t, const void* x, void* m, BatchNormDims d) {
  if(d.C <= 0) return;
  cudaStream_t s = launchOn(dev);
  floatOrDouble(t, [&](auto tag) {
    using T = decltype(tag);
    momentsKernel<T><<<unsigned(d.C), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(m), d);
  });
  checkLaunch("batch_moments");
}

void batchNormGradSums(size_t dev, Type t, const void* dy, const void* x, const void* m, void* out, BatchNormDims d) {
  if(d.C <= 0) return;
  cudaStream_t s = launchOn(dev);
  floatOrDouble(t, [&](auto tag) {
    using T = decltype(tag);
    gradSumsKernel<T><<<unsigned(d.C), kThreads, 0, s>>>(static_cast<const T*>(dy), static_cast<const T*>(x),
                                                          static_cast<const T*>(m), static_cast<T*>(out), d);
  });
  checkLaunch("batch_norm_grad_sums");
}

void batchNormalize(size_t dev, Type t, const void* x, const void* mean, const void* var, const void* scale,
                    const void* bias, const void* eps, void* y, BatchNormDims d) {
  floatOrDouble(t, [&](auto tag) {
    using T = decltype(tag);
    NormalizeBody<T> b{static_cast<const T*>(x), static_cast<const T*>(mean), static_cast<const T*>(var),
                       static_cast<const T*>(scale),
                       static_cast<const T*>(bias), static_cast<const T*>(eps), static_cast<T*>(y), d};
    forEachOn(dev, b, d.N * d.C * d.inner, "batch_normalize");
  });
}

void batchMomentsGrad(size_t dev, Type t, const void* x, const void* m, const void* dm, void* dx, BatchNormDims d) {
  floatOrDouble(t, [&](auto tag) {
    using T = decltype(tag);
    MomentsGradBody<T> b{static_cast<const T*>(x), static_cast<const T*>(m), static_cast<const T*>(dm),
                         static_cast<T*>(dx), d};
    forEachOn(dev, b, d.N * d.C * d.inner, "batch_moments_grad");
  });
}

}  // namespace cuda
}  // namespace onyx
