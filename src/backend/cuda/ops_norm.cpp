// GPU kernels of ops/norm.cpp's training batch norm (device code in
// batch_norm.cu).
#include <algorithm>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>

namespace onyx {
namespace cuda {
namespace {

BatchNormDims dimsOf(const Shape& s) {
  const int64_t N = s[0], C = s[1];
  return {N, C, s.elements() / std::max<int64_t>(1, N * C)};
}

// m = [mean; population variance] per channel
ONYX_GPU_KERNEL("batch_moments", [](KernelCtx& c) {
  batchMoments(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.out.raw(), dimsOf(c.in[0]->shape()));
});

// y = x * f + (bias - mean * f), f = scale / sqrt(var + eps)
ONYX_GPU_KERNEL("batch_normalize", [](KernelCtx& c) {
  batchNormalize(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.in[1]->raw(), c.in[2]->raw(), c.in[3]->raw(),
                 c.in[4]->raw(), c.in[5]->raw(), c.out.raw(), dimsOf(c.in[0]->shape()));
});

// s = [sum dy; sum dy (x - mean)] per channel
ONYX_GPU_KERNEL("batch_norm_grad_sums", [](KernelCtx& c) {
  batchNormGradSums(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.in[1]->raw(), c.in[2]->raw(), c.out.raw(),
                    dimsOf(c.in[1]->shape()));
});

// dx = (dm[0] + 2 dm[1] (x - mean)) / count
ONYX_GPU_KERNEL("batch_moments_grad", [](KernelCtx& c) {
  batchMomentsGrad(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.in[1]->raw(), c.in[2]->raw(), c.out.raw(),
                   dimsOf(c.in[0]->shape()));
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
