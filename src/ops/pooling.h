// Pooling (src/ops/pooling.cpp). Layout NCHW: x is [N, C, spatial...] with 1
// to 3 spatial dims; windows slide as a convolution's (convolution.h), with
// the same ONNX lists: strides and dilations one entry per spatial dim
// (empty: all 1), pads [begin_1, .., begin_n, end_1, .., end_n] (empty: all 0).
#pragma once
#include <cstdint>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/core/shape.h>
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

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
// The gradient of max_pool(x): dy added at the first maximum of each window
// of x (max_pool_indices's choice), shaped like x.
Expr max_pool_grad(Expr dy, Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o = {});
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

// ---- For kernels: a pool node's windows, which the GPU kernels
// (backend/cuda/ops_pooling.cpp) share; the geometry is
// backend/cpu/conv_geom.h's.
namespace ops {
// From a pool node's attributes, over x giving y.
host::PoolGeom poolGeom(const Attrs& a, const Shape& x, const Shape& y);
}  // namespace ops

// ---- ONNX import helper, shared with converters/import_pooling.cpp.

// Reads the attributes shared by the ONNX pools into kernel and options.
std::vector<int64_t> importPool(OnnxImportCtx& c, Expr x, PoolOptions& o);

}  // namespace onyx
