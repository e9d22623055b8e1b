// The CUDA plugin's entry point (libonyx_cuda.so): the device interface of
// core/device_backend.h on the CUDA backend, and the grafting of the GPU
// kernels onto the registry (plugin.h). libonyx dlopens this library on the
// first request for a GPU and calls onyx_cuda_plugin once.
#include <onyx/backend/cuda/plugin.h>

#include <utility>
#include <vector>

#include <onyx/backend/cuda/device.h>
#include <onyx/backend/cuda/kernels.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/error.h>

namespace onyx {

// The registry of the plugin's nvcc compile of the functor families
// (ONYX_OP under ONYX_GPU_PLUGIN, graph/op_def.h).
Registry& gpuPluginRegistry() {
  static Registry r;
  return r;
}

namespace cuda {

namespace {

std::vector<std::pair<std::string, KernelFn>>& registered() {
  static std::vector<std::pair<std::string, KernelFn>> r;
  return r;
}

class CudaBackend final : public DeviceBackend {
public:
  std::string describe() override {
    return str("CUDA runtime ", runtimeVersion(), ", cuBLAS, cuDNN ",
               cudnnAvailable() ? "on" : "off (not in this build, or ONYX_CUDNN=0)");
  }
  int deviceCount() override { return cuda::deviceCount(); }
  std::string unavailable(size_t no) override { return cuda::unavailable(no); }
  void* malloc(size_t no, size_t bytes) override { return cuda::malloc(no, bytes); }
  void free(size_t no, void* p) override { cuda::free(no, p); }
  void copy(void* dst, DeviceId dstDevice, const void* src, DeviceId srcDevice, size_t bytes) override {
    cuda::copy(dst, dstDevice, src, srcDevice, bytes);
  }
  void synchronize(size_t no) override { cuda::synchronize(no); }
  void copyBytes(size_t dev, void* dst, const void* src, size_t bytes) override {
    cuda::copyBytes(dev, dst, src, bytes);
  }
  void fillZero(size_t dev, void* p, size_t bytes) override { cuda::fillZero(dev, p, bytes); }
  void copyStrided(size_t dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims,
                   int rank, size_t esize) override {
    cuda::copyStrided(dev, dst, ds, src, ss, dims, rank, esize);
  }
  void assign(TensorBase& out, const TensorBase& in) override { cuda::assign(out, in); }
  void gemm(size_t dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
            const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc) override {
    cuda::gemm(dev, t, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void gemmBatched(size_t dev, Type t, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                   double alpha, const void* A, int64_t lda, const int64_t* aOffsets, const void* B, int64_t ldb,
                   const int64_t* bOffsets, double beta, void* C, int64_t ldc, const int64_t* cOffsets) override {
    cuda::gemmBatched(dev, t, transA, transB, batch, M, N, K, alpha, A, lda, aOffsets, B, ldb, bOffsets, beta, C, ldc,
                      cOffsets);
  }
  void optimizerStep(size_t dev, Type t, const UpdateRule& r, void* w, const void* g, float* master, float* s0,
                     float* s1, int64_t n) override {
    cuda::optimizerStep(dev, t, r, w, g, master, s0, s1, n);
  }
  double sumSquares(size_t dev, const std::vector<Squares>& parts) override { return cuda::sumSquares(dev, parts); }
};

// Gives the registry's ops their GPU kernels (plugin.h), once.
void graft() {
  Registry& reg = Registry::instance();
  // The functor families: each op's GPU kernel from the plugin's compile of
  // its family file. Ops with one kernel for every device (anyDevice) have
  // theirs in libonyx already.
  for(const OpDef* local : gpuPluginRegistry().all()) {
    const OpDef* op = reg.find(local->name);
    ONYX_ASSERT(op, "the CUDA plugin's functor families define op '", local->name, "', which libonyx does not");
    if(local->kernels[1] && !op->kernels[1]) reg.setGpuKernel(local->name, local->kernels[1]);
  }
  for(auto& kv : registered()) reg.setGpuKernel(kv.first, std::move(kv.second));
  registered().clear();
  for(const OpDef* op : reg.all())
    if(!op->gpuOnHostWhy.empty()) reg.setGpuKernel(op->name, onHostCopies(op->kernels[0]));
}

}  // namespace

GpuKernel::GpuKernel(const char* op, KernelFn f) { registered().emplace_back(op, std::move(f)); }

KernelFn onHostCopies(KernelFn cpu) {
  return [cpu](KernelCtx& c) {
    std::vector<Tensor> ins;
    for(TensorBase* t : c.in) ins.push_back(t->hostCopy());
    Tensor out = TensorBase::create(c.out.shape(), c.out.type());
    KernelCtx h{c.node, *out, {}, c.attrs, c.rng, c.graph};
    for(const Tensor& t : ins) h.in.push_back(t.get());
    cpu(h);
    c.out.copyFrom(*out);
  };
}

void copyInput0(KernelCtx& c) {
  if(c.out.bytes() == 0) return;
  copyBytes(c.out.getDeviceId().no, c.out.raw(), c.in[0]->raw(), c.out.bytes());
}

}  // namespace cuda
}  // namespace onyx

// The one exported symbol (the plugin is built with hidden visibility):
// null when libonyx expects another interface version.
extern "C" __attribute__((visibility("default"))) onyx::DeviceBackend* onyx_cuda_plugin(int abi) {
  if(abi != onyx::kDeviceBackendAbi) return nullptr;
  // Never destroyed: device memory may be freed through it at exit.
  static onyx::DeviceBackend* const backend = new onyx::cuda::CudaBackend;
  static const bool grafted = (onyx::cuda::graft(), true);
  (void)grafted;
  return backend;
}
