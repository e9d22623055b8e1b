// GPU kernels of ops/linalg.cpp's ops that cuBLAS does not run (matmul and
// affine reach it through the device interface): trilu, device code in
// index.cu.
#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/linalg.h>

namespace onyx {
namespace cuda {
namespace {

// y = x where j - i >= k (upper) or j - i <= k (lower), else 0
ONYX_GPU_KERNEL("trilu", [](KernelCtx& c) {
  const Shape& s = c.in[0]->shape();
  trilu(c.out.getDeviceId().no, c.in[0]->raw(), c.out.raw(), c.out.size(), s[-2], s[-1],
        ops::triluK(c.attrs.i("k"), s), c.attrs.i("upper") != 0, static_cast<size_t>(typeBits(c.out.type()) / 8));
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
