// Expression operators of src/ops/nn.cpp: softmax family, layer norm,
// cross-entropy and dropout. Negative axes count from the end.
#pragma once
#include <vector>

#include <onyx/core/shape.h>
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

class ExpressionGraph;

// exp(x) / sum(exp(x)) along one axis (ONNX Softmax since opset 13). Float types.
Expr softmax(Expr x, int axis = -1);
Expr softmax_grad(Expr dy, Expr y, int axis = -1);  // y * (dy - sum(dy * y, axis)): softmax's gradient
// x - log(sum(exp(x))) along one axis, stable for large |x|.
Expr log_softmax(Expr x, int axis = -1);
// 1 at the first maximum along one axis, 0 elsewhere (ONNX Hardmax since
// opset 13). Not differentiable.
Expr hardmax(Expr x, int axis = -1);

// (x - mean) / sqrt(var + eps) * gamma + beta, with mean and var over the
// dims from `axis` to the end; gamma and beta broadcast to those dims.
Expr layer_norm(Expr x, Expr gamma, Expr beta, int axis = -1, double eps = 1e-5);
// Without affine parameters (gamma = 1, beta = 0 as constants).
Expr layer_norm(Expr x, int axis = -1, double eps = 1e-5);
// layer_norm's gradients (its backward builds them): dx given dy, and the
// [2, N] sums over the rows of dy * xhat and dy (N the normalised size).
Expr layer_norm_grad(Expr dy, Expr x, Expr gamma, int axis = -1, double eps = 1e-5);
Expr layer_norm_param_grad(Expr dy, Expr x, int axis = -1, double eps = 1e-5);

// Per-example loss -sum(q * log_softmax(logits)) over the class axis `axis`
// (default the last), with q = (1 - labelSmoothing) * onehot(labels) +
// labelSmoothing / classes. labels: int32 or int64, shape = logits' shape
// without the class axis; the result has the labels' shape (reduce it with
// sum or mean). A label outside [0, classes) is an onyx::Error at run time.
Expr cross_entropy(Expr logits, Expr labels, float labelSmoothing = 0.f, int axis = -1);

// Inverted dropout: x * mask with mask = bernoulli(1 - p) / (1 - p), drawn
// from the graph's random generator (setSeed). Returns x itself when
// !training, p == 0, or the graph is in inference mode.
Expr dropout(Expr x, float p, bool training = true);
// The mask alone: each element 1 / (1 - p) with probability 1 - p, else 0.
// Never merged with another mask (a stochastic op) and kept through
// checkpointing, so the backward pass sees the mask the forward pass used.
Expr dropout_mask(ExpressionGraph* graph, const Shape& shape, float p, Type type);

// ---- For kernels: host-side helpers of nn.cpp that the GPU kernels
// (backend/cuda/ops_nn.cpp) share.
namespace ops {
// The epsilon layer_norm computes with (its attribute, as ONNX stores it).
double layerNormEps(const Attrs& a);
// An onyx::Error naming the first label of `labels` (int32 or int64, on the
// host) outside [0, classes); kernels cannot report one.
void checkLabels(const TensorBase& labels, int64_t classes);
}  // namespace ops

// ---- ONNX import helper, shared by SoftmaxCrossEntropyLoss's import
// (src/ops/nn.cpp) and NegativeLogLikelihoodLoss's (converters/import_nn.cpp).

// ONNX NegativeLogLikelihoodLoss on log-probabilities lp [N, C, d1, ...] and
// targets [N, d1, ...], with the node's optional weight input 2 and its
// reduction / ignore_index attributes. Built from where/sum over a one-hot
// of the targets, so it is differentiable in lp (and in the weights).
Expr nllLossImport(OnnxImportCtx& c, Expr lp, Expr target);

}  // namespace onyx
