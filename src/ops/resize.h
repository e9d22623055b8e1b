// Resizing by interpolation (src/ops/resize.cpp), ONNX Resize semantics on
// any rank: nearest, linear (bilinear, trilinear, ..) and cubic.
#pragma once
#include <string>
#include <vector>

#include <onyx/core/shape.h>
#include <onyx/graph/node.h>

namespace onyx {

struct ResizeOptions {
  std::string mode = "nearest";  // nearest, linear, cubic
  // How output index y maps to input coordinate x: half_pixel, half_pixel_symmetric,
  // pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize.
  std::string coordinateTransformationMode = "half_pixel";
  // Nearest rounding: round_prefer_floor, round_prefer_ceil, floor, ceil, or
  // simple (floor when upsampling, ceil when downsampling: ONNX Upsample and Resize-10).
  std::string nearestMode = "round_prefer_floor";
  double cubicCoeffA = -0.75;
  bool excludeOutside = false;      // weights of taps outside the input are 0 (and the rest renormalised)
  double extrapolationValue = 0;    // tf_crop_and_resize: value where x falls outside the input
  bool antialias = false;           // linear/cubic downsampling widens the filter by 1/scale
  std::vector<double> roi;          // tf_crop_and_resize: [start_1.., end_1..] per dim, normalised
};

// x resized to `sizes` (one entry per dim). `scales` (one per dim, > 0) are
// the factors the coordinate mapping uses; empty means sizes / x's dims.
Expr resize(Expr x, const Shape& sizes, const ResizeOptions& o = {}, const std::vector<double>& scales = {});
// x resized by `scales`: sizes floor(dim * scale).
Expr resize_by(Expr x, const std::vector<double>& scales, const ResizeOptions& o = {});
// Adjoint of resize (its gradient): dy of the resized shape back onto `inputShape`.
Expr resize_grad(Expr dy, const Shape& inputShape, const ResizeOptions& o = {}, const std::vector<double>& scales = {});

// ---- For kernels: host-side helpers of resize.cpp that the GPU kernels
// (backend/cuda/ops_resize.cpp) share.
namespace ops {
// The taps of one axis: output j reads input idx[j*n + t] with weight
// w[j*n + t] (t < n); identity: the axis is copied as it is.
struct ResizeTaps {
  int64_t in = 0, out = 0, n = 0;
  bool identity = false;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> extrap;  // tf_crop_and_resize: output j is extrapolation_value
};
// Each axis's taps for the resize from inShape to outShape with a resize
// node's attributes (resize and resize_grad's).
std::vector<ResizeTaps> resizeTaps(const Attrs& a, const Shape& inShape, const Shape& outShape);
}  // namespace ops

}  // namespace onyx
