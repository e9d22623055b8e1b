// GPU kernels of ops/nn.cpp's ops: softmax, log_softmax, hardmax,
// layer_norm, cross_entropy (device code in nn.cu and lines.cu; statistics
// in double as the CPU's). dropout_mask draws on the host (gpuOnHost).
#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/nn.h>

namespace onyx {
namespace cuda {
namespace {

int axisAttr(const KernelCtx& c) { return c.in[0]->shape().axis(c.attrs.i("axis")); }

// y = exp(x - max) / sum(exp(x - max)) along `axis`
ONYX_GPU_KERNEL("softmax", [](KernelCtx& c) { softmax(*c.in[0], c.out, axisAttr(c), false); });
// y = x - max - log(sum(exp(x - max))) along `axis`
ONYX_GPU_KERNEL("log_softmax", [](KernelCtx& c) { softmax(*c.in[0], c.out, axisAttr(c), true); });

// y = onehot(argmax(x, axis)) (the first maximum wins ties)
ONYX_GPU_KERNEL("hardmax", [](KernelCtx& c) {
  const ops::Lines ln = linesOf(*c.in[0], c.attrs);
  hardmax(c.out.getDeviceId().no, c.out.type(), c.in[0]->raw(), c.out.raw(), ln.outer, ln.n, ln.inner);
});

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the dims from axis on
ONYX_GPU_KERNEL("layer_norm", [](KernelCtx& c) {
  layerNorm(*c.in[0], *c.in[1], *c.in[2], c.out, axisAttr(c), ops::layerNormEps(c.attrs));
});

// y = -log_softmax(logits)[label] along the class axis
ONYX_GPU_KERNEL("cross_entropy", [](KernelCtx& c) {
  const TensorBase& logits = *c.in[0];
  const int axis = axisAttr(c);
  // Labels are checked on the host (a copy): a kernel cannot report a bad one.
  ops::checkLabels(*c.in[1]->hostCopy(), logits.shape().dims()[axis]);
  crossEntropy(logits, *c.in[1], c.out, axis);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
