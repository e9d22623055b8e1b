// GPU kernels of ops/convolution.cpp's ops: cuDNN's forward, backward-data
// (conv_transpose) and backward-filter (conv_grad_weight) passes where cuDNN
// takes the case (cudnn.cu); otherwise the same windows and GEMMs as the
// CPU, one sample after the other on the device's stream (im2col / col2im
// in conv.cu, GEMMs through cuBLAS), col in the graph's workspace. The
// sizes are the CPU's (ops::convDims in ops/convolution.h).
#include <functional>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/convolution.h>

namespace onyx {
namespace cuda {
namespace {

using Geom = host::ConvGeom;
using host::ConvDims;
using host::spatialDims;
using ops::convDims;
using ops::transposedDims;

// The device and element type of a GPU conv kernel's output, and element
// offsets into its (type-erased) buffers.
struct GpuBufs {
  size_t dev;
  Type t;
  int64_t e;  // bytes per element
  explicit GpuBufs(const TensorBase& out)
      : dev(out.getDeviceId().no), t(out.type()), e(typeBits(out.type()) / 8) {}
  char* at(void* p, int64_t i) const { return static_cast<char*>(p) + i * e; }
  const char* at(const void* p, int64_t i) const { return static_cast<const char*>(p) + i * e; }
};

// n bytes of the graph's workspace for cuDNN, held by `keep`.
std::function<void*(size_t)> workspaceOf(KernelCtx& c, Tensor& keep) {
  return [&c, &keep](size_t bytes) {
    keep = c.scratch(Shape{static_cast<int64_t>(bytes)}, Type::uint8);
    return keep->raw();
  };
}

void convGpu(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& wt = *c.in[1];
  const TensorBase* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  const ConvDims cd = convDims(xt.shape(), c.out.shape(), spatialDims(wt.shape()), c.attrs);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.C, M = cd.M, G = cd.G, Cg = cd.Cg, Mg = cd.Mg, CK = cd.CK, P = cd.P;
  const GpuBufs b(c.out);
  // cuDNN where it takes the case (backend/cuda/cudnn.cu), else the CPU's
  // windows and GEMMs.
  Tensor ws;
  if(cudnnConvForward(b.dev, b.t, xt.raw(), wt.raw(), c.out.raw(), N, C, M, G, g, workspaceOf(c, ws))) {
    if(bias) addChannelBias(b.dev, b.t, c.out.raw(), bias->raw(), N, M, P);
    return;
  }
  const bool direct = cd.direct;
  Tensor col = direct ? Tensor() : c.scratch(Shape(Shape::Dims{CK, P}), b.t);
  for(int64_t n = 0; n < N; ++n)
    for(int64_t grp = 0; grp < G; ++grp) {
      const char* src = b.at(xt.raw(), (n * C + grp * Cg) * g.imgSize);
      if(!direct) im2col(b.dev, b.t, src, Cg, g, col->raw());
      gemm(b.dev, b.t, false, false, Mg, P, CK, 1.0, b.at(wt.raw(), grp * Mg * CK), CK,
           direct ? static_cast<const void*>(src) : col->raw(), P, 0.0, b.at(c.out.raw(), (n * M + grp * Mg) * P), P);
    }
  if(bias) addChannelBias(b.dev, b.t, c.out.raw(), bias->raw(), N, M, P);
}

void convTransposeGpu(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& wt = *c.in[1];
  const TensorBase* bias = c.in.size() > 2 ? c.in[2] : nullptr;
  const ConvDims cd = transposedDims(c);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.M, G = cd.G, Cg = cd.Mg, Mg = cd.Cg, M = cd.C, MK = cd.CK, P = cd.P;
  const GpuBufs b(c.out);
  // The adjoint of the convolution cd describes (image cd.C channels, output
  // cd.M): cuDNN's backward-data pass, where it takes the case.
  Tensor ws;
  if(cudnnConvBackwardData(b.dev, b.t, wt.raw(), xt.raw(), c.out.raw(), N, cd.C, cd.M, G, g, workspaceOf(c, ws))) {
    if(bias) addChannelBias(b.dev, b.t, c.out.raw(), bias->raw(), N, M, g.imgSize);
    return;
  }
  const bool direct = cd.direct;
  Tensor col = direct ? Tensor() : c.scratch(Shape(Shape::Dims{MK, P}), b.t);
  for(int64_t n = 0; n < N; ++n)
    for(int64_t grp = 0; grp < G; ++grp) {
      const char* xg = b.at(xt.raw(), (n * C + grp * Cg) * P);
      char* yg = b.at(c.out.raw(), (n * M + grp * Mg) * g.imgSize);
      // col [Mg*K, P] = W_g^T x_g with W_g stored [Cg, Mg*K]; col2im writes
      // the group's whole image (each group its own channels).
      gemm(b.dev, b.t, true, false, MK, P, Cg, 1.0, b.at(wt.raw(), grp * Cg * MK), MK, xg, P, 0.0,
           direct ? static_cast<void*>(yg) : col->raw(), P);
      if(!direct) col2im(b.dev, b.t, col->raw(), Mg, g, yg);
    }
  if(bias) addChannelBias(b.dev, b.t, c.out.raw(), bias->raw(), N, M, g.imgSize);
}

void convGradWeightGpu(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& dyt = *c.in[1];
  const ConvDims cd = convDims(xt.shape(), dyt.shape(), spatialDims(c.out.shape()), c.attrs);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.C, M = cd.M, G = cd.G, Cg = cd.Cg, Mg = cd.Mg, CK = cd.CK, P = cd.P;
  const GpuBufs b(c.out);
  Tensor ws;
  if(cudnnConvBackwardFilter(b.dev, b.t, xt.raw(), dyt.raw(), c.out.raw(), N, C, M, G, g, workspaceOf(c, ws)))
    return;
  const bool direct = cd.direct;
  Tensor col = direct ? Tensor() : c.scratch(Shape(Shape::Dims{CK, P}), b.t);
  fillZero(b.dev, c.out.raw(), c.out.bytes());
  for(int64_t n = 0; n < N; ++n)
    for(int64_t grp = 0; grp < G; ++grp) {
      const char* src = b.at(xt.raw(), (n * C + grp * Cg) * g.imgSize);
      if(!direct) im2col(b.dev, b.t, src, Cg, g, col->raw());
      // dW_g [Mg, CK] += dy_g [Mg, P] col^T
      gemm(b.dev, b.t, false, true, Mg, CK, P, 1.0, b.at(dyt.raw(), (n * M + grp * Mg) * P), P,
           direct ? static_cast<const void*>(src) : col->raw(), P, 1.0, b.at(c.out.raw(), grp * Mg * CK), CK);
    }
}

ONYX_GPU_KERNEL("conv", convGpu);
ONYX_GPU_KERNEL("conv_transpose", convTransposeGpu);
ONYX_GPU_KERNEL("conv_grad_weight", convGradWeightGpu);

}  // namespace
}  // namespace cuda
}  // namespace onyx
