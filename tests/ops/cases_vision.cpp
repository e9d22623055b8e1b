// Harness cases for src/ops/vision.cpp, plus checks of the composites
// (affine_grid) and of the eagerly computed non_max_suppression.
//
// The grid_sample reference follows the ONNX definition recursively (one
// spatial axis at a time, the taps of each axis read through the padding
// rule) in forward-mode dual numbers, so the same code gives the values and
// their derivatives w.r.t. the grid. The roi_align reference follows the
// ONNX reference's loops.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include <onyx/ops/vision.h>

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;
using V = std::vector<int64_t>;

// ------------------------------------------------------------ dual numbers

struct Dual {
  double v = 0;
  double d[3] = {0, 0, 0};
};
Dual cnst(double v) {
  Dual r;
  r.v = v;
  return r;
}
Dual operator+(Dual a, Dual b) {
  Dual r;
  r.v = a.v + b.v;
  for(int i = 0; i < 3; ++i) r.d[i] = a.d[i] + b.d[i];
  return r;
}
Dual operator-(Dual a, Dual b) {
  Dual r;
  r.v = a.v - b.v;
  for(int i = 0; i < 3; ++i) r.d[i] = a.d[i] - b.d[i];
  return r;
}
Dual operator*(Dual a, Dual b) {
  Dual r;
  r.v = a.v * b.v;
  for(int i = 0; i < 3; ++i) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
  return r;
}
Dual operator+(Dual a, double b) { return a + cnst(b); }
Dual operator+(double a, Dual b) { return cnst(a) + b; }
Dual operator-(Dual a, double b) { return a - cnst(b); }
Dual operator-(double a, Dual b) { return cnst(a) - b; }
Dual operator*(Dual a, double b) { return a * cnst(b); }
Dual operator*(double a, Dual b) { return cnst(a) * b; }

// ------------------------------------------------------------- grid_sample

// ONNX's reflection: fold x into [lo, hi].
Dual reflectD(Dual x, double lo, double hi) {
  double rng = hi - lo;
  if(x.v < lo) {
    Dual dx = lo - x;
    double n = std::trunc(dx.v / rng);
    Dual r = dx - n * rng;
    return std::fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if(x.v > hi) {
    Dual dx = x - hi;
    double n = std::trunc(dx.v / rng);
    Dual r = dx - n * rng;
    return std::fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

struct Gs {
  std::string mode = "linear", pad = "zeros";
  bool align = false;
};

Gs gs(std::string mode, std::string pad, bool align) {
  Gs o;
  o.mode = std::move(mode);
  o.pad = std::move(pad);
  o.align = align;
  return o;
}

// Keys' cubic weights (A = -0.75) of the taps at -1, 0, 1, 2 for fraction t.
void cubicW(Dual t, Dual* w) {
  const double A = -0.75;
  auto far = [&](Dual s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };
  auto nearW = [&](Dual s) { return ((A + 2) * s - (A + 3)) * s * s + 1.0; };
  w[0] = far(t + 1.0);
  w[1] = nearW(t);
  w[2] = nearW(1.0 - t);
  w[3] = far(2.0 - t);
}

// Value (and d / d coordinate of each axis) of x[n, c] at grid point p.
Dual sampleAt(const Ref& X, int64_t n, int64_t c, const Ref& G, int64_t p, const Gs& o) {
  const int r = int(X.shape.size()) - 2;
  std::vector<Dual> xs(static_cast<size_t>(r));
  std::vector<double> lo(static_cast<size_t>(r)), hi(static_cast<size_t>(r));
  for(int a = 0; a < r; ++a) {
    double dim = double(X.shape[size_t(2 + a)]);
    Dual u = cnst(G[p * r + (r - 1 - a)]);
    u.d[a] = 1;
    Dual x = o.align ? (u + 1.0) * 0.5 * (dim - 1) : ((u + 1.0) * dim - 1.0) * 0.5;
    lo[size_t(a)] = o.align ? 0 : -0.5;
    hi[size_t(a)] = o.align ? dim - 1 : dim - 0.5;
    if(o.mode == "nearest") x = cnst(std::nearbyint(x.v));
    if(x.v < lo[size_t(a)] || x.v > hi[size_t(a)]) {
      if(o.pad == "border") x = cnst(std::min(dim - 1, std::max(0.0, x.v)));
      else if(o.pad == "reflection") x = reflectD(x, lo[size_t(a)], hi[size_t(a)]);
    }
    xs[size_t(a)] = x;
  }
  auto strides = refStrides(X.shape);
  // Pixel index along axis a through the padding rule; -1: zero.
  auto fetch = [&](int a, int64_t i) -> int64_t {
    int64_t dim = X.shape[size_t(2 + a)];
    if(i >= 0 && i < dim) return i;
    if(o.pad == "zeros") return -1;
    if(o.pad == "border") return std::min(dim - 1, std::max<int64_t>(0, i));
    return int64_t(reflectD(cnst(double(i)), lo[size_t(a)], hi[size_t(a)]).v);
  };
  std::function<Dual(int, int64_t)> rec = [&](int a, int64_t off) -> Dual {
    if(a == r) return cnst(X[off]);
    Dual x = xs[size_t(a)];
    auto tap = [&](int64_t i) {
      int64_t j = fetch(a, i);
      return j < 0 ? cnst(0) : rec(a + 1, off + j * strides[size_t(2 + a)]);
    };
    if(o.mode == "nearest") return tap(int64_t(x.v));
    double x0 = std::floor(x.v);
    Dual t = x - x0;
    if(o.mode == "linear") return (1.0 - t) * tap(int64_t(x0)) + t * tap(int64_t(x0) + 1);
    Dual w[4];
    cubicW(t, w);
    Dual s = cnst(0);
    for(int k = 0; k < 4; ++k) s = s + w[k] * tap(int64_t(x0) - 1 + k);
    return s;
  };
  return rec(0, n * strides[0] + c * strides[1]);
}

int64_t pointsOf(const Ref& G) {
  int64_t p = 1;
  for(size_t i = 1; i + 1 < G.shape.size(); ++i) p *= G.shape[i];
  return p;
}

Ref refGridSample(const Ref& X, const Ref& G, const Gs& o) {
  V ys{X.shape[0], X.shape[1]};
  for(size_t i = 1; i + 1 < G.shape.size(); ++i) ys.push_back(G.shape[i]);
  Ref y = refOfShape(ys);
  const int64_t P = pointsOf(G);
  for(int64_t n = 0; n < X.shape[0]; ++n)
    for(int64_t c = 0; c < X.shape[1]; ++c)
      for(int64_t p = 0; p < P; ++p) y[(n * X.shape[1] + c) * P + p] = sampleAt(X, n, c, G, n * P + p, o).v;
  return y;
}

Ref refGridSampleGradGrid(const Ref& X, const Ref& G, const Ref& dy, const Gs& o) {
  Ref dg = refLike(G);
  const int r = int(X.shape.size()) - 2;
  const int64_t P = pointsOf(G);
  for(int64_t n = 0; n < X.shape[0]; ++n)
    for(int64_t c = 0; c < X.shape[1]; ++c)
      for(int64_t p = 0; p < P; ++p) {
        Dual s = sampleAt(X, n, c, G, n * P + p, o);
        for(int a = 0; a < r; ++a) dg[(n * P + p) * r + (r - 1 - a)] += dy[(n * X.shape[1] + c) * P + p] * s.d[a];
      }
  return dg;
}

GridSampleOptions gso(const Gs& o) {
  GridSampleOptions g;
  g.mode = o.mode;
  g.paddingMode = o.pad;
  g.alignCorners = o.align;
  return g;
}

Shape outShape(const V& xs, const V& gshape) {
  V s{xs[0], xs[1]};
  for(size_t i = 1; i + 1 < gshape.size(); ++i) s.push_back(gshape[i]);
  return Shape(s);
}

void gsCase(const char* name, V xs, V gshape, Gs o, double lo = -1.2, double hi = 1.2) {
  cases().push_back(OpCase{"grid_sample", name, {in(xs, -2, 2), in(gshape, lo, hi)},
                           [=](Xs x) { return grid_sample(x[0], x[1], gso(o)); },
                           [=](Rs r) { return refGridSample(r[0], r[1], o); }});
}

// The adjoint in x, from unit vectors through the reference.
void gsGradXCase(const char* name, V xs, V gshape, Gs o) {
  Shape ys = outShape(xs, gshape);
  cases().push_back(OpCase{"grid_sample_grad_x", name, {in(ys.vec()), in(gshape, -1.2, 1.2)},
                           [=](Xs x) {
                             return x[0]->graph()->make(Registry::instance().get("grid_sample_grad_x"), {x[0], x[1]},
                                                        {{"mode", attr(o.mode)},
                                                         {"padding_mode", attr(o.pad)},
                                                         {"align_corners", attr(int64_t(o.align))},
                                                         {"shape", attr(xs)}});
                           },
                           [=](Rs r) {
                             Ref dx = refOfShape(xs);
                             for(int64_t i = 0; i < dx.size(); ++i) {
                               Ref e = refOfShape(xs);
                               e[i] = 1;
                               Ref y = refGridSample(e, r[1], o);
                               for(int64_t k = 0; k < y.size(); ++k) dx[i] += y[k] * r[0][k];
                             }
                             return dx;
                           }});
}

void gsGradGridCase(const char* name, V xs, V gshape, Gs o) {
  Shape ys = outShape(xs, gshape);
  OpCase c{"grid_sample_grad_grid", name, {in(xs, -2, 2), in(gshape, -1.2, 1.2), in(ys.vec())},
           [=](Xs x) {
             return x[0]->graph()->make(Registry::instance().get("grid_sample_grad_grid"), {x[0], x[1], x[2]},
                                        {{"mode", attr(o.mode)},
                                         {"padding_mode", attr(o.pad)},
                                         {"align_corners", attr(int64_t(o.align))}});
           },
           [=](Rs r) { return refGridSampleGradGrid(r[0], r[1], r[2], o); }};
  c.gradcheck = false;
  cases().push_back(c);
}

// ---------------------------------------------------------------- roi_align

struct Roi {
  std::string mode = "avg", ctm = "half_pixel";
  int64_t oh = 2, ow = 3, ratio = 2;
  double scale = 1;
};

RoiAlignOptions rao(const Roi& o) {
  RoiAlignOptions r;
  r.mode = o.mode;
  r.coordinateTransformationMode = o.ctm;
  r.outputHeight = o.oh;
  r.outputWidth = o.ow;
  r.samplingRatio = o.ratio;
  r.spatialScale = o.scale;
  return r;
}

Ref refRoiAlign(const Ref& X, const Ref& rois, const Ref& bi, const Roi& o) {
  const int64_t C = X.shape[1], H = X.shape[2], W = X.shape[3], R = rois.shape[0];
  Ref y = refOfShape({R, C, o.oh, o.ow});
  const bool half = o.ctm == "half_pixel";
  for(int64_t r = 0; r < R; ++r) {
    double off = half ? 0.5 : 0;
    double sw = rois[r * 4] * o.scale - off, sh = rois[r * 4 + 1] * o.scale - off;
    double rw = rois[r * 4 + 2] * o.scale - off - sw, rh = rois[r * 4 + 3] * o.scale - off - sh;
    if(!half) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / double(o.oh), bw = rw / double(o.ow);
    int64_t gh = o.ratio > 0 ? o.ratio : int64_t(std::ceil(bh)), gw = o.ratio > 0 ? o.ratio : int64_t(std::ceil(bw));
    double count = double(std::max<int64_t>(gh * gw, 1));
    int64_t b = int64_t(bi[r]);
    for(int64_t c = 0; c < C; ++c) {
      auto px = [&](int64_t yy, int64_t xx) { return X[((b * C + c) * H + yy) * W + xx]; };
      for(int64_t ph = 0; ph < o.oh; ++ph)
        for(int64_t pw = 0; pw < o.ow; ++pw) {
          double acc = 0;
          bool first = true;
          for(int64_t iy = 0; iy < gh; ++iy)
            for(int64_t ix = 0; ix < gw; ++ix) {
              double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v[4] = {0, 0, 0, 0};
              if(!(yy < -1 || yy > double(H) || xx < -1 || xx > double(W))) {
                yy = std::max(yy, 0.0);
                xx = std::max(xx, 0.0);
                int64_t y0 = int64_t(yy), x0 = int64_t(xx), y1, x1;
                if(y0 >= H - 1) y1 = y0 = H - 1, yy = double(y0);
                else y1 = y0 + 1;
                if(x0 >= W - 1) x1 = x0 = W - 1, xx = double(x0);
                else x1 = x0 + 1;
                double ly = yy - double(y0), lx = xx - double(x0);
                v[0] = (1 - ly) * (1 - lx) * px(y0, x0);
                v[1] = (1 - ly) * lx * px(y0, x1);
                v[2] = ly * (1 - lx) * px(y1, x0);
                v[3] = ly * lx * px(y1, x1);
              }
              if(o.mode == "avg") {
                acc += v[0] + v[1] + v[2] + v[3];
              } else {
                double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                acc = first ? m : std::max(acc, m);
                first = false;
              }
            }
          y[((r * C + c) * o.oh + ph) * o.ow + pw] = o.mode == "avg" ? acc / count : acc;
        }
    }
  }
  return y;
}

// x [2, 3, 7, 8]; rois partly outside, one tiny, one reversed-small.
const std::vector<double> kRois = {0.5, 1.2, 6.3, 5.9, -1.5, -0.7, 3.1, 2.2, 2.0, 2.5, 2.4, 2.7, 4.4, 0.3, 9.5, 7.8};
const std::vector<double> kBatch = {1, 0, 1, 0};


void roiCase(const char* name, Roi o) {
  cases().push_back(OpCase{"roi_align", name,
                           {in({2, 3, 7, 8}, -2, 2), constantInput(values({4, 4}, kRois)), intValues({4}, kBatch)},
                           [=](Xs x) { return roi_align(x[0], x[1], x[2], rao(o)); },
                           [=](Rs r) { return refRoiAlign(r[0], r[1], r[2], o); }});
}

// avg only: the adjoint from unit vectors (max is covered by roi_align's
// gradient check, which runs roi_align_grad).
void roiGradCase(const char* name, Roi o) {
  OpCase c{"roi_align_grad", name,
           {in({2, 3, 7, 8}, -2, 2), constantInput(values({4, 4}, kRois)), intValues({4}, kBatch),
            in({4, 3, o.oh, o.ow})},
           [=](Xs x) {
             return x[0]->graph()->make(Registry::instance().get("roi_align_grad"), {x[0], x[1], x[2], x[3]},
                                        {{"mode", attr(o.mode)},
                                         {"output_height", attr(o.oh)},
                                         {"output_width", attr(o.ow)},
                                         {"sampling_ratio", attr(o.ratio)},
                                         {"spatial_scale", attr(o.scale)},
                                         {"coordinate_transformation_mode", attr(o.ctm)}});
           },
           [=](Rs r) {
             Ref dx = refLike(r[0]);
             for(int64_t i = 0; i < dx.size(); ++i) {
               Ref e = refLike(r[0]);
               e[i] = 1;
               Ref y = refRoiAlign(e, r[1], r[2], o);
               for(int64_t k = 0; k < y.size(); ++k) dx[i] += y[k] * r[3][k];
             }
             return dx;
           }};
  c.gradcheck = false;
  cases().push_back(c);
}

[[maybe_unused]] const bool registered = [] {
  gsCase("linear_zeros", {2, 3, 4, 5}, {2, 3, 4, 2}, gs("linear", "zeros", false));
  gsCase("linear_border_align", {1, 2, 4, 3}, {1, 5, 3, 2}, gs("linear", "border", true));
  gsCase("linear_reflection_far", {1, 2, 3, 4}, {1, 4, 3, 2}, gs("linear", "reflection", false), -3.5, 3.5);
  gsCase("linear_reflection_align", {1, 1, 4, 3}, {1, 3, 4, 2}, gs("linear", "reflection", true), -3, 3);
  gsCase("nearest_zeros", {2, 2, 3, 4}, {2, 3, 3, 2}, gs("nearest", "zeros", false));
  gsCase("nearest_reflection", {1, 2, 3, 4}, {1, 3, 3, 2}, gs("nearest", "reflection", true), -2.5, 2.5);
  gsCase("cubic_zeros", {1, 2, 4, 5}, {1, 3, 4, 2}, gs("cubic", "zeros", false));
  gsCase("cubic_border_align", {1, 1, 5, 4}, {1, 4, 3, 2}, gs("cubic", "border", true));
  gsCase("cubic_reflection", {1, 2, 4, 4}, {1, 3, 3, 2}, gs("cubic", "reflection", false), -2, 2);
  gsCase("volumetric_linear_zeros", {1, 2, 3, 4, 3}, {1, 2, 3, 2, 3}, gs("linear", "zeros", false));
  gsCase("volumetric_linear_border_align", {2, 1, 3, 3, 2}, {2, 2, 2, 2, 3}, gs("linear", "border", true));
  gsCase("volumetric_nearest_zeros", {1, 2, 3, 4, 3}, {1, 2, 2, 2, 3}, gs("nearest", "zeros", false));
  gsCase("one_d_cubic_reflection", {2, 2, 6}, {2, 5, 1}, gs("cubic", "reflection", true), -1.8, 1.8);
  gsGradXCase("linear_zeros", {1, 2, 3, 4}, {1, 3, 2, 2}, gs("linear", "zeros", false));
  gsGradXCase("cubic_reflection", {1, 1, 4, 3}, {1, 2, 3, 2}, gs("cubic", "reflection", true));
  gsGradXCase("volumetric_linear_border", {1, 1, 2, 3, 3}, {1, 2, 2, 1, 3}, gs("linear", "border", false));
  gsGradGridCase("linear_zeros", {2, 2, 3, 4}, {2, 3, 2, 2}, gs("linear", "zeros", false));
  gsGradGridCase("cubic_border_align", {1, 2, 4, 4}, {1, 3, 2, 2}, gs("cubic", "border", true));
  gsGradGridCase("volumetric_reflection", {1, 2, 3, 3, 4}, {1, 2, 2, 2, 3}, gs("linear", "reflection", false));
  Roi avg;
  roiCase("avg_half_pixel_ratio2", avg);
  Roi adaptive;
  adaptive.ctm = "output_half_pixel";
  adaptive.ratio = 0;
  adaptive.scale = 0.75;  // float32-exact: spatial_scale is a float32 attribute in ONNX
  adaptive.oh = 3;
  adaptive.ow = 2;
  roiCase("avg_output_half_pixel_adaptive", adaptive);
  Roi mx;
  mx.mode = "max";
  mx.ratio = 0;
  roiCase("max_half_pixel_adaptive", mx);
  roiGradCase("avg_half_pixel_ratio2", avg);
  roiGradCase("avg_output_half_pixel_adaptive", adaptive);
  return true;
}();

// -------------------------------------------------------------- composites

Ptr<ExpressionGraph> cpuGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  g->setDefaultElementType(Type::float64);
  return g;
}

// grid[n, p, k] = sum_j theta[n, k, j] * base[p, j], base = (x, y[, z], 1).
std::vector<double> refAffineGrid(const std::vector<double>& theta, int64_t N, const V& sp, bool align) {
  const int r = int(sp.size());
  int64_t P = 1;
  for(auto d : sp) P *= d;
  std::vector<double> out(static_cast<size_t>(N * P * r));
  for(int64_t n = 0; n < N; ++n)
    for(int64_t p = 0; p < P; ++p) {
      std::vector<double> base(size_t(r + 1), 1.0);
      int64_t rem = p;
      for(int a = r - 1; a >= 0; --a) {
        int64_t i = rem % sp[size_t(a)], d = sp[size_t(a)];
        rem /= d;
        base[size_t(r - 1 - a)] = align ? (d == 1 ? -1.0 : -1 + 2.0 * double(i) / double(d - 1))
                                        : (2.0 * double(i) + 1) / double(d) - 1;
      }
      for(int k = 0; k < r; ++k) {
        double s = 0;
        for(int j = 0; j <= r; ++j) s += theta[size_t((n * r + k) * (r + 1) + j)] * base[size_t(j)];
        out[size_t((n * P + p) * r + k)] = s;
      }
    }
  return out;
}

TEST(Vision, AffineGridMatchesReferenceAndIsDifferentiable) {
  for(bool align : {false, true})
    for(V sp : {V{3, 4}, V{2, 3, 2}}) {
      auto g = cpuGraph();
      const int r = int(sp.size());
      const int64_t N = 2;
      std::vector<double> theta;
      for(int i = 0; i < N * r * (r + 1); ++i) theta.push_back(0.1 * double(i % 7) - 0.3 + 0.05 * i);
      auto t = g->param("theta", {N, r, r + 1}, inits::fromVector(theta), Type::float64, true);
      auto grid = affine_grid(t, sp, align);
      V want{N};
      want.insert(want.end(), sp.begin(), sp.end());
      want.push_back(r);
      ASSERT_EQ(grid->shape(), Shape(want));
      auto loss = sum(grid * grid);
      g->forward();
      std::vector<double> got = grid->val()->toVector<double>();
      std::vector<double> ref = refAffineGrid(theta, N, sp, align);
      ASSERT_EQ(got.size(), ref.size());
      for(size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-12) << i;
      g->backward(loss);
      std::vector<double> dt = t->grad()->toVector<double>();
      // d sum(grid^2) / d theta by central differences of the reference.
      for(size_t i = 0; i < theta.size(); ++i) {
        auto f = [&](double h) {
          std::vector<double> th = theta;
          th[i] += h;
          double s = 0;
          for(double v : refAffineGrid(th, N, sp, align)) s += v * v;
          return s;
        };
        EXPECT_NEAR(dt[i], (f(1e-6) - f(-1e-6)) / 2e-6, 1e-5) << i;
      }
    }
}

TEST(Vision, GridSampleBadArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->constant({1, 2, 3, 4}, inits::zeros());
  EXPECT_THROW(grid_sample(x, g->constant({1, 2, 2, 3}, inits::zeros())), Error);  // last dim must be 2
  EXPECT_THROW(grid_sample(x, g->constant({2, 2, 2, 2}, inits::zeros())), Error);  // batch mismatch
  GridSampleOptions o;
  o.mode = "area";
  EXPECT_THROW(grid_sample(x, g->constant({1, 2, 2, 2}, inits::zeros()), o), Error);
}

TEST(Vision, IdentityAffineGridSamplesXExactly) {
  // With align_corners, the identity transform's grid lands on the pixel
  // centres: linear sampling reproduces x.
  auto g = cpuGraph();
  std::vector<double> xv = {1, 2, 3, 4, 5, 6};
  auto x = g->param("x", {1, 1, 2, 3}, inits::fromVector(xv), Type::float64, true);
  auto theta = g->constant({1, 2, 3}, inits::fromVector(std::vector<double>{1, 0, 0, 0, 1, 0}), Type::float64);
  GridSampleOptions o;
  o.alignCorners = true;
  auto y = grid_sample(x, affine_grid(theta, {2, 3}, true), o);
  g->forward();
  std::vector<double> got = y->val()->toVector<double>();
  for(size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(got[i], xv[i], 1e-12);
}

TEST(Vision, RoiAlignBadBatchIndexIsAnError) {
  auto g = cpuGraph();
  auto x = g->constant({1, 1, 4, 4}, inits::ones());
  auto rois = g->constant({1, 4}, inits::fromVector(std::vector<double>{0, 0, 2, 2}));
  auto bi = g->constant({1}, inits::fromVector(std::vector<int64_t>{3}), Type::int64);
  roi_align(x, rois, bi);
  EXPECT_THROW(g->forward(), Error);
}

// Deformable conv in plain loops: bilinear taps with zeros outside.
std::vector<double> refDeformConv(const std::vector<double>& x, const V& xs, const std::vector<double>& w, const V& ws,
                                  const std::vector<double>& off, const std::vector<double>& mask,
                                  const std::vector<double>& b, int64_t G, int64_t OG, V st, V dl, V pd, int64_t oh,
                                  int64_t ow) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[0], kh = ws[2], kw = ws[3], K = kh * kw;
  std::vector<double> y(static_cast<size_t>(N * M * oh * ow));
  auto px = [&](int64_t n, int64_t c, int64_t i, int64_t j) {
    return i < 0 || i >= H || j < 0 || j >= W ? 0.0 : x[size_t(((n * C + c) * H + i) * W + j)];
  };
  for(int64_t n = 0; n < N; ++n)
    for(int64_t m = 0; m < M; ++m)
      for(int64_t i = 0; i < oh; ++i)
        for(int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0 : b[size_t(m)];
          const int64_t g = m / (M / G);
          for(int64_t cl = 0; cl < C / G; ++cl) {
            const int64_t c = g * (C / G) + cl, q = c / (C / OG);
            for(int64_t a = 0; a < kh; ++a)
              for(int64_t e = 0; e < kw; ++e) {
                const int64_t k = a * kw + e;
                double dy = off[size_t((((n * OG + q) * K + k) * 2 + 0) * oh * ow + i * ow + j)];
                double dx = off[size_t((((n * OG + q) * K + k) * 2 + 1) * oh * ow + i * ow + j)];
                double py = double(i * st[0] - pd[0] + a * dl[0]) + dy, pxx = double(j * st[1] - pd[1] + e * dl[1]) + dx;
                double y0 = std::floor(py), x0 = std::floor(pxx), ly = py - y0, lx = pxx - x0;
                int64_t iy = int64_t(y0), ix = int64_t(x0);
                double v = (1 - ly) * (1 - lx) * px(n, c, iy, ix) + (1 - ly) * lx * px(n, c, iy, ix + 1) +
                           ly * (1 - lx) * px(n, c, iy + 1, ix) + ly * lx * px(n, c, iy + 1, ix + 1);
                double mk = mask.empty() ? 1.0 : mask[size_t(((n * OG + q) * K + k) * oh * ow + i * ow + j)];
                acc += w[size_t(((m * (C / G) + cl) * kh + a) * kw + e)] * v * mk;
              }
          }
          y[size_t(((n * M + m) * oh + i) * ow + j)] = acc;
        }
  return y;
}

TEST(Vision, DeformConvMatchesReferenceWithGradients) {
  struct Cfg {
    V xs, ws;
    int64_t G, OG;
    V st, dl, pd;
    bool bias, mask;
  };
  for(const Cfg& k : {Cfg{{1, 2, 5, 4}, {3, 2, 2, 2}, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false, false},
                      Cfg{{2, 4, 5, 6}, {4, 2, 3, 2}, 2, 2, {2, 1}, {1, 2}, {1, 0, 1, 1}, true, true}}) {
    auto g = cpuGraph();
    const int64_t kh = k.ws[2], kw = k.ws[3];
    const int64_t oh = (k.xs[2] + k.pd[0] + k.pd[2] - ((kh - 1) * k.dl[0] + 1)) / k.st[0] + 1;
    const int64_t ow = (k.xs[3] + k.pd[1] + k.pd[3] - ((kw - 1) * k.dl[1] + 1)) / k.st[1] + 1;
    V os{k.xs[0], k.OG * kh * kw * 2, oh, ow}, ms{k.xs[0], k.OG * kh * kw, oh, ow};
    auto fill = [](int64_t n, double seed, double scale) {
      std::vector<double> v(static_cast<size_t>(n));
      for(int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * std::sin(seed * double(i + 1) + 0.3);
      return v;
    };
    int64_t nx = 1, nw = 1, no = 1, nm = 1;
    for(auto d : k.xs) nx *= d;
    for(auto d : k.ws) nw *= d;
    for(auto d : os) no *= d;
    for(auto d : ms) nm *= d;
    std::vector<double> xv = fill(nx, 0.37, 1), wv = fill(nw, 0.71, 1), ov = fill(no, 1.13, 1.7);
    std::vector<double> mv = k.mask ? fill(nm, 0.53, 1) : std::vector<double>{};
    std::vector<double> bv = k.bias ? fill(k.ws[0], 0.9, 1) : std::vector<double>{};
    auto x = g->param("x", Shape(k.xs), inits::fromVector(xv), Type::float64, true);
    auto w = g->param("w", Shape(k.ws), inits::fromVector(wv), Type::float64, true);
    auto off = g->param("off", Shape(os), inits::fromVector(ov), Type::float64, true);
    Expr mask = k.mask ? g->param("mask", Shape(ms), inits::fromVector(mv), Type::float64, true) : nullptr;
    Expr b = k.bias ? g->param("b", {k.ws[0]}, inits::fromVector(bv), Type::float64, true) : nullptr;
    DeformConvOptions o;
    o.strides = k.st;
    o.dilations = k.dl;
    o.pads = k.pd;
    o.group = k.G;
    o.offsetGroup = k.OG;
    auto y = deform_conv(x, w, off, b, mask, o);
    auto ref = [&](const std::vector<double>& xx, const std::vector<double>& oo, const std::vector<double>& mm) {
      return refDeformConv(xx, k.xs, wv, k.ws, oo, mm, bv, k.G, k.OG, k.st, k.dl, k.pd, oh, ow);
    };
    std::vector<double> want = ref(xv, ov, mv);
    ASSERT_EQ(y->shape(), (Shape{k.xs[0], k.ws[0], oh, ow}));
    auto loss = sum(y * y);
    g->forward();
    std::vector<double> got = y->val()->toVector<double>();
    for(size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-10) << i;
    g->backward(loss);
    auto sq = [](const std::vector<double>& v) {
      double s = 0;
      for(double e : v) s += e * e;
      return s;
    };
    // Gradients w.r.t. x and the offsets by central differences of the reference.
    std::vector<double> dx = x->grad()->toVector<double>(), doff = off->grad()->toVector<double>();
    for(size_t i = 0; i < xv.size(); ++i) {
      auto p = xv, m = xv;
      p[i] += 1e-6;
      m[i] -= 1e-6;
      EXPECT_NEAR(dx[i], (sq(ref(p, ov, mv)) - sq(ref(m, ov, mv))) / 2e-6, 1e-5) << "x " << i;
    }
    for(size_t i = 0; i < ov.size(); ++i) {
      auto p = ov, m = ov;
      p[i] += 1e-6;
      m[i] -= 1e-6;
      EXPECT_NEAR(doff[i], (sq(ref(xv, p, mv)) - sq(ref(xv, m, mv))) / 2e-6, 1e-5) << "offset " << i;
    }
  }
}

std::vector<double> nmsRows(Ptr<ExpressionGraph> g, const std::vector<double>& boxes, const std::vector<double>& scores,
                            int64_t B, int64_t C, int64_t S, int64_t maxPer, double iou, double score, bool hasScore,
                            bool center) {
  auto b = g->constant({B, S, 4}, inits::fromVector(boxes));
  auto s = g->constant({B, C, S}, inits::fromVector(scores));
  auto y = non_max_suppression(b, s, maxPer, iou, score, hasScore, center);
  EXPECT_EQ(y->value_type(), Type::int64);
  g->forward();
  return y->val()->toVector<double>();
}

TEST(Vision, NonMaxSuppression) {
  auto g = cpuGraph();
  // Corner boxes (y1, x1, y2, x2); box 1 overlaps box 0 with IoU 0.6 (flipped
  // corners), box 2 is far away, box 3 equals box 2 with the same score.
  std::vector<double> boxes = {0, 0, 1, 1, 1, 0.4, 0, 1.4, 5, 5, 6, 6, 5, 5, 6, 6};
  std::vector<double> scores = {0.9, 0.95, 0.5, 0.5,   // class 0
                                0.1, 0.2, 0.8, 0.3};   // class 1
  // IoU(0, 1): intersection 0.6, union 1.4 -> 0.4286.
  EXPECT_EQ(nmsRows(g, boxes, scores, 1, 2, 4, 10, 0.4, 0, false, false),
            (std::vector<double>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1}));
  EXPECT_EQ(nmsRows(g, boxes, scores, 1, 2, 4, 10, 0.5, 0, false, false),
            (std::vector<double>{0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1, 0, 1, 0}));
  // Score threshold 0.25 and at most 1 per class.
  EXPECT_EQ(nmsRows(g, boxes, scores, 1, 2, 4, 1, 0.5, 0.25, true, false), (std::vector<double>{0, 0, 1, 0, 1, 2}));
  // Centre format: (xc, yc, w, h); boxes 0 and 1 overlap with IoU 1/3.
  std::vector<double> centre = {0.5, 0.5, 1, 1, 1, 0.5, 1, 1};
  EXPECT_EQ(nmsRows(g, centre, {0.6, 0.7}, 1, 1, 2, 5, 0.3, 0, false, true), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(nmsRows(g, centre, {0.6, 0.7}, 1, 1, 2, 5, 0.34, 0, false, true),
            (std::vector<double>{0, 0, 1, 0, 0, 0}));
  // max 0 selects nothing.
  EXPECT_TRUE(nmsRows(g, centre, {0.6, 0.7}, 1, 1, 2, 0, 0.3, 0, false, true).empty());
}

}  // namespace
}  // namespace test
}  // namespace onyx
