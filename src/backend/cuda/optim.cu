// GPU kernels of the optimizers (kernels.h): one step of a param from the
// same per-element rule as the CPU's loop (backend/cpu/update_rule.h), and
// the sum of squares of a gradient for the global norm.
#include <vector>

#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cuda/common.cuh>
#include <onyx/backend/cuda/reduce.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

template <class T>
struct StepBody {
  UpdateRule r;
  T* w;
  const T* g;
  float *master, *s0, *s1;
  __device__ void operator()(int64_t i) const { updateElement(r, i, w, g, master, s0, s1); }
};

struct SumDouble {
  double init = 0;
  __device__ double merge(double a, double b) const { return a + b; }
};

constexpr int kSquareBlocks = 256, kSquareThreads = 256;

// partial[b] = the sum of squares of the elements block b strides over.
template <class T>
__global__ void squaresKernel(const T* p, int64_t n, double* partial) {
  __shared__ double scratch[32];
  double acc = 0;
  for(int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
      i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(static_cast<typename ComputeOf<T>::type>(p[i]));
    acc += v * v;
  }
  acc = blockMergeAll(acc, SumDouble{}, scratch);
  if(threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// A buffer for at least `count` partial sums per device and thread (threads
// stepping their own graphs must not share one), grown as needed and kept.
// The previous call read its sums back, so nothing still uses the old one.
double* partials(size_t dev, size_t count) {
  thread_local std::vector<std::pair<double*, size_t>> bufs;
  if(bufs.size() <= dev) bufs.resize(dev + 1, {nullptr, 0});
  auto& b = bufs[dev];
  if(b.second < count) {
    if(b.first) cuda::free(dev, b.first);
    b = {static_cast<double*>(cuda::malloc(dev, count * sizeof(double))), count};
  }
  return b.first;
}

}  // namespace

void optimizerStep(size_t dev, Type t, const UpdateRule& r, void* w, const void* g, float* master, float* s0,
                   float* s1, int64_t n) {
  dispatchFloat(t, "optimizer step on the GPU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, StepBody<T>{r, static_cast<T*>(w), static_cast<const T*>(g), master, s0, s1}, n, "optimizer step");
  });
}

double sumSquares(size_t dev, const std::vector<Squares>& parts) {
  std::vector<unsigned> blocks;
  size_t total = 0;
  for(const Squares& q : parts) {
    blocks.push_back(q.n > 0 ? std::min<unsigned>(kSquareBlocks, blocksFor(q.n, kSquareThreads)) : 0);
    total += blocks.back();
  }
  if(total == 0) return 0;
  double* part = partials(dev, total);
  cudaStream_t s = launchOn(dev);
  size_t at = 0;
  for(size_t i = 0; i < parts.size(); ++i) {
    if(!blocks[i]) continue;
    dispatchFloat(parts[i].t, "gradient norm on the GPU", [&](auto tag) {
      using T = typename decltype(tag)::type;
      squaresKernel<T><<<blocks[i], kSquareThreads, 0, s>>>(static_cast<const T*>(parts[i].p), parts[i].n, part + at);
      checkLaunch("gradient norm");
    });
    at += blocks[i];
  }
  std::vector<double> host(total);  // one read-back for all of them
  copy(host.data(), DeviceId{0, DeviceType::cpu}, part, DeviceId{dev, DeviceType::gpu}, total * sizeof(double));
  double sum = 0;
  for(double v : host) sum += v;  // in a fixed order: the same bits every run
  return sum;
}

}  // namespace cuda
}  // namespace onyx
