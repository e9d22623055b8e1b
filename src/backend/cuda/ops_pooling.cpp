// GPU kernels of ops/pooling.cpp's ops: through cuDNN where it takes the
// case (cudnn.cu), else conv.cu's kernels. The windows are the CPU's
// (ops::poolGeom in ops/pooling.h).
#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/pooling.h>

namespace onyx {
namespace cuda {
namespace {

// y[n, c, o..] = max over the window of x
ONYX_GPU_KERNEL("max_pool", [](KernelCtx& c) {
  ONYX_ASSERT(c.attrs.i("block") == 0, "max_pool: channel-blocked x on the GPU (the blocked_layout pass runs for "
              "the CPU kernels only)");
  const host::PoolGeom p = ops::poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
  const size_t dev = c.out.getDeviceId().no;
  if(cudnnPool(dev, c.out.type(), c.in[0]->raw(), c.out.raw(), p.planes, p.g, PoolMode::max)) return;
  maxPool(dev, c.out.type(), c.in[0]->raw(), c.out.raw(), nullptr, p.planes, p.g, 0);
});

// y = the flat position of each window's first maximum
ONYX_GPU_KERNEL("max_pool_indices", [](KernelCtx& c) {
  const host::PoolGeom p = ops::poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
  maxPool(c.out.getDeviceId().no, c.in[0]->type(), c.in[0]->raw(), nullptr, c.out.data<int64_t>(), p.planes, p.g,
          int(c.attrs.i("storage_order")));
});

// dx = dy added at each window's first maximum
ONYX_GPU_KERNEL("max_pool_grad", [](KernelCtx& c) {
  const host::PoolGeom p = ops::poolGeom(c.attrs, c.in[1]->shape(), c.in[0]->shape());
  maxPoolGrad(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.in[1]->raw(), c.out.raw(), p.planes, p.g);
});

// y[n, c, o..] = mean over the window of x
ONYX_GPU_KERNEL("average_pool", [](KernelCtx& c) {
  ONYX_ASSERT(c.attrs.i("block") == 0, "average_pool: channel-blocked x on the GPU (the blocked_layout pass runs "
              "for the CPU kernels only)");
  const host::PoolGeom p = ops::poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
  const size_t dev = c.out.getDeviceId().no;
  const bool includePad = c.attrs.i("count_include_pad") != 0;
  const auto mode = includePad ? PoolMode::averageIncludePad : PoolMode::averageExcludePad;
  if(cudnnPool(dev, c.out.type(), c.in[0]->raw(), c.out.raw(), p.planes, p.g, mode)) return;
  avgPool(dev, c.out.type(), c.in[0]->raw(), c.out.raw(), p.planes, p.g, includePad);
});

// dx = average_pool's adjoint applied to dy
ONYX_GPU_KERNEL("average_pool_grad", [](KernelCtx& c) {
  const host::PoolGeom p = ops::poolGeom(c.attrs, c.out.shape(), c.in[0]->shape());
  avgPoolGrad(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.out.raw(), p.planes, p.g,
              c.attrs.i("count_include_pad") != 0);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
