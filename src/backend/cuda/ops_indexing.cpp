// GPU kernels of ops/indexing.cpp's ops. The index ops read (and check) the
// indices on a host copy, which gives every element's or row's offset as
// the CPU computes it (indexing.h); the offsets go to the device in one
// upload (graph workspace) and one kernel moves or combines the data
// (index.cu). topk_indices runs a thread per line (lines.cu).
#include <algorithm>
#include <numeric>
#include <vector>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/movers.h>

namespace onyx {
namespace cuda {
namespace {

// y row t (rowElems elements) = x's row at element offset offs[t].
void gatherOnGpu(KernelCtx& c, const std::vector<int64_t>& offs, int64_t rowElems, const char* op) {
  const TensorBase& x = *c.in[0];
  size_t e = static_cast<size_t>(typeBits(x.type()) / 8);
  ONYX_CHECK(isComputeType(x.type()) && e > 0, op, ": element type ", x.type(), " is not supported");
  if(offs.empty() || rowElems == 0) return;
  Tensor d = c.scratch(Shape{static_cast<int64_t>(offs.size())}, Type::int64);
  d->set(offs);
  gatherAt(c.out.getDeviceId().no, c.out.raw(), x.raw(), d->data<int64_t>(), static_cast<int64_t>(offs.size()),
           rowElems, e);
}

// y = data (input 0), then update row i (s elements of input 2) combined into
// y's row at element offset target[i], the updates of one target in
// ascending i as the CPU applies them (red 0: the last one wins).
void scatterOnGpu(KernelCtx& c, const std::vector<int64_t>& target, int64_t s, int red, const char* op) {
  const TensorBase& x = *c.in[0];
  ONYX_CHECK(isComputeType(x.type()) && typeBits(x.type()) >= 8, op, ": element type ", x.type(),
             " is not supported");
  const size_t dev = c.out.getDeviceId().no;
  copyInput0(c);
  const size_t m = target.size();
  if(m == 0 || s == 0) return;
  std::vector<int64_t> order(m);
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return target[size_t(a)] < target[size_t(b)]; });
  // One array: the distinct targets [K], starts [K + 1], update rows [m].
  std::vector<int64_t> targets, starts;
  for(size_t k = 0; k < m; ++k)
    if(k == 0 || target[size_t(order[k])] != target[size_t(order[k - 1])]) {
      targets.push_back(target[size_t(order[k])]);
      starts.push_back(static_cast<int64_t>(k));
    }
  starts.push_back(static_cast<int64_t>(m));
  const int64_t K = static_cast<int64_t>(targets.size());
  std::vector<int64_t> all(targets);
  all.insert(all.end(), starts.begin(), starts.end());
  all.insert(all.end(), order.begin(), order.end());
  Tensor d = c.scratch(Shape{static_cast<int64_t>(all.size())}, Type::int64);
  d->set(all);
  const int64_t* p = d->data<int64_t>();
  scatterAt(dev, x.type(), c.out.raw(), c.in[2]->raw(), p, p + K, p + 2 * K + 1, K, s, red);
}

template <bool Max>
void argKernel(KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const ops::Lines ln = linesOf(x, c.attrs);
  argExtreme(c.out.getDeviceId().no, x.type(), x.raw(), c.out.data<int64_t>(), ln.outer, ln.n, ln.inner, Max,
             c.attrs.i("select_last_index") != 0);
}

// y[i.., j, ..] = x[i.., indices[i.., j, ..], ..]
ONYX_GPU_KERNEL("gather_elements", [](KernelCtx& c) {
  gatherOnGpu(c, ops::elementOffsets(c, "gather_elements"), 1, "gather_elements");
});

// y = data; y[i.., indices[i.., j, ..], ..] (op)= updates[i.., j, ..]
ONYX_GPU_KERNEL("scatter_elements", [](KernelCtx& c) {
  scatterOnGpu(c, ops::elementOffsets(c, "scatter_elements"), 1, ops::reductionCode(c.attrs.s("reduction")),
               "scatter_elements");
});

// y[b.., t.., s..] = x[b.., indices[b.., t.., :], s..]
ONYX_GPU_KERNEL("gather_nd", [](KernelCtx& c) {
  int64_t slice = 0;
  std::vector<int64_t> offs = ops::ndOffsets(c, "gather_nd", slice);
  gatherOnGpu(c, offs, slice, "gather_nd");
});

// y = data; y[b.., indices[b.., t.., :], s..] (op)= updates[b.., t.., s..]
ONYX_GPU_KERNEL("scatter_nd", [](KernelCtx& c) {
  int64_t slice = 0;
  std::vector<int64_t> offs = ops::ndOffsets(c, "scatter_nd", slice);
  scatterOnGpu(c, offs, slice, ops::reductionCode(c.attrs.s("reduction")), "scatter_nd");
});

// y = index of the largest (smallest) x along axis
ONYX_GPU_KERNEL("argmax", argKernel<true>);
ONYX_GPU_KERNEL("argmin", argKernel<false>);

// y[.., 0..k-1, ..] = indices of the k largest (smallest) x along axis, in order
ONYX_GPU_KERNEL("topk_indices", [](KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const ops::Lines ln = linesOf(x, c.attrs);
  topkIndices(c.out.getDeviceId().no, x.type(), x.raw(), c.out.data<int64_t>(), ln.outer, ln.n, ln.inner,
              c.attrs.i("k"), c.attrs.i("largest") != 0);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
