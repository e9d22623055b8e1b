// Vision ops (src/ops/vision.cpp): grid sampling and affine grids, RoI
// align, non-maximum suppression. Layout NCHW (NCDHW for volumetric).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/core/tensor.h>
#include <onyx/graph/node.h>

namespace onyx {

class ExpressionGraph;

struct GridSampleOptions {
  std::string mode = "linear";        // nearest, linear (bilinear/trilinear), cubic (bicubic, A = -0.75)
  std::string paddingMode = "zeros";  // zeros, border, reflection: what positions outside x read
  // true: -1 and 1 are the centres of the corner pixels; false: their outer edges.
  bool alignCorners = false;
};

// ONNX GridSample: x [N, C, D1..Dr], grid [N, O1..Or, r] of normalised
// coordinates in [-1, 1] (grid[.., 0] indexes the last dim of x, grid[.., 1]
// the one before, ..); y [N, C, O1..Or] = x interpolated at each grid point.
// Differentiable in x and in grid (the nearest mode's grid gradient is 0);
// second derivatives only in x. A grid of another float type is cast to x's.
Expr grid_sample(Expr x, Expr grid, const GridSampleOptions& o = {});

// ONNX AffineGrid: theta [N, 2, 3] (or [N, 3, 4]) applied to the normalised
// coordinates (x, y[, z], 1) of every position of an output of spatial size
// `spatial` ([H, W] or [D, H, W]); result [N, H, W, 2] (or [N, D, H, W, 3]),
// ready for grid_sample. Built from matmul: differentiable in theta.
Expr affine_grid(Expr theta, const std::vector<int64_t>& spatial, bool alignCorners = false);

struct RoiAlignOptions {
  std::string mode = "avg";  // avg, or max (ONNX's: the max over samples of each corner's weighted value)
  int64_t outputHeight = 1, outputWidth = 1;
  int64_t samplingRatio = 0;  // samples per bin and axis; 0: ceil(roi size / output size), per roi
  double spatialScale = 1;    // roi coordinates are multiplied by it
  // half_pixel: roi coordinates shifted by -0.5 pixel; output_half_pixel:
  // no shift and rois at least 1 pixel wide (ONNX RoiAlign-10 behaviour).
  std::string coordinateTransformationMode = "half_pixel";
};

// ONNX RoiAlign: x [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2), batch
// indices [R] (int32/int64) -> [R, C, outputHeight, outputWidth], bilinear
// samples averaged (or maxed) per bin. Differentiable in x; the rois get no
// gradient (they are treated as constants, as in torchvision's roi_align).
Expr roi_align(Expr x, Expr rois, Expr batchIndices, const RoiAlignOptions& o = {});

struct DeformConvOptions {
  std::vector<int64_t> strides, dilations, pads;  // 2 entries each (pads: 4, begin then end); empty: 1, 1, 0
  int64_t group = 1;        // groups of input/output channels, as in conv
  int64_t offsetGroup = 1;  // groups of input channels sharing one set of offsets (and mask)
};

// ONNX DeformConv (2-D): conv whose kernel taps are moved by learned
// offsets. x [N, C, H, W], W [M, C/group, kh, kw], offset
// [N, offsetGroup*kh*kw*2, oh, ow] as (dy, dx) per tap, b [M] or null, mask
// [N, offsetGroup*kh*kw, oh, ow] or null (ones). Each tap reads x bilinearly
// at (i*s - pad + k*d + offset) with zeros outside, times the mask. Built from
// grid_sample, mul and matmul: differentiable in every float input.
Expr deform_conv(Expr x, Expr W, Expr offset, Expr b = nullptr, Expr mask = nullptr,
                 const DeformConvOptions& o = {});

// ONNX NonMaxSuppression, computed now from the data of boxes [B, S, 4] and
// scores [B, C, S]: int64 [n, 3] rows (batch, class, box) of the boxes kept
// per batch and class, in order of decreasing score, each box suppressing
// later ones whose IoU with it is > iouThreshold; at most maxPerClass per
// class, only scores > scoreThreshold when hasScoreThreshold. Boxes are
// corners (y1, x1, y2, x2) in any order, or (x_center, y_center, width,
// height) with centerPointBox. The result is a constant (no gradient).
Expr non_max_suppression(ExpressionGraph& graph, const Tensor& boxes, const Tensor& scores, int64_t maxPerClass,
                         double iouThreshold, double scoreThreshold, bool hasScoreThreshold = true,
                         bool centerPointBox = false);
Expr non_max_suppression(Expr boxes, Expr scores, int64_t maxPerClass, double iouThreshold = 0,
                         double scoreThreshold = 0, bool hasScoreThreshold = true, bool centerPointBox = false);

}  // namespace onyx
