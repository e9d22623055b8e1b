// GPU kernels of ops/resize.cpp's ops: resize and its adjoint resize_grad
// (device code in resize.cu).
#include <algorithm>
#include <vector>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/resize.h>

namespace onyx {
namespace cuda {
namespace {

// The GPU form of resize.cpp's resizeRun: the same taps (ops::resizeTaps),
// computed on the host and uploaded, each axis one pass over double buffers
// in the graph's workspace; the adjoint's passes gather through per-input
// lists of (output, tap) pairs in the CPU's order of additions.
void resizeRunGpu(KernelCtx& kc, const TensorBase& src, TensorBase& dst, const Shape& inShape, const Shape& outShape,
                  bool adjoint) {
  const int r = inShape.rank();
  const std::vector<ops::ResizeTaps> taps = ops::resizeTaps(kc.attrs, inShape, outShape);
  if(dst.size() == 0) return;
  const size_t dev = dst.getDeviceId().no;
  std::vector<int64_t> dims = adjoint ? outShape.vec() : inShape.vec();
  auto count = [](const std::vector<int64_t>& d, size_t b, size_t e) {
    int64_t n = 1;
    for(size_t i = b; i < e; ++i) n *= d[i];
    return n;
  };
  int64_t most = std::max<int64_t>(1, src.size());
  {
    std::vector<int64_t> d = dims;
    for(int k = 0; k < r; ++k) {
      int a = adjoint ? r - 1 - k : k;
      d[size_t(a)] = adjoint ? taps[size_t(a)].in : taps[size_t(a)].out;
      most = std::max(most, count(d, 0, d.size()));
    }
  }
  Tensor buf[2] = {kc.scratch(Shape{most}, Type::float64), kc.scratch(Shape{most}, Type::float64)};
  std::vector<Tensor> uploads;  // the taps, alive until the passes are queued
  auto upload = [&](auto values, Type t) {
    Tensor u = kc.scratch(Shape{std::max<int64_t>(1, int64_t(values.size()))}, t);
    if(!values.empty()) u->set(values);
    uploads.push_back(u);
    return u;
  };
  int cur = 0;
  toDouble(dev, src.type(), src.raw(), buf[0]->data<double>(), src.size());
  for(int k = 0; k < r; ++k) {
    int a = adjoint ? r - 1 - k : k;
    const ops::ResizeTaps& t = taps[size_t(a)];
    if(t.identity) continue;
    const int64_t outer = count(dims, 0, size_t(a)), inner = count(dims, size_t(a) + 1, dims.size());
    const double* from = buf[cur]->data<double>();
    double* to = buf[1 - cur]->data<double>();
    Tensor w = upload(t.w, Type::float64);
    if(!adjoint) {
      std::vector<uint8_t> ext(t.extrap.begin(), t.extrap.end());
      Tensor idx = upload(t.idx, Type::int64), ex = upload(ext, Type::uint8);
      resizeAxis(dev, from, to, outer, t.in, t.out, inner, idx->data<int64_t>(), w->data<double>(),
                 ex->data<uint8_t>(), t.n, kc.attrs.f("extrapolation_value"));
      dims[size_t(a)] = t.out;
    } else {
      // Per input index p, the (j, k) that add into it, ascending: the CPU's
      // loop order (j, then k) for each destination.
      std::vector<int64_t> starts(size_t(t.in + 1), 0), lists;
      for(int64_t j = 0; j < t.out; ++j)
        for(int64_t q = 0; q < t.n && !t.extrap[size_t(j)]; ++q)
          if(t.w[size_t(j * t.n + q)] != 0) ++starts[size_t(t.idx[size_t(j * t.n + q)] + 1)];
      for(int64_t p = 0; p < t.in; ++p) starts[size_t(p + 1)] += starts[size_t(p)];
      lists.resize(size_t(starts.back()));
      std::vector<int64_t> next(starts.begin(), starts.end() - 1);
      for(int64_t j = 0; j < t.out; ++j)
        for(int64_t q = 0; q < t.n && !t.extrap[size_t(j)]; ++q)
          if(t.w[size_t(j * t.n + q)] != 0) lists[size_t(next[size_t(t.idx[size_t(j * t.n + q)])]++)] = j * t.n + q;
      Tensor st = upload(starts, Type::int64), ls = upload(lists, Type::int64);
      resizeAxisAdjoint(dev, from, to, outer, t.in, t.out, inner, w->data<double>(), st->data<int64_t>(),
                        ls->data<int64_t>(), t.n);
      dims[size_t(a)] = t.in;
    }
    cur = 1 - cur;
  }
  fromDouble(dev, dst.type(), buf[cur]->data<double>(), dst.raw(), dst.size());
}

// y = x resized (interpolated) to the output's shape
ONYX_GPU_KERNEL("resize", [](KernelCtx& c) {
  resizeRunGpu(c, *c.in[0], c.out, c.in[0]->shape(), c.out.shape(), false);
});

// dx = the adjoint of resize applied to dy
ONYX_GPU_KERNEL("resize_grad", [](KernelCtx& c) {
  const IntList& is = c.attrs.ints("input_shape");
  resizeRunGpu(c, *c.in[0], c.out, Shape(Shape::Dims(is.begin(), is.end())), c.in[0]->shape(), true);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
