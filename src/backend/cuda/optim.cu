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

// A buffer for the partial sums per device and thread (threads stepping
// their own graphs must not share one), made on first use and kept.
double* partials(size_t dev) {
  thread_local std::vector<double*> bufs;
  if(bufs.size() <= dev) bufs.resize(dev + 1, nullptr);
  if(!bufs[dev]) bufs[dev] = static_cast<double*>(cuda::malloc(dev, kSquareBlocks * sizeof(double)));
  return bufs[dev];
}

}  // namespace

void optimizerStep(size_t dev, Type t, const UpdateRule& r, void* w, const void* g, float* master, float* s0,
                   float* s1, int64_t n) {
  dispatchFloat(t, "optimizer step on the GPU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, StepBody<T>{r, static_cast<T*>(w), static_cast<const T*>(g), master, s0, s1}, n, "optimizer step");
  });
}

double sumSquares(size_t dev, Type t, const void* p, int64_t n) {
  if(n <= 0) return 0;
  double* part = partials(dev);
  const unsigned blocks = std::min<unsigned>(kSquareBlocks, blocksFor(n, kSquareThreads));
  dispatchFloat(t, "gradient norm on the GPU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaStream_t s = launchOn(dev);
    squaresKernel<T><<<blocks, kSquareThreads, 0, s>>>(static_cast<const T*>(p), n, part);
    checkLaunch("gradient norm");
  });
  std::vector<double> host(blocks);
  copy(host.data(), DeviceId{0, DeviceType::cpu}, part, DeviceId{dev, DeviceType::gpu}, blocks * sizeof(double));
  double sum = 0;
  for(double v : host) sum += v;  // in block order: the same bits every run
  return sum;
}

}  // namespace cuda
}  // namespace onyx
