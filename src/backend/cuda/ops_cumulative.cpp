// GPU kernels of ops/cumulative.cpp's ops: cumsum, cumprod and cumprod's
// gradient, a thread per line (device code in lines.cu).
#include <algorithm>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/movers.h>

namespace onyx {
namespace cuda {
namespace {

// y[.., i, ..] = sum_{j <= i} x[.., j, ..] (variants: exclusive, reverse)
ONYX_GPU_KERNEL("cumsum", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const ops::Lines ln = linesOf(x, c.attrs);
  cumulate(c.out.getDeviceId().no, x.type(), x.raw(), c.out.raw(), ln.outer, ln.n, ln.inner,
           c.attrs.i("exclusive") != 0, c.attrs.i("reverse") != 0, false);
});

// dx of sum(cumprod(x) * dy)
ONYX_GPU_KERNEL("cumprod_grad", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const ops::Lines ln = linesOf(x, c.attrs);
  Tensor z = c.scratch(Shape{std::max<int64_t>(1, x.size())}, Type::float64);  // the suffix sums, per line
  cumprodGrad(c.out.getDeviceId().no, x.type(), x.raw(), c.in[1]->raw(), c.out.raw(), z->data<double>(), ln.outer,
              ln.n, ln.inner, c.attrs.i("exclusive") != 0, c.attrs.i("reverse") != 0);
});

// y[.., i, ..] = prod_{j <= i} x[.., j, ..] (variants: exclusive, reverse)
ONYX_GPU_KERNEL("cumprod", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const ops::Lines ln = linesOf(x, c.attrs);
  cumulate(c.out.getDeviceId().no, x.type(), x.raw(), c.out.raw(), ln.outer, ln.n, ln.inner,
           c.attrs.i("exclusive") != 0, c.attrs.i("reverse") != 0, true);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
