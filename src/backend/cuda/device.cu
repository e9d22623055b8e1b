// The CUDA backend's device layer (see device.h). The runtime is linked
// statically: a binary built with the backend still starts on a machine
// without the NVIDIA driver, and says so when a GPU is asked for.
#include <onyx/backend/cuda/device.h>

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include <onyx/core/error.h>

namespace onyx {
namespace cuda {

namespace {

void check(cudaError_t e, const char* call, size_t no) {
  if(e == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky error so the next call can report its own
  fail("gpu", no, ": ", call, " failed: ", cudaGetErrorString(e), " (", cudaGetErrorName(e), ")");
}

void use(size_t no) {
  int cur = -1;
  if(cudaGetDevice(&cur) == cudaSuccess && cur == static_cast<int>(no)) return;
  cudaGetLastError();
  std::string why = unavailable(no);
  ONYX_CHECK(why.empty(), "gpu", no, ": ", why);
  check(cudaSetDevice(static_cast<int>(no)), "cudaSetDevice", no);
}

// The process's stream of gpu<no>, made on first use. Every launch asks for
// it, so each thread keeps the ones it has seen and takes the lock only the
// first time.
cudaStream_t streamOf(size_t no) {
  thread_local std::vector<cudaStream_t> seen;
  if(no < seen.size() && seen[no]) return seen[no];
  if(seen.size() <= no) seen.resize(no + 1, nullptr);
  static std::mutex m;
  static std::vector<cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(m);
  if(streams.size() <= no) streams.resize(no + 1, nullptr);
  if(!streams[no]) {
    use(no);
    check(cudaStreamCreateWithFlags(&streams[no], cudaStreamNonBlocking), "cudaStreamCreate", no);
  }
  return seen[no] = streams[no];
}

}  // namespace

void setCurrent(size_t no) { use(no); }

void* stream(size_t no) { return streamOf(no); }

std::string runtimeVersion() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return str(v / 1000, ".", (v % 1000) / 10);
}

int deviceCount() {
  int n = 0;
  if(cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string unavailable(size_t no) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if(e != cudaSuccess) {
    cudaGetLastError();
    return str("no usable CUDA device: ", cudaGetErrorString(e));
  }
  if(static_cast<int>(no) >= n) return str("no such CUDA device (this machine has ", n, ")");
  return "";
}

void* malloc(size_t no, size_t bytes) {
  use(no);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if(e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    fail("gpu", no, ": out of memory allocating ", bytes, " bytes (", freeBytes, " of ", total, " bytes free)");
  }
  check(e, "cudaMalloc", no);
  return p;
}

void free(size_t no, void* p) {
  if(!p) return;
  cudaSetDevice(static_cast<int>(no));
  cudaFree(p);  // errors here (a context torn down at exit) have no one to report to
}

void copy(void* dst, DeviceId dstDevice, const void* src, DeviceId srcDevice, size_t bytes) {
  if(bytes == 0) return;
  // Both devices' queued work first (the destination may still be read by
  // a kernel), then the copy on the source's stream (unified addressing:
  // the runtime tells host from device pointers, and copies between GPUs).
  bool srcGpu = srcDevice.type == DeviceType::gpu, dstGpu = dstDevice.type == DeviceType::gpu;
  if(dstGpu && srcGpu && dstDevice.no != srcDevice.no) synchronize(dstDevice.no);
  size_t no = srcGpu ? srcDevice.no : dstDevice.no;
  use(no);
  cudaStream_t s = streamOf(no);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync", no);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize", no);
}

void synchronize(size_t no) {
  use(no);
  check(cudaStreamSynchronize(streamOf(no)), "cudaStreamSynchronize", no);
}

}  // namespace cuda
}  // namespace onyx
