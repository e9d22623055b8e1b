// Normalisation layers of src/ops/norm.cpp. Each is a composite of registry
// ops (reductions, layer_norm, element-wise ops), so gradients come from its
// building blocks. Layouts are channel-first, [N, C, d1, ...], as in ONNX;
// per-channel parameters have shape [C].
#pragma once
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {

// Inference batch norm: y = (x - mean) / sqrt(var + eps) * scale + bias per
// channel (axis 1), with stored statistics mean and var.
Expr batch_norm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps = 1e-5);

// y[n, c, ...] = x[n, c, ...] * s[c] + t[c] for x [N, C, ...] (float32 or
// float64) and s, t [C]: one pass over x; with relu, max(y, 0) as relu
// computes it (the fuse_channel_affine pass's form of BatchNorm -> Relu).
Expr channel_affine(Expr x, Expr s, Expr t, bool relu = false);
// The same of x = concat(xs, axis 1), reading the parts in place (the
// pass's form of Concat -> BatchNorm, DenseNet's pattern).
Expr channel_affine(const std::vector<Expr>& xs, Expr s, Expr t, bool relu = false);

// Training batch norm: the statistics are the batch's, over every axis but 1
// (var is the population variance). mean and var have shape [C].
struct BatchNormResult {
  Expr y, mean, var;
};
BatchNormResult batch_norm_train(Expr x, Expr scale, Expr bias, double eps = 1e-5);

// The fused training batch norm that batch_norm_train runs, for x [N, C,
// ...] (float32, float64): m [2, C] = [mean; population variance] over every
// axis but 1, and y = (x - mean) / sqrt(var + eps) * scale + bias with
// mean, var, scale and bias [C]. batch_norm_grad_sums and
// batch_moments_grad are the pieces of their gradients (norm.cpp).
Expr batch_moments(Expr x);
Expr batch_normalize(Expr x, Expr mean, Expr var, Expr scale, Expr bias, double eps = 1e-5);
Expr batch_moments_grad(Expr x, Expr m, Expr dm);
Expr batch_norm_grad_sums(Expr dy, Expr x, Expr mean);

// y = (x - mean) / sqrt(var + eps) * scale + bias with statistics per
// (sample, channel) over the spatial dims d1, ... (x of rank >= 3).
Expr instance_norm(Expr x, Expr scale, Expr bias, double eps = 1e-5);

// Channels split into `groups` consecutive groups; statistics per (sample,
// group) over the group's channels and the spatial dims; then per-channel
// scale and bias ([C]). C must be a multiple of groups.
Expr group_norm(Expr x, int64_t groups, Expr scale, Expr bias, double eps = 1e-5);

// y = x / sqrt(mean(x^2) + eps) * scale, mean over the dims from `axis` to
// the end; scale broadcasts to those dims.
Expr rms_norm(Expr x, Expr scale, int axis = -1, double eps = 1e-5);

// y = x / ||x||_p along `axis`, p = 1 or 2 (ONNX LpNormalization; a line of
// zeros stays zeros, as in ONNX's reference outputs).
Expr lp_normalize(Expr x, int axis = -1, int p = 2);

// y = (x - mean) / (sqrt(var) + 1e-9) with mean and var over `axes` (ONNX
// MeanVarianceNormalization).
Expr mean_variance_norm(Expr x, const std::vector<int>& axes = {0, 2, 3});

// Local response normalisation across channels (ONNX LRN):
// y = x / (bias + alpha / size * sum of x^2 over the `size` channels around
// c)^beta; the window is [c - (size-1)/2, c + size/2] clipped to the channels.
Expr lrn(Expr x, int64_t size, double alpha = 1e-4, double beta = 0.75, double bias = 1.0);

// The building blocks of the batch norms above, shared with the ONNX import
// of BatchNormalization (converters/import_normalization.cpp), whose older
// forms (spatial=0: parameters per activation, statistics over axis 0 only)
// the layers do not take.
namespace norm {
// p [C] viewed so that it broadcasts along axis 1 of x: [C, 1, ..., 1] with
// x's rank - 1 dims. With spatial false, p [C, d1, ...] already lines up with
// x's dims 1.. and is returned as is.
Expr perChannel(Expr p, const Shape& x, bool spatial = true);
// Every axis of a tensor of rank `rank` but 1 (the channel axis).
std::vector<int> axesExcept1(int rank);
// y = (x - mean) / sqrt(var + eps) * scale + bias as x * f + (bias - mean * f)
// with f = scale / sqrt(var + eps) computed on the small parameter tensors;
// all four already broadcast to x.
Expr affineNorm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps);
// The same with scale, bias, mean and var of shape [C] (spatial), as one
// channel_affine: where all four are constants on the CPU (a model run for
// inference) its s and t are computed here, once; otherwise they are small
// expressions that gradients flow through. Types channel_affine does not
// take fall back to affineNorm.
Expr channelNorm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps);
// Normalisation by the batch's statistics over `axes`, with the population
// variance; scale and bias already broadcast to x. mean and var keep the
// reduced axes as size-1 dims.
BatchNormResult normalizeByBatch(Expr x, const std::vector<int>& axes, Expr scale, Expr bias, double eps);
}  // namespace norm

}  // namespace onyx
