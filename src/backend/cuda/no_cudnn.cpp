// The CUDA plugin built without cuDNN (CMake found none): convolution and
// pooling run on the backend's own kernels (ops_convolution.cpp,
// ops_pooling.cpp).
#include <onyx/backend/cuda/kernels.h>

namespace onyx {
namespace cuda {

bool cudnnAvailable() { return false; }
bool cudnnPool(size_t, Type, const void*, void*, int64_t, const host::ConvGeom&, PoolMode) { return false; }
bool cudnnConvForward(size_t, Type, const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t,
                      const host::ConvGeom&, const std::function<void*(size_t)>&) {
  return false;
}
bool cudnnConvBackwardData(size_t, Type, const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t,
                           const host::ConvGeom&, const std::function<void*(size_t)>&) {
  return false;
}
bool cudnnConvBackwardFilter(size_t, Type, const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t,
                             const host::ConvGeom&, const std::function<void*(size_t)>&) {
  return false;
}

}  // namespace cuda
}  // namespace onyx
