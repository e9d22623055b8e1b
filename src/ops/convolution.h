// Convolution (src/ops/convolution.cpp). Layout NCHW: x is [N, C, spatial...]
// with 1 to 3 spatial dims. Lists follow ONNX: strides and dilations have one
// entry per spatial dim (empty: all 1), pads are [begin_1, .., begin_n,
// end_1, .., end_n] (empty: all 0).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

struct ConvOptions {
  std::vector<int64_t> strides, dilations, pads;
  std::vector<int64_t> outputPadding;  // conv_transpose only: extra output at the end of each spatial dim
  int64_t group = 1;
};

// y[n, m, o..] = b[m] + sum_{c, k..} W[m, c, k..] * x[n, g*C/group + c, o*s + k*d - pad_begin]
// with W [M, C/group, k..], b [M] or null; out of range positions read 0.
Expr conv(Expr x, Expr W, Expr b = nullptr, const ConvOptions& o = {});
// conv followed by an epilogue, in one kernel (oneDNN post-ops in float32):
// y = post(act(conv(x, W, b)) + residual). activation: "" (none), relu,
// leaky_relu (alpha), clip (min alpha, max beta), hard_sigmoid (alpha, beta),
// hard_swish, swish, gelu, gelu_tanh, sigmoid, tanh; residual shaped like y
// or null; postActivation "" or "relu" (after the residual add).
struct FusedConvOptions {
  std::string activation;
  double alpha = 0, beta = 0;
  std::string postActivation;
};
Expr fused_conv(Expr x, Expr W, Expr b, Expr residual, const FusedConvOptions& f, const ConvOptions& o = {});
// The transpose (adjoint in x) of conv: x [N, C, ..], W [C, M/group, k..],
// b [M] or null; output size s*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end.
Expr conv_transpose(Expr x, Expr W, Expr b = nullptr, const ConvOptions& o = {});
// Gradient of conv w.r.t. its weight: dW[m, c, k..] = sum_{n, o..} dy[n, m, o..] *
// x[n, g*C/group + c, o*s + k*d - pad_begin], kernel size given explicitly.
Expr conv_grad_weight(Expr x, Expr dy, const std::vector<int64_t>& kernel, const ConvOptions& o = {});

// ---- For kernels: the sizes of a conv node's convolution, which the GPU
// kernels (backend/cuda/ops_convolution.cpp) share; the geometry is
// backend/cpu/conv_geom.h's.
struct KernelCtx;
struct InferCtx;
namespace ops {
// From a conv node's attributes (strides, pads, dilations, group).
host::ConvDims convDims(const Shape& x, const Shape& pos, const std::vector<int64_t>& kernel, const Attrs& a);
// conv_transpose's: the convolution whose adjoint it is (image = its output).
host::ConvDims transposedDims(const KernelCtx& c);
// The output shape of a conv over x (shape xs) with weights ws under the
// node's strides/dilations/pads/group, every size checked (conv's inference;
// qlinear_conv's too).
Shape inferConvWindow(InferCtx& c, const Shape& xs, const Shape& ws);
// ONNX Conv's attributes (kernel_shape, strides, dilations, group, pads) for
// the node being exported, its x of shape xs and W of shape ws; negative
// pads are an error (QLinearConv's export).
OnnxAttrs convOnnxAttrs(OnnxExportCtx& c, const Shape& xs, const Shape& ws);
// For tests: how many float32 weight gradients ran as one GEMM per block of
// samples (small images; ops/convolution.cpp) since the process started.
uint64_t convGradWeightGemmRuns();
// ... and how many ran as one GEMM per tap over a padded grid (stride 1).
uint64_t convGradWeightGridRuns();
}  // namespace ops

// ---- ONNX import helpers of the window ops, shared by the import rules of
// convolution.cpp and pooling.cpp and the composites of
// converters/import_pooling.cpp and import_quantization.cpp.

// ONNX auto_pad / pads -> explicit pads for x's spatial dims.
std::vector<int64_t> importPads(OnnxImportCtx& c, const Shape& xs, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);
// List attribute `name` with one entry per spatial dim (absent: all `def`).
std::vector<int64_t> importList(OnnxImportCtx& c, const char* name, int nd, int64_t def);
// Kernel shape from W, checked against the optional kernel_shape attribute.
std::vector<int64_t> importKernelFromW(OnnxImportCtx& c, Expr W);
// An ONNX Conv-style node's options (strides, dilations, group, pads from
// auto_pad or pads) for x and W: Conv's and ConvInteger's import.
ConvOptions importConvOptions(OnnxImportCtx& c, Expr x, Expr W);
// Input i, or a null Expr when the node leaves the optional input out.
Expr optionalInput(OnnxImportCtx& c, size_t i);
// Fails unless x is [N, C, spatial..] with 1 to 3 spatial dims.
void checkSpatialInput(OnnxImportCtx& c, Expr x);

}  // namespace onyx
