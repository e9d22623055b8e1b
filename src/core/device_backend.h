// The device interface: what device-agnostic code (core, graph, train, the
// element movers of ops) asks of a GPU backend, with no CUDA types. The CUDA
// backend implements it in its own plugin library (libonyx_cuda.so, built
// from src/backend/cuda where the CUDA toolkit is found), which libonyx
// loads with dlopen on the first request for a GPU; a CPU-only process never
// maps it or the CUDA libraries. Every other GPU kernel is registered by the
// plugin onto its registry op, so this interface stays small.
//
// Pointers are device pointers on gpu<dev>; work is queued on the device's
// stream in order, and calls return before it is done unless they say so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/core/device.h>
#include <onyx/core/types.h>

namespace onyx {

class TensorBase;
struct UpdateRule;  // backend/cpu/update_rule.h

class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;

  // One line naming the backend and the libraries it uses (for logs and the
  // tests of its configuration).
  virtual std::string describe() = 0;

  // ---- discovery: setDevice, onnx-test --skip-without-device, tests.
  // How many devices this process can use (0 without a driver).
  virtual int deviceCount() = 0;
  // "" when gpu<no> can be used; otherwise why not, in one line.
  virtual std::string unavailable(size_t no) = 0;

  // ---- memory and copies: the allocator and TensorBase::copyFrom.
  // malloc throws onyx::Error naming the device and the size when it is out
  // of memory or cannot be used.
  virtual void* malloc(size_t no, size_t bytes) = 0;
  virtual void free(size_t no, void* p) = 0;
  // `bytes` bytes between any two of host and device memory, ordered after
  // the work queued on the devices; returns when the copy is done.
  virtual void copy(void* dst, DeviceId dstDevice, const void* src, DeviceId srcDevice, size_t bytes) = 0;
  // Waits for the work queued on gpu<no>.
  virtual void synchronize(size_t no) = 0;

  // ---- element movers: the kernels of the data-movement ops (through
  // ops/movers.h) and bitcast/identity are written once for both devices (OpDef::anyDevice)
  // with these, so a new op made only of moves needs no GPU code.
  // dst = src, `bytes` bytes on one device.
  virtual void copyBytes(size_t dev, void* dst, const void* src, size_t bytes) = 0;
  // All-zero bytes (0, 0.0 and false in every type).
  virtual void fillZero(size_t dev, void* p, size_t bytes) = 0;
  // dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of
  // `dims` (strides in elements, possibly negative; elements of `esize`
  // bytes), as the CPU's strided copy (host::StridedPlan).
  virtual void copyStrided(size_t dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss,
                           const int64_t* dims, int rank, size_t esize) = 0;
  // out = in broadcast to out's shape (numpy rules) and converted to out's
  // element type as the CPU's cast converts; both on the same GPU (expand,
  // and affine's bias).
  virtual void assign(TensorBase& out, const TensorBase& in) = 0;

  // ---- GEMM: matmul, affine and their gradients stay one device-agnostic
  // kernel (ops/linalg.cpp) that only picks host::gemm or this.
  // Row-major C = alpha * op(A) . op(B) + beta * C of element type t, as
  // host::gemm (src/backend/cpu/gemm.h); when beta is 0, C is not read.
  virtual void gemm(size_t dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
                    const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc) = 0;
  // `batch` GEMMs of one size, matrix i at A + aOffsets[i] (elements) and
  // so on, as host::gemmBatched; the offsets are host arrays.
  virtual void gemmBatched(size_t dev, Type t, bool transA, bool transB, int64_t batch, int64_t M, int64_t N,
                           int64_t K, double alpha, const void* A, int64_t lda, const int64_t* aOffsets, const void* B,
                           int64_t ldb, const int64_t* bOffsets, double beta, void* C, int64_t ldc,
                           const int64_t* cOffsets) = 0;

  // ---- training (src/train/optimizers.cpp): params are updated in place,
  // not through graph ops, so the step and the gradient norm are here.
  // One optimizer step of a param of n elements of float type t:
  // updateElement(r, i, ...) for every i (backend/cpu/update_rule.h);
  // master, s0, s1 are float32 device arrays or null.
  virtual void optimizerStep(size_t dev, Type t, const UpdateRule& r, void* w, const void* g, float* master,
                             float* s0, float* s1, int64_t n) = 0;
  // The sum of the squares of the elements of every part (n elements of
  // float type t at p), in double, the same bits every run; waits for it.
  struct Squares {
    Type t;
    const void* p;
    int64_t n;
  };
  virtual double sumSquares(size_t dev, const std::vector<Squares>& parts) = 0;
};

// The GPU backend, loaded on the first call (once per process, thread-safe).
// Throws onyx::Error with the reason, in one line, when there is none: this
// build has no CUDA backend, the plugin is not found or does not load.
DeviceBackend& gpuBackend();
// "" when gpu<no> can be used; otherwise why not, in one line (the reasons
// above, or the backend's: no driver, no such device). Loads the backend.
std::string gpuUnavailable(size_t no);
// How many GPUs this process can use: 0 without the backend. Loads it.
int gpuDeviceCount();
// Loads the backend now (tests do, to check what it registers); returns ""
// or why it cannot be loaded.
std::string loadGpuBackend();
// Whether this process has tried to load the backend (without trying): a
// CPU-only run never does.
bool gpuBackendTried();

// The environment variable naming the plugin file in place of
// libonyx_cuda.so next to libonyx.
constexpr const char* kCudaPluginEnv = "ONYX_CUDA_PLUGIN";

// What the plugin's entry point returns to libonyx, checked against the
// version libonyx was built with: a plugin from another build of Onyx is
// refused with a clear reason rather than crashing on a changed interface.
constexpr int kDeviceBackendAbi = 1;

}  // namespace onyx
