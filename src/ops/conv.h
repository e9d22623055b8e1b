// Convolution and pooling (src/ops/conv.cpp). Layout NCHW: x is
// [N, C, spatial...] with 1 to 3 spatial dims. Lists follow ONNX: strides and
// dilations have one entry per spatial dim (empty: all 1), pads are
// [begin_1, .., begin_n, end_1, .., end_n] (empty: all 0).
#pragma once
#include <cstdint>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/graph/node.h>
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
// The transpose (adjoint in x) of conv: x [N, C, ..], W [C, M/group, k..],
// b [M] or null; output size s*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end.
Expr conv_transpose(Expr x, Expr W, Expr b = nullptr, const ConvOptions& o = {});
// Gradient of conv w.r.t. its weight: dW[m, c, k..] = sum_{n, o..} dy[n, m, o..] *
// x[n, g*C/group + c, o*s + k*d - pad_begin], kernel size given explicitly.
Expr conv_grad_weight(Expr x, Expr dy, const std::vector<int64_t>& kernel, const ConvOptions& o = {});

struct PoolOptions {
  std::vector<int64_t> strides, pads, dilations;
  bool ceilMode = false;         // output size rounded up (last window must start inside input or begin pad)
  bool countIncludePad = false;  // average_pool: the divisor counts padding positions
};

// Max over each window (padding never wins). The gradient goes to the first maximum.
Expr max_pool(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o = {});
// int64 position of each window's maximum in x, flattened over the whole
// tensor (ONNX MaxPool's Indices); storageOrder 1 numbers spatial dims column-major.
Expr max_pool_indices(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o = {}, int storageOrder = 0);
// Mean over each window.
Expr average_pool(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o = {});
// Adjoint of average_pool: dy spread back over the windows onto `inputShape`.
Expr average_pool_grad(Expr dy, const Shape& inputShape, const std::vector<int64_t>& kernel,
                       const PoolOptions& o = {});
// (sum over each window of |x|^p)^(1/p), padding counting as 0 (ONNX LpPool).
Expr lp_pool(Expr x, double p, const std::vector<int64_t>& kernel, const PoolOptions& o = {});

// Over all spatial dims, kept as size 1: [N, C, 1, ..].
Expr global_average_pool(Expr x);
Expr global_max_pool(Expr x);
Expr global_lp_pool(Expr x, double p = 2);

// Inverse of max_pool with indices: zeros of `outputShape` with
// y.flat[indices[i]] = x[i] (ONNX MaxUnpool).
Expr max_unpool(Expr x, Expr indices, const Shape& outputShape);

// ---- For kernels: the geometry of conv.cpp's kernels, which the GPU
// kernels (backend/cuda/ops_conv.cpp) share.
struct KernelCtx;
namespace ops {
// The sizes of a convolution over x [N, C, img..] with windows at pos
// [N, M, pos..] (y, or dy for the weight gradient) and taps `kernel`: G
// groups of Cg input and Mg output channels, CK = Cg * taps rows of col,
// P positions; direct when col is x itself (1x1, stride 1, no pads).
struct ConvDims {
  host::ConvGeom g;
  int64_t N, C, M, G, Cg, Mg, CK, P;
  bool direct;
};
// From a conv node's attributes (strides, pads, dilations, group).
ConvDims convDims(const Shape& x, const Shape& pos, const std::vector<int64_t>& kernel, const Attrs& a);
// conv_transpose's: the convolution whose adjoint it is (image = its output).
ConvDims transposedDims(const KernelCtx& c);
// The spatial dims of s (after N and C).
std::vector<int64_t> spatialDims(const Shape& s);
// A pool's windows over x [N, C, img..] giving y, from a pool node's
// attributes; planes = N * C.
struct PoolGeom {
  host::ConvGeom g;
  int64_t planes = 0;
};
PoolGeom poolGeom(const Attrs& a, const Shape& x, const Shape& y);
}  // namespace ops

// ---- ONNX import helpers, shared by the import rules of src/ops/conv.cpp and
// the composites of converters/import_pooling.cpp and import_quantization.cpp.

// ONNX auto_pad / pads -> explicit pads for x's spatial dims.
std::vector<int64_t> importPads(OnnxImportCtx& c, const Shape& xs, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);
// List attribute `name` with one entry per spatial dim (absent: all `def`).
std::vector<int64_t> importList(OnnxImportCtx& c, const char* name, int nd, int64_t def);
// Kernel shape from W, checked against the optional kernel_shape attribute.
std::vector<int64_t> importKernelFromW(OnnxImportCtx& c, Expr W);
// Input i, or a null Expr when the node leaves the optional input out.
Expr optionalInput(OnnxImportCtx& c, size_t i);
// Fails unless x is [N, C, spatial..] with 1 to 3 spatial dims.
void checkSpatialInput(OnnxImportCtx& c, Expr x);
// Reads the attributes shared by the ONNX pools into kernel and options.
std::vector<int64_t> importPool(OnnxImportCtx& c, Expr x, PoolOptions& o);

}  // namespace onyx
