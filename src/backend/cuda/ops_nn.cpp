// GPU kernels of ops/nn.cpp's ops: softmax, log_softmax, hardmax,
// layer_norm (and its gradients), cross_entropy (device code in nn.cu and lines.cu; statistics
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
// dx = y * (dy - sum(dy * y)) along `axis`
ONYX_GPU_KERNEL("softmax_grad", [](KernelCtx& c) {
  softmaxGrad(*c.in[0], *c.in[1], c.out, c.in[1]->shape().axis(c.attrs.i("axis")));
});
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

// layer_norm's dx, and its gamma and beta gradients as [2, N] row sums
ONYX_GPU_KERNEL("layer_norm_grad", [](KernelCtx& c) {
  const int axis = c.in[1]->shape().axis(c.attrs.i("axis"));
  layerNormGrad(*c.in[0], *c.in[1], *c.in[2], c.out, axis, ops::layerNormEps(c.attrs));
});
ONYX_GPU_KERNEL("layer_norm_param_grad", [](KernelCtx& c) {
  const TensorBase& x = *c.in[1];
  const int axis = x.shape().axis(c.attrs.i("axis"));
  const int64_t n = c.out.shape().dims()[1];
  const int64_t rows = n > 0 ? x.size() / n : 0;
  Tensor stats = c.scratch(Shape({std::max<int64_t>(2 * rows, 1)}), Type::float64);
  layerNormParamGrad(*c.in[0], x, c.out, axis, ops::layerNormEps(c.attrs), stats->data<double>());
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
