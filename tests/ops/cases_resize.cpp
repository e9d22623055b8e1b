// Harness cases for src/ops/resize.cpp. The reference evaluates every output
// element directly: the product over axes of 1-D interpolation weights,
// with the taps of each axis found from the spec's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include <onyx/ops/resize.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;
using V = std::vector<int64_t>;
using Taps = std::vector<std::pair<int64_t, double>>;

double cubicK(double t, double A) {
  t = std::fabs(t);
  if(t <= 1) return (A + 2) * t * t * t - (A + 3) * t * t + 1;
  if(t < 2) return A * t * t * t - 5 * A * t * t + 8 * A * t - 4 * A;
  return 0;
}

int64_t clampIdx(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

// Input coordinate of output index y along one axis; ext: outside the crop.
double coord(const ResizeOptions& o, double y, int64_t in, int64_t out, double scale, double r0, double r1, bool& ext) {
  const std::string& m = o.coordinateTransformationMode;
  double lenOut = scale * double(in);
  ext = false;
  if(m == "half_pixel") return (y + 0.5) / scale - 0.5;
  if(m == "pytorch_half_pixel") return lenOut > 1 ? (y + 0.5) / scale - 0.5 : -0.5;
  if(m == "asymmetric") return y / scale;
  if(m == "align_corners") return lenOut == 1 ? 0 : y * double(in - 1) / (lenOut - 1);
  if(m == "half_pixel_symmetric") {
    double adj = double(out) / lenOut;
    return double(in) / 2 * (1 - adj) + (y + 0.5) / scale - 0.5;
  }
  if(m == "tf_crop_and_resize") {
    double x = lenOut > 1 ? r0 * double(in - 1) + y * (r1 - r0) * double(in - 1) / (lenOut - 1)
                          : 0.5 * (r0 + r1) * double(in - 1);
    ext = x < 0 || x > double(in - 1);
    return x;
  }
  ADD_FAILURE() << "reference: unknown mode " << m;
  return 0;
}

Taps taps1d(const ResizeOptions& o, double x, int64_t in, double scale) {
  Taps t;
  if(o.mode == "nearest") {
    double fl = std::floor(x), frac = x - fl;
    const std::string& nm = o.nearestMode;
    double pick = nm == "round_prefer_floor" ? (frac <= 0.5 ? fl : fl + 1)
                  : nm == "round_prefer_ceil" ? (frac < 0.5 ? fl : fl + 1)
                  : nm == "floor" ? fl
                  : nm == "ceil" ? std::ceil(x)
                  : (scale < 1 ? std::ceil(x) : fl);  // "simple"
    t.push_back({clampIdx(int64_t(pick), in), 1.0});
    return t;
  }
  bool cubic = o.mode == "cubic";
  double radius = cubic ? 2 : 1;
  if(o.antialias && scale < 1) {
    // Every input index within the widened support.
    double sum = 0;
    for(int64_t j = int64_t(std::floor(x - radius / scale)) - 1; j <= int64_t(std::ceil(x + radius / scale)) + 1; ++j) {
      double d = (x - double(j)) * scale;
      double w = cubic ? cubicK(d, o.cubicCoeffA) : std::max(0.0, 1 - std::fabs(d));
      if(w == 0) continue;
      t.push_back({j, w});
      sum += w;
    }
    for(auto& p : t) p.second /= sum;
  } else if(!cubic) {
    double fl = std::floor(x), w1 = x - fl;
    t.push_back({int64_t(fl), 1 - w1});
    t.push_back({int64_t(fl) + 1, w1});
  } else {
    double fl = std::floor(x);
    for(int64_t j = int64_t(fl) - 1; j <= int64_t(fl) + 2; ++j) t.push_back({j, cubicK(x - double(j), o.cubicCoeffA)});
  }
  if(o.excludeOutside) {
    double sum = 0;
    for(auto& p : t) {
      if(p.first < 0 || p.first >= in) p.second = 0;
      sum += p.second;
    }
    for(auto& p : t) p.second /= sum;
  }
  for(auto& p : t) p.first = clampIdx(p.first, in);
  return t;
}

Ref refResize(const Ref& x, const V& sizes, const ResizeOptions& o, std::vector<double> scales) {
  size_t r = x.shape.size();
  if(scales.empty())
    for(size_t a = 0; a < r; ++a) scales.push_back(double(sizes[a]) / double(x.shape[a]));
  std::vector<std::vector<Taps>> taps(r);
  std::vector<std::vector<bool>> ext(r);
  for(size_t a = 0; a < r; ++a)
    for(int64_t j = 0; j < sizes[a]; ++j) {
      double r0 = o.roi.empty() ? 0 : o.roi[a], r1 = o.roi.empty() ? 1 : o.roi[a + r];
      bool e = false;
      double c = coord(o, double(j), x.shape[a], sizes[a], scales[a], r0, r1, e);
      ext[a].push_back(e);
      // An axis left alone (same size, scale 1) copies.
      bool same = sizes[a] == x.shape[a] && scales[a] == 1 && o.roi.empty();
      taps[a].push_back(same ? Taps{{j, 1.0}} : taps1d(o, c, x.shape[a], scales[a]));
    }
  Ref y = refOfShape(sizes);
  auto xs = refStrides(x.shape), ys = refStrides(sizes);
  for(int64_t f = 0; f < y.size(); ++f) {
    V j(r);
    bool outside = false;
    for(size_t a = 0; a < r; ++a) {
      j[a] = (f / ys[a]) % sizes[a];
      outside = outside || ext[a][size_t(j[a])];
    }
    if(outside) {
      y[f] = o.extrapolationValue;
      continue;
    }
    // Sum over the product of the per-axis taps.
    double acc = 0;
    std::function<void(size_t, int64_t, double)> rec = [&](size_t a, int64_t off, double w) {
      if(a == r) {
        acc += w * x[off];
        return;
      }
      for(auto& p : taps[a][size_t(j[a])]) rec(a + 1, off + p.first * xs[a], w * p.second);
    };
    rec(0, 0, 1.0);
    y[f] = acc;
  }
  return y;
}

ResizeOptions ro(std::string mode, std::string ctm, std::string nearest = "round_prefer_floor") {
  ResizeOptions o;
  o.mode = std::move(mode);
  o.coordinateTransformationMode = std::move(ctm);
  o.nearestMode = std::move(nearest);
  return o;
}

void resizeCase(const char* name, V xs, V sizes, ResizeOptions o, std::vector<double> scales = {}) {
  cases().push_back(OpCase{"resize", name, {in(xs, -2, 2)},
                           [=](Xs x) { return resize(x[0], Shape(sizes), o, scales); },
                           [=](Rs r) { return refResize(r[0], sizes, o, scales); }});
}

// Adjoint check: dx[i] = sum_o dy[o] * resize(unit vector i)[o].
void resizeGradCase(const char* name, V xs, V sizes, ResizeOptions o) {
  cases().push_back(OpCase{"resize_grad", name, {in(sizes)},
                           [=](Xs x) { return resize_grad(x[0], Shape(xs), o); },
                           [=](Rs r) {
                             Ref dx = refOfShape(xs);
                             for(int64_t i = 0; i < dx.size(); ++i) {
                               Ref e = refOfShape(xs);
                               e[i] = 1;
                               Ref y = refResize(e, sizes, o, {});
                               for(int64_t k = 0; k < y.size(); ++k) dx[i] += y[k] * r[0][k];
                             }
                             return dx;
                           }});
}

[[maybe_unused]] const bool registered = [] {
  resizeCase("nearest_half_pixel_up", {1, 2, 3, 2}, {1, 2, 7, 5}, ro("nearest", "half_pixel"));
  resizeCase("nearest_prefer_ceil_asymmetric_down", {1, 1, 5, 7}, {1, 1, 3, 4},
             ro("nearest", "asymmetric", "round_prefer_ceil"));
  resizeCase("nearest_floor_align_corners_up", {1, 1, 3, 4}, {1, 1, 7, 6}, ro("nearest", "align_corners", "floor"));
  resizeCase("nearest_ceil_half_pixel_up", {1, 1, 4, 3}, {1, 1, 6, 8}, ro("nearest", "half_pixel", "ceil"));
  resizeCase("nearest_simple_scales", {1, 2, 2, 5}, {1, 2, 4, 3}, ro("nearest", "asymmetric", "simple"),
             {1, 1, 2, 0.6});
  resizeCase("linear_half_pixel_up", {2, 3, 3, 4}, {2, 3, 5, 7}, ro("linear", "half_pixel"));
  resizeCase("linear_align_corners_down", {1, 1, 5, 6}, {1, 1, 3, 2}, ro("linear", "align_corners"));
  resizeCase("linear_pytorch_half_pixel_to_1", {1, 2, 4, 3}, {1, 2, 1, 5}, ro("linear", "pytorch_half_pixel"));
  ResizeOptions cubicEx = ro("cubic", "half_pixel");
  cubicEx.cubicCoeffA = -0.5;
  cubicEx.excludeOutside = true;
  resizeCase("cubic_exclude_outside_up", {1, 1, 4, 4}, {1, 1, 7, 6}, cubicEx);
  resizeCase("cubic_asymmetric_scales", {1, 1, 4, 3}, {1, 1, 6, 6}, ro("cubic", "asymmetric"), {1, 1, 1.625, 2.25});  // float32-exact scales (ONNX attributes are float32)
  resizeCase("cubic_half_pixel_down", {1, 1, 6, 5}, {1, 1, 3, 2}, ro("cubic", "half_pixel"));
  ResizeOptions crop = ro("linear", "tf_crop_and_resize");
  crop.roi = {0, 0, 0.4, -0.3, 1, 1, 1.2, 0.7};
  crop.extrapolationValue = 10;
  resizeCase("linear_tf_crop_and_resize_extrapolate", {1, 1, 4, 4}, {1, 1, 3, 5}, crop);
  resizeCase("linear_half_pixel_symmetric_scales", {1, 1, 5, 4}, {1, 1, 8, 3}, ro("linear", "half_pixel_symmetric"),
             {1, 1, 1.625, 0.75});
  ResizeOptions aa = ro("linear", "half_pixel");
  aa.antialias = true;
  resizeCase("linear_antialias_down", {1, 1, 8, 7}, {1, 1, 3, 3}, aa);
  ResizeOptions caa = ro("cubic", "half_pixel");
  caa.antialias = true;
  resizeCase("cubic_antialias_down", {1, 1, 7, 6}, {1, 1, 3, 4}, caa);
  resizeCase("trilinear_3d", {1, 1, 3, 3, 2}, {1, 1, 5, 4, 4}, ro("linear", "half_pixel"));
  resizeCase("rank1_linear", {5}, {8}, ro("linear", "align_corners"));

  resizeGradCase("linear_half_pixel", {1, 2, 3, 3}, {1, 2, 5, 4}, ro("linear", "half_pixel"));
  resizeGradCase("nearest_down", {1, 1, 5, 4}, {1, 1, 2, 3}, ro("nearest", "asymmetric"));
  return true;
}();

}  // namespace
}  // namespace test
}  // namespace onyx
