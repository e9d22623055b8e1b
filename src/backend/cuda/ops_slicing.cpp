// GPU kernels of ops/slicing.cpp's ops that are not made of the element
// movers (those kernels serve both devices there): gather, scatter_add, pad.
// Device code in copy.cu and index.cu.
#include <vector>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/core/dispatch.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/slicing.h>

namespace onyx {
namespace cuda {
namespace {

// y[i.., j.., k..] = x[i.., indices[j..], k..]
ONYX_GPU_KERNEL("gather", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const TensorBase& ix = *c.in[1];
  const size_t e = ops::elementBytes(x.type(), "gather");
  const int a = x.shape().axis(c.attrs.i("axis"));
  const auto& xd = x.shape().dims();
  const int64_t outer = ops::prodDims(xd, 0, a), n = xd[a], inner = ops::prodDims(xd, a + 1, xd.size());
  // Indices are checked on the host (a copy of them): a kernel cannot
  // report a bad one.
  ops::checkIndices(*ix.hostCopy(), n, a, c.node);
  gatherRows(c.out.getDeviceId().no, c.out.raw(), x.raw(), ix.raw(), ix.type(), outer, ix.size(), n, inner, e);
});

// y = zeros; y[i.., indices[j..], k..] += u[i.., j.., k..], for each pair
// (u, indices) of the inputs in turn
ONYX_GPU_KERNEL("scatter_add", [](KernelCtx& c) {
  const auto& od = c.out.shape().dims();
  const int a = c.out.shape().axis(c.attrs.i("axis"));
  const int64_t outer = ops::prodDims(od, 0, a), n = od[a], inner = ops::prodDims(od, a + 1, od.size());
  for(size_t p = 0; p < c.in.size(); p += 2) {
    const TensorBase& u = *c.in[p];
    // Sorted on the device (kernels.h); an index out of range is reported
    // by the host check, which names the node.
    const TensorBase& ix = *c.in[p + 1];
    const int64_t m = ix.size();
    Tensor scratch = c.scratch(Shape{static_cast<int64_t>(scatterAddScratch(m))}, Type::uint8);
    if(!scatterAdd(c.out.getDeviceId().no, u.type(), u.raw(), c.out.raw(), ix.type(), ix.raw(), outer, n, m, inner,
                   scratch->raw(), p > 0)) {
      ops::checkIndices(*ix.hostCopy(), n, a, c.node);
      ONYX_ASSERT(false, "scatter_add: the GPU found an index out of [-", n, ", ", n, ") that the host check passed");
    }
  }
});

// y = x padded by pads[k] before and pads[k+rank] after axis k
ONYX_GPU_KERNEL("pad", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const Shape& os = c.out.shape();
  const int r = os.rank();
  if(r == 0) return copyInput0(c);
  const IntList& p = c.attrs.ints("pads");
  std::vector<int64_t> maps;  // the axes' maps one after the other, uploaded
  for(int k = 0; k < r; ++k) {
    auto mk = ops::padMap(x.shape().dims()[k], p[k], p[k + r], c.attrs.s("mode"));
    maps.insert(maps.end(), mk.begin(), mk.end());
  }
  if(maps.empty() || c.out.size() == 0) return;
  Tensor dm = c.scratch(Shape{int64_t(maps.size())}, Type::int64);
  dm->set(maps);
  padMapped(c.out.getDeviceId().no, x.type(), x.raw(), c.out.raw(), os, x.shape(), dm->data<int64_t>(),
            c.attrs.f("value"));
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
