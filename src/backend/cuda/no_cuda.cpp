// A build without the CUDA backend (ONYX_CUDA=OFF, or no CUDA toolkit found).
#include <onyx/backend/cuda/device.h>

#include <onyx/core/error.h>

namespace onyx {
namespace cuda {

namespace {
const char* kWhy = "this build of Onyx has no CUDA backend (configure with -DONYX_CUDA=ON where the CUDA toolkit is)";
}

bool compiled() { return false; }
int deviceCount() { return 0; }
std::string unavailable(size_t) { return kWhy; }
void* malloc(size_t no, size_t) { fail("gpu", no, ": ", kWhy); }
void free(size_t, void*) {}
void copy(void*, DeviceId dst, const void*, DeviceId src, size_t) {
  fail("copy ", src.toString(), " -> ", dst.toString(), ": ", kWhy);
}
void synchronize(size_t) {}

}  // namespace cuda
}  // namespace onyx
