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

// Values are loaded in their compute type C (float for float16/bfloat16,
// else the type itself), as the CPU's host::load does, and stored back
// converting through it.
template <class T>
using CompT = typename ComputeOf<T>::type;

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

// What a line computes once its max m and sum s = sum of term(x, m) over
// the line are known: softmax and log-softmax write the line, cross-entropy
// one value per line (as the CPU kernels of ops/nn.cpp compute them).
template <class T>
struct SoftmaxFinish {
  using C = CompT<T>;
  T* y;
  bool logOut;
  __device__ double term(C x, C m) const { return exp(x - m); }  // in C, as the CPU
  __device__ void operator()(const T* x, int64_t o, int64_t n, int64_t st, int lane, int width, int64_t, C m,
                             double s) const {
    if(logOut) {
      const C lse = m + static_cast<C>(log(s));
      for(int64_t j = lane; j < n; j += width) storeDev(y, o + j * st, loadDev(x, o + j * st) - lse);
    } else {
      const C inv = static_cast<C>(1.0 / s);
      for(int64_t j = lane; j < n; j += width)
        storeDev(y, o + j * st, static_cast<C>(exp(loadDev(x, o + j * st) - m)) * inv);
    }
  }
};

// y[k] = -log_softmax(x)[label[k]] = lse - x[label], in double.
template <class T, class L>
struct CrossEntropyFinish {
  using C = CompT<T>;
  T* y;
  const L* labels;
  __device__ double term(C x, C m) const { return exp(static_cast<double>(x) - static_cast<double>(m)); }
  __device__ void operator()(const T* x, int64_t o, int64_t, int64_t st, int lane, int, int64_t k, C m,
                             double s) const {
    if(lane != 0) return;
    const double lse = static_cast<double>(m) + log(s);
    storeDev(y, k, lse - static_cast<double>(loadDev(x, o + static_cast<int64_t>(labels[k]) * st)));
  }
};

// One line per warp or block (lines contiguous: inner == 1).
template <class T, bool kBlock, class Finish>
__global__ void lineGroups(Lines L, const T* x, Finish fin, CompT<T> lowest) {
  using C = CompT<T>;
  __shared__ alignas(16) unsigned char scratchBytes[32 * sizeof(double)];
  const int width = kBlock ? blockDim.x : 32;
  const int lane = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t groupsPerBlock = kBlock ? 1 : blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groupsPerBlock + (kBlock ? 0 : threadIdx.x / 32);
  for(int64_t k = first; k < L.count; k += static_cast<int64_t>(gridDim.x) * groupsPerBlock) {
    const int64_t o = L.start(k);
    MaxMerge<C> mx{lowest};
    C m = lowest;
    for(int64_t j = lane; j < L.n; j += width) m = mx.merge(m, loadDev(x, o + j));
    m = mergeLine<kBlock>(m, mx, reinterpret_cast<C*>(scratchBytes));
    double s = 0;
    for(int64_t j = lane; j < L.n; j += width) s += fin.term(loadDev(x, o + j), m);
    s = mergeLine<kBlock>(s, SumMerge(), reinterpret_cast<double*>(scratchBytes));
    fin(x, o, L.n, 1, lane, width, k, m, s);
  }
}

// One line per thread (lines strided, inner > 1: neighbouring threads read
// neighbouring elements).
template <class T, class Finish>
struct LineThread {
  using C = CompT<T>;
  Lines L;
  const T* x;
  Finish fin;
  C lowest;
  __device__ void operator()(int64_t k) const {
    const int64_t o = L.start(k), st = L.inner;
    MaxMerge<C> mx{lowest};
    C m = lowest;
    for(int64_t j = 0; j < L.n; ++j) m = mx.merge(m, loadDev(x, o + j * st));
    double s = 0;
    for(int64_t j = 0; j < L.n; ++j) s += fin.term(loadDev(x, o + j * st), m);
    fin(x, o, L.n, st, 0, 1, k, m, s);
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
    for(int64_t j = lane; j < n; j += width) s += static_cast<double>(loadDev(xr, j));
    s = mergeLine<kBlock>(s, SumMerge(), scratch);
    const double mean = s / double(n);
    double v = 0;
    for(int64_t j = lane; j < n; j += width) {
      double d = static_cast<double>(loadDev(xr, j)) - mean;
      v += d * d;
    }
    v = mergeLine<kBlock>(v, SumMerge(), scratch);
    using C = CompT<T>;
    const C rstd = static_cast<C>(1.0 / sqrt(v / double(n) + eps));
    const C mu = static_cast<C>(mean);
    for(int64_t j = lane; j < n; j += width) {
      int64_t og = 0, ob = 0, rem = j;
      for(int d = gb.rank - 1; d >= 0; --d) {
        int64_t idx = rem % gb.dims[d];
        rem /= gb.dims[d];
        og += idx * gb.strides[0][d];
        ob += idx * gb.strides[1][d];
      }
      storeDev(yr, j, (loadDev(xr, j) - mu) * rstd * loadDev(gamma, og) + loadDev(beta, ob));
    }
  }
}

// Warps for lines shorter than this, blocks for longer ones.
constexpr int64_t kBlockLine = 1024;
constexpr int kThreads = 256;

// Offset in gamma of element j of a normalised block.
__device__ inline int64_t gammaAt(const host::BroadcastPlan<1>& p, int64_t j) {
  int64_t o = 0, rem = j;
  for(int d = p.rank - 1; d >= 0; --d) {
    int64_t idx = rem % p.dims[d];
    rem /= p.dims[d];
    o += idx * p.strides[0][d];
  }
  return o;
}

// mean and 1/sqrt(var + eps) of one row (the lanes of a warp or block), in
// double, as layerNormGroups computes them.
template <bool kBlock, class T>
__device__ inline void rowMoments(const T* xr, int64_t n, int lane, int width, double eps, double* scratch,
                                  double& mean, double& rstd) {
  double s = 0;
  for(int64_t j = lane; j < n; j += width) s += static_cast<double>(loadDev(xr, j));
  mean = mergeLine<kBlock>(s, SumMerge(), scratch) / double(n);
  double v = 0;
  for(int64_t j = lane; j < n; j += width) {
    double d = static_cast<double>(loadDev(xr, j)) - mean;
    v += d * d;
  }
  v = mergeLine<kBlock>(v, SumMerge(), scratch);
  rstd = 1.0 / sqrt(v / double(n) + eps);
}

// layer_norm_grad of one row per warp (block): dx = rstd (dxhat -
// mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy gamma.
template <class T, bool kBlock>
__global__ void layerNormGradGroups(int64_t rows, int64_t n, const T* dy, const T* x, const T* gamma,
                                    host::BroadcastPlan<1> gp, T* dx, double eps) {
  __shared__ alignas(16) unsigned char scratchBytes[32 * sizeof(double)];
  double* scratch = reinterpret_cast<double*>(scratchBytes);
  const int width = kBlock ? blockDim.x : 32;
  const int lane = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t groupsPerBlock = kBlock ? 1 : blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groupsPerBlock + (kBlock ? 0 : threadIdx.x / 32);
  using C = CompT<T>;
  for(int64_t r = first; r < rows; r += static_cast<int64_t>(gridDim.x) * groupsPerBlock) {
    const T *xr = x + r * n, *dyr = dy + r * n;
    T* dxr = dx + r * n;
    double mean, rs;
    rowMoments<kBlock>(xr, n, lane, width, eps, scratch, mean, rs);
    const C mu = static_cast<C>(mean), rstd = static_cast<C>(rs);
    double a = 0, b = 0;
    for(int64_t j = lane; j < n; j += width) {
      const C d = loadDev(dyr, j) * loadDev(gamma, gammaAt(gp, j));
      a += static_cast<double>(d);
      b += static_cast<double>(d * ((loadDev(xr, j) - mu) * rstd));
    }
    a = mergeLine<kBlock>(a, SumMerge(), scratch);
    b = mergeLine<kBlock>(b, SumMerge(), scratch);
    const C ma = static_cast<C>(a / double(n)), mb = static_cast<C>(b / double(n));
    for(int64_t j = lane; j < n; j += width) {
      const C xhat = (loadDev(xr, j) - mu) * rstd;
      storeDev(dxr, j, rstd * (loadDev(dyr, j) * loadDev(gamma, gammaAt(gp, j)) - ma - xhat * mb));
    }
  }
}

// softmax_grad: a thread per line, dx = y (dy - sum(dy y)), the sum in
// double in line order.
template <class T>
__global__ void softmaxGradLines(Lines L, const T* dy, const T* y, T* dx) {
  using C = CompT<T>;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if(k >= L.count) return;
  const int64_t o = L.start(k), st = L.inner;
  double s = 0;
  for(int64_t j = 0; j < L.n; ++j) s += static_cast<double>(loadDev(dy, o + j * st) * loadDev(y, o + j * st));
  const C sc = static_cast<C>(s);
  for(int64_t j = 0; j < L.n; ++j) storeDev(dx, o + j * st, loadDev(y, o + j * st) * (loadDev(dy, o + j * st) - sc));
}

// stats[2r], stats[2r + 1]: row r's mean and 1/sqrt(var + eps).
template <class T, bool kBlock>
__global__ void rowMomentsGroups(int64_t rows, int64_t n, const T* x, double* stats, double eps) {
  __shared__ alignas(16) unsigned char scratchBytes[32 * sizeof(double)];
  double* scratch = reinterpret_cast<double*>(scratchBytes);
  const int width = kBlock ? blockDim.x : 32;
  const int lane = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t groupsPerBlock = kBlock ? 1 : blockDim.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groupsPerBlock + (kBlock ? 0 : threadIdx.x / 32);
  for(int64_t r = first; r < rows; r += static_cast<int64_t>(gridDim.x) * groupsPerBlock) {
    double mean, rs;
    rowMoments<kBlock>(x + r * n, n, lane, width, eps, scratch, mean, rs);
    if(lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rs;
    }
  }
}

// layer_norm_param_grad: a thread per column, the rows summed in order.
template <class T>
__global__ void layerNormParamGradColumns(int64_t rows, int64_t n, const T* dy, const T* x, const double* stats,
                                          T* out) {
  using C = CompT<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if(j >= n) return;
  double s0 = 0, s1 = 0;
  for(int64_t r = 0; r < rows; ++r) {
    const C mu = static_cast<C>(stats[2 * r]), rstd = static_cast<C>(stats[2 * r + 1]);
    const C d = loadDev(dy, r * n + j);
    s0 += static_cast<double>(d * ((loadDev(x, r * n + j) - mu) * rstd));
    s1 += static_cast<double>(d);
  }
  storeDev(out, j, static_cast<C>(s0));
  storeDev(out, n + j, static_cast<C>(s1));
}


}  // namespace

namespace {

// The lines of x along `axis`: `count` of them, n elements each, inner apart.
Lines linesOf(const Shape& s, int axis) {
  Lines L{1, 1, 1};
  for(int i = 0; i < s.rank(); ++i) {
    int64_t d = s.dims()[i];
    if(i < axis) L.count *= d;
    else if(i == axis) L.n = d;
    else L.inner *= d;
  }
  L.count *= L.inner;
  return L;
}

// Runs fin over every line of x (launched on the stream of `out`).
template <class T, class Finish>
void forEachLine(const Lines& L, const T* x, Finish fin, const TensorBase& out, const char* what) {
  if(L.count == 0 || L.n == 0) return;
  const CompT<T> lowest = -::cuda::std::numeric_limits<CompT<T>>::infinity();
  if(L.inner > 1) {
    forEach(out, LineThread<T, Finish>{L, x, fin, lowest}, L.count, what);
    return;
  }
  cudaStream_t st = launchFor(out);
  if(L.n >= kBlockLine) lineGroups<T, true><<<blocksFor(L.count, 1), kThreads, 0, st>>>(L, x, fin, lowest);
  else lineGroups<T, false><<<blocksFor(L.count, kThreads / 32), kThreads, 0, st>>>(L, x, fin, lowest);
  checkLaunch(what);
}

}  // namespace

void softmax(const TensorBase& x, TensorBase& y, int axis, bool logOut) {
  const char* what = logOut ? "log_softmax" : "softmax";
  dispatchFloat(x.type(), what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachLine(linesOf(x.shape(), axis), x.data<T>(), SoftmaxFinish<T>{y.data<T>(), logOut}, y, what);
  });
}

void crossEntropy(const TensorBase& logits, const TensorBase& labels, TensorBase& y, int axis) {
  dispatchFloat(logits.type(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Lines L = linesOf(logits.shape(), axis);
    if(labels.type() == Type::int64)
      forEachLine(L, logits.data<T>(), CrossEntropyFinish<T, int64_t>{y.data<T>(), labels.data<int64_t>()}, y,
                  "cross_entropy");
    else
      forEachLine(L, logits.data<T>(), CrossEntropyFinish<T, int32_t>{y.data<T>(), labels.data<int32_t>()}, y,
                  "cross_entropy");
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
    cudaStream_t st = launchFor(y);
    const T *xp = x.data<T>(), *gp = gamma.data<T>(), *bp = beta.data<T>();
    T* yp = y.data<T>();
    if(n >= kBlockLine)
      layerNormGroups<T, true><<<blocksFor(rows, 1), kThreads, 0, st>>>(rows, n, xp, gp, bp, gb, yp, eps);
    else
      layerNormGroups<T, false><<<blocksFor(rows, kThreads / 32), kThreads, 0, st>>>(rows, n, xp, gp, bp, gb, yp, eps);
    checkLaunch("layer_norm");
  });
}

void layerNormGrad(const TensorBase& dy, const TensorBase& x, const TensorBase& gamma, TensorBase& dx, int axis,
                   double eps) {
  const Shape& s = x.shape();
  Shape::Dims block(s.dims().begin() + axis, s.dims().end());
  int64_t n = 1;
  for(auto d : block) n *= d;
  if(n == 0 || x.size() == 0) return;
  const int64_t rows = x.size() / n;
  host::BroadcastPlan<1> gp(Shape(block), {&gamma.shape()});
  dispatchFloat(x.type(), "layer_norm_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaStream_t st = launchFor(dx);
    const T *dyp = dy.data<T>(), *xp = x.data<T>(), *gp0 = gamma.data<T>();
    T* dxp = dx.data<T>();
    if(n >= kBlockLine)
      layerNormGradGroups<T, true><<<blocksFor(rows, 1), kThreads, 0, st>>>(rows, n, dyp, xp, gp0, gp, dxp, eps);
    else
      layerNormGradGroups<T, false>
          <<<blocksFor(rows, kThreads / 32), kThreads, 0, st>>>(rows, n, dyp, xp, gp0, gp, dxp, eps);
    checkLaunch("layer_norm_grad");
  });
}

void layerNormParamGrad(const TensorBase& dy, const TensorBase& x, TensorBase& out, int axis, double eps,
                        double* stats) {
  const Shape& s = x.shape();
  int64_t n = 1;
  for(int i = axis; i < s.rank(); ++i) n *= s.dims()[i];
  if(n == 0) return;
  const int64_t rows = x.size() / n;
  dispatchFloat(x.type(), "layer_norm_param_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaStream_t st = launchFor(out);
    const T *dyp = dy.data<T>(), *xp = x.data<T>();
    if(rows > 0) {
      if(n >= kBlockLine)
        rowMomentsGroups<T, true><<<blocksFor(rows, 1), kThreads, 0, st>>>(rows, n, xp, stats, eps);
      else
        rowMomentsGroups<T, false><<<blocksFor(rows, kThreads / 32), kThreads, 0, st>>>(rows, n, xp, stats, eps);
    }
    layerNormParamGradColumns<T><<<blocksFor(n, kThreads), kThreads, 0, st>>>(rows, n, dyp, xp, stats, out.data<T>());
    checkLaunch("layer_norm_param_grad");
  });
}

void softmaxGrad(const TensorBase& dy, const TensorBase& y, TensorBase& dx, int axis) {
  const Lines L = linesOf(y.shape(), axis);
  if(L.count == 0 || L.n == 0) return;
  dispatchFloat(y.type(), "softmax_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmaxGradLines<T><<<blocksFor(L.count, kThreads), kThreads, 0, launchFor(dx)>>>(L, dy.data<T>(), y.data<T>(),
                                                                                     dx.data<T>());
    checkLaunch("softmax_grad");
  });
}

}  // namespace cuda
}  // namespace onyx
