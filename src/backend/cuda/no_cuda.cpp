// A build without the CUDA backend (ONYX_CUDA=OFF, or no CUDA toolkit found).
#include <onyx/backend/cuda/device.h>
#include <onyx/backend/cuda/kernels.h>

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
void setCurrent(size_t no) { fail("gpu", no, ": ", kWhy); }
void* stream(size_t no) { fail("gpu", no, ": ", kWhy); }

void copyBytes(size_t dev, void*, const void*, size_t) { fail("gpu", dev, ": ", kWhy); }
void fillZero(size_t dev, void*, size_t) { fail("gpu", dev, ": ", kWhy); }
void copyStrided(size_t dev, void*, const int64_t*, const void*, const int64_t*, const int64_t*, int, size_t) {
  fail("gpu", dev, ": ", kWhy);
}
void gatherRows(size_t dev, void*, const void*, const void*, Type, int64_t, int64_t, int64_t, int64_t, size_t) {
  fail("gpu", dev, ": ", kWhy);
}
void argExtreme(size_t dev, Type, const void*, int64_t*, int64_t, int64_t, int64_t, bool, bool) {
  fail("gpu", dev, ": ", kWhy);
}
void scatterAddRows(size_t dev, Type, const void*, void*, const int64_t*, const int64_t*, int64_t, int64_t, int64_t,
                    int64_t) {
  fail("gpu", dev, ": ", kWhy);
}
void padMapped(size_t dev, Type, const void*, void*, const Shape&, const Shape&, const int64_t*, double) {
  fail("gpu", dev, ": ", kWhy);
}
void trilu(size_t dev, const void*, void*, int64_t, int64_t, int64_t, int64_t, bool, size_t) {
  fail("gpu", dev, ": ", kWhy);
}
void assign(TensorBase& out, const TensorBase&) { fail(out.getDeviceId().toString(), ": ", kWhy); }
void gemm(size_t dev, Type, bool, bool, int64_t, int64_t, int64_t, double, const void*, int64_t, const void*, int64_t,
          double, void*, int64_t) {
  fail("gpu", dev, ": ", kWhy);
}
void gemmBatched(size_t dev, Type, bool, bool, int64_t, int64_t, int64_t, int64_t, double, const void*, int64_t,
                 const int64_t*, const void*, int64_t, const int64_t*, double, void*, int64_t, const int64_t*) {
  fail("gpu", dev, ": ", kWhy);
}
void softmax(const TensorBase& x, TensorBase&, int, bool) { fail(x.getDeviceId().toString(), ": ", kWhy); }
void im2col(size_t dev, Type, const void*, int64_t, const host::ConvGeom&, void*) { fail("gpu", dev, ": ", kWhy); }
void col2im(size_t dev, Type, const void*, int64_t, const host::ConvGeom&, void*) { fail("gpu", dev, ": ", kWhy); }
void addChannelBias(size_t dev, Type, void*, const void*, int64_t, int64_t, int64_t) { fail("gpu", dev, ": ", kWhy); }
void maxPool(size_t dev, Type, const void*, void*, int64_t*, int64_t, const host::ConvGeom&, int) {
  fail("gpu", dev, ": ", kWhy);
}
void avgPool(size_t dev, Type, const void*, void*, int64_t, const host::ConvGeom&, bool) { fail("gpu", dev, ": ", kWhy); }
void avgPoolGrad(size_t dev, Type, const void*, void*, int64_t, const host::ConvGeom&, bool) {
  fail("gpu", dev, ": ", kWhy);
}
void crossEntropy(const TensorBase& x, const TensorBase&, TensorBase&, int) {
  fail(x.getDeviceId().toString(), ": ", kWhy);
}
void layerNorm(const TensorBase& x, const TensorBase&, const TensorBase&, TensorBase&, int, double) {
  fail(x.getDeviceId().toString(), ": ", kWhy);
}
void cumulate(size_t dev, Type, const void*, void*, int64_t, int64_t, int64_t, bool, bool, bool) {
  fail("gpu", dev, ": ", kWhy);
}
void cumprodGrad(size_t dev, Type, const void*, const void*, void*, double*, int64_t, int64_t, int64_t, bool, bool) {
  fail("gpu", dev, ": ", kWhy);
}
void hardmax(size_t dev, Type, const void*, void*, int64_t, int64_t, int64_t) { fail("gpu", dev, ": ", kWhy); }
void topkIndices(size_t dev, Type, const void*, int64_t*, int64_t, int64_t, int64_t, int64_t, bool) {
  fail("gpu", dev, ": ", kWhy);
}
void gatherAt(size_t dev, void*, const void*, const int64_t*, int64_t, int64_t, size_t) {
  fail("gpu", dev, ": ", kWhy);
}
void scatterAt(size_t dev, Type, void*, const void*, const int64_t*, const int64_t*, const int64_t*, int64_t, int64_t,
               int) {
  fail("gpu", dev, ": ", kWhy);
}
void resizeAxis(size_t dev, const double*, double*, int64_t, int64_t, int64_t, int64_t, const int64_t*, const double*,
                const uint8_t*, int64_t, double) {
  fail("gpu", dev, ": ", kWhy);
}
void resizeAxisAdjoint(size_t dev, const double*, double*, int64_t, int64_t, int64_t, int64_t, const double*,
                       const int64_t*, const int64_t*, int64_t) {
  fail("gpu", dev, ": ", kWhy);
}
void toDouble(size_t dev, Type, const void*, double*, int64_t) { fail("gpu", dev, ": ", kWhy); }
void fromDouble(size_t dev, Type, const double*, void*, int64_t) { fail("gpu", dev, ": ", kWhy); }
void optimizerStep(size_t dev, Type, const UpdateRule&, void*, const void*, float*, float*, float*, int64_t) {
  fail("gpu", dev, ": ", kWhy);
}
double sumSquares(size_t dev, const std::vector<Squares>&) { fail("gpu", dev, ": ", kWhy); }

}  // namespace cuda
}  // namespace onyx
