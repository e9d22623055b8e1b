// The CUDA backend's device layer: device discovery, memory and copies,
// inside the CUDA plugin (plugin.cpp offers them to libonyx through
// core/device_backend.h). No CUDA types here, so that the plugin's g++
// sources (plugin.cpp, ops_*.cpp) can call it.
#pragma once
#include <cstddef>
#include <string>

#include <onyx/core/device.h>

namespace onyx {
namespace cuda {

// The CUDA runtime's version, "13.0" (the runtime is linked statically).
std::string runtimeVersion();
// How many CUDA devices this process can use (0 without a driver).
int deviceCount();
// "" when gpu<no> can be used; otherwise why not, in one line: no driver (or
// one too old for the runtime), no such device.
std::string unavailable(size_t no);
// Device memory on gpu<no>. malloc throws onyx::Error naming the device and
// the size when the device is out of memory.
void* malloc(size_t no, size_t bytes);
void free(size_t no, void* p);
// Copies `bytes` between any two of host and device memory, ordered after
// the work queued on the devices' streams; returns when the copy is done.
void copy(void* dst, DeviceId dstDevice, const void* src, DeviceId srcDevice, size_t bytes);
// Waits for the work queued on gpu<no>'s stream.
void synchronize(size_t no);

// Makes gpu<no> current on this thread (checked: a one-line error when it
// cannot be used). Kernels and library calls for a tensor on gpu<no> run
// after this.
void setCurrent(size_t no);
// The stream all of Onyx's work on gpu<no> is queued on, in order: kernels,
// cuBLAS calls and copies (one per device for the process, non-blocking
// with respect to the legacy default stream, made on first use). A
// cudaStream_t, as void* so that this header has no CUDA types.
void* stream(size_t no);

}  // namespace cuda
}  // namespace onyx
