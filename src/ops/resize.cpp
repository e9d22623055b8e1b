// Resize (ONNX Resize 10..19 and Upsample 7..): separable interpolation, one
// axis at a time. For every resized axis each output index gets a short list
// of (input index, weight) taps; the forward pass sums taps, the adjoint
// (resize_grad) scatters into them, in reverse axis order. Values are
// processed in double.
#include <onyx/ops/resize.h>

#include <algorithm>
#include <cmath>

#include <onyx/core/checked.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

namespace {

using AttrList = std::vector<std::pair<std::string, AttrValue>>;

enum class Mode { Nearest, Linear, Cubic };
enum class Ctm { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
enum class Near { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

bool parseMode(const std::string& s, Mode& m) {
  if(s == "nearest") m = Mode::Nearest;
  else if(s == "linear" || s == "bilinear" || s == "trilinear") m = Mode::Linear;
  else if(s == "cubic" || s == "bicubic") m = Mode::Cubic;
  else return false;
  return true;
}

bool parseCtm(const std::string& s, Ctm& m) {
  if(s == "half_pixel") m = Ctm::HalfPixel;
  else if(s == "half_pixel_symmetric") m = Ctm::HalfPixelSymmetric;
  else if(s == "pytorch_half_pixel") m = Ctm::PytorchHalfPixel;
  else if(s == "align_corners") m = Ctm::AlignCorners;
  else if(s == "asymmetric") m = Ctm::Asymmetric;
  else if(s == "tf_half_pixel_for_nn") m = Ctm::TfHalfPixelForNN;
  else if(s == "tf_crop_and_resize") m = Ctm::TfCropAndResize;
  else return false;
  return true;
}

bool parseNear(const std::string& s, Near& m) {
  if(s == "round_prefer_floor") m = Near::RoundPreferFloor;
  else if(s == "round_prefer_ceil") m = Near::RoundPreferCeil;
  else if(s == "floor") m = Near::Floor;
  else if(s == "ceil") m = Near::Ceil;
  else if(s == "simple") m = Near::Simple;
  else return false;
  return true;
}

struct Config {
  Mode mode = Mode::Nearest;
  Ctm ctm = Ctm::HalfPixel;
  Near nearest = Near::RoundPreferFloor;
  double a = -0.75, ev = 0;
  bool exclude = false, antialias = false;
  std::vector<double> scales, roi;  // per dim (scales filled in), roi 2*rank (filled in)
};

Config configOf(const Attrs& at, const Shape& in, const Shape& out) {
  Config c;
  parseMode(at.s("mode"), c.mode);
  parseCtm(at.s("coordinate_transformation_mode"), c.ctm);
  parseNear(at.s("nearest_mode"), c.nearest);
  c.a = at.f("cubic_coeff_a");
  c.ev = at.f("extrapolation_value");
  c.exclude = at.i("exclude_outside") != 0;
  c.antialias = at.i("antialias") != 0;
  const int r = in.rank();
  c.scales = at.floats("scales");
  if(c.scales.empty())
    for(int i = 0; i < r; ++i) c.scales.push_back(in[i] == 0 ? 1.0 : double(out[i]) / double(in[i]));
  c.roi = at.floats("roi");
  if(c.roi.empty()) {
    c.roi.assign(size_t(r), 0.0);
    c.roi.resize(size_t(2 * r), 1.0);
  }
  return c;
}

using AxisTaps = ops::ResizeTaps;  // resize.h

double cubicWeight(double t, double A) {
  t = std::fabs(t);
  if(t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if(t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

// Input coordinate of output index y; sets ext when it falls outside (tf_crop_and_resize).
double sourceCoord(const Config& c, double y, double scale, int64_t in, int64_t outInt, double r0, double r1,
                   bool& ext) {
  const double outF = scale * double(in);
  ext = false;
  switch(c.ctm) {
    case Ctm::AlignCorners: return outF == 1 ? 0.0 : y * double(in - 1) / (outF - 1);
    case Ctm::Asymmetric: return y / scale;
    case Ctm::TfHalfPixelForNN: return (y + 0.5) / scale;
    case Ctm::PytorchHalfPixel: return outF == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case Ctm::HalfPixel: return (y + 0.5) / scale - 0.5;
    case Ctm::HalfPixelSymmetric: {
      double adjustment = double(outInt) / outF;
      double offset = double(in) / 2 * (1 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
    case Ctm::TfCropAndResize: {
      double x = outF == 1 ? (r1 - r0) * double(in - 1) / 2 : y * (r1 - r0) * double(in - 1) / (outF - 1);
      x += r0 * double(in - 1);
      ext = x < 0 || x > double(in - 1);
      return x;
    }
  }
  return y;
}

AxisTaps axisTaps(const Config& c, int64_t in, int64_t out, double scale, double r0, double r1) {
  AxisTaps t;
  t.in = in;
  t.out = out;
  t.identity = in == out && scale == 1 && (c.ctm != Ctm::TfCropAndResize || (r0 == 0 && r1 == 1));
  if(t.identity || in == 0) return t;
  const bool aa = c.antialias && c.mode != Mode::Nearest && scale < 1;
  const double s = aa ? scale : 1.0;
  const double radius = c.mode == Mode::Cubic ? 2 : 1;
  const int64_t start = c.mode == Mode::Nearest ? 0 : int64_t(std::floor(-radius / s)) + 1;
  t.n = c.mode == Mode::Nearest ? 1 : 2 - 2 * start;
  t.idx.resize(size_t(out * t.n));
  t.w.resize(size_t(out * t.n));
  t.extrap.assign(size_t(out), 0);
  for(int64_t j = 0; j < out; ++j) {
    bool ext = false;
    double x = sourceCoord(c, double(j), scale, in, out, r0, r1, ext);
    int64_t* idx = &t.idx[size_t(j * t.n)];
    double* w = &t.w[size_t(j * t.n)];
    // A source coordinate that is no number (an roi or scale far outside any
    // image, e.g. inf - inf) reads nothing: the output is the extrapolation
    // value. One beyond the taps' reach of the image is moved to the nearest
    // integer coordinate still beyond it, so that it converts to int64 (every
    // tap still clamps to the same edge element; only the weights' rounding
    // can differ). Found by CI's libFuzzer stage: a NaN coordinate's
    // conversion was undefined (regression input resize_nan_source_coordinate).
    if(std::isnan(x)) {
      t.extrap[size_t(j)] = true;
      for(int64_t k = 0; k < t.n; ++k) {
        idx[k] = 0;
        w[k] = 0;
      }
      continue;
    }
    t.extrap[size_t(j)] = ext;
    const double reach = double(t.n + 2);
    x = std::min(std::max(x, -reach), double(in - 1) + reach);
    double x0 = std::floor(x), ratio = x - x0;
    if(c.mode == Mode::Nearest) {
      int64_t i = int64_t(x0);
      if(ratio != 0) {
        bool up = false;
        switch(c.nearest) {
          case Near::RoundPreferFloor: up = ratio > 0.5; break;
          case Near::RoundPreferCeil: up = ratio >= 0.5; break;
          case Near::Floor: up = false; break;
          case Near::Ceil: up = true; break;
          case Near::Simple: up = scale < 1; break;
        }
        i += up;
      }
      idx[0] = std::min(std::max<int64_t>(i, 0), in - 1);
      w[0] = 1;
      continue;
    }
    // The taps' left neighbour is strictly left of x: at an integer x take ratio 1.
    if(ratio == 0) {
      x0 -= 1;
      ratio = 1;
    }
    double total = 0;
    for(int64_t k = 0; k < t.n; ++k) {
      double d = s * (double(start + k) - ratio);
      double wk = c.mode == Mode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubicWeight(d, c.a);
      int64_t i = int64_t(x0) + start + k;
      if(c.exclude && (i < 0 || i >= in)) wk = 0;
      idx[k] = std::min(std::max<int64_t>(i, 0), in - 1);
      w[k] = wk;
      total += wk;
    }
    if((aa || c.exclude) && total != 0)
      for(int64_t k = 0; k < t.n; ++k) w[k] /= total;
  }
  return t;
}

// dims[:axis] x dims[axis] x dims[axis+1:] -> dims[:axis] x out x dims[axis+1:]
std::vector<double> applyAxis(const std::vector<double>& src, const std::vector<int64_t>& dims, int axis,
                              const AxisTaps& t, double ev) {
  int64_t outer = 1, inner = 1;
  for(int i = 0; i < axis; ++i) outer *= dims[size_t(i)];
  for(size_t i = size_t(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<double> dst(size_t(outer * t.out * inner));
  host::parallelFor(outer * t.out, outer * t.out * inner * std::max<int64_t>(t.n, 1), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      int64_t oo = r / t.out, j = r % t.out;
      double* d = dst.data() + r * inner;
      if(t.in == 0 || t.extrap[size_t(j)]) {
        std::fill(d, d + inner, t.in == 0 ? 0.0 : ev);
        continue;
      }
      std::fill(d, d + inner, 0.0);
      for(int64_t k = 0; k < t.n; ++k) {
        double w = t.w[size_t(j * t.n + k)];
        if(w == 0) continue;
        const double* s = src.data() + (oo * t.in + t.idx[size_t(j * t.n + k)]) * inner;
        for(int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
      }
    }
  });
  return dst;
}

// The adjoint of applyAxis (extrapolated outputs contribute nothing).
std::vector<double> applyAxisAdjoint(const std::vector<double>& src, const std::vector<int64_t>& dims, int axis,
                                     const AxisTaps& t) {
  int64_t outer = 1, inner = 1;
  for(int i = 0; i < axis; ++i) outer *= dims[size_t(i)];
  for(size_t i = size_t(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<double> dst(size_t(outer * t.in * inner), 0.0);
  if(t.in == 0) return dst;
  host::parallelFor(outer, outer * t.out * inner * t.n, [&](int64_t b, int64_t e) {
    for(int64_t oo = b; oo < e; ++oo)
      for(int64_t j = 0; j < t.out; ++j) {
        if(t.extrap[size_t(j)]) continue;
        const double* s = src.data() + (oo * t.out + j) * inner;
        for(int64_t k = 0; k < t.n; ++k) {
          double w = t.w[size_t(j * t.n + k)];
          if(w == 0) continue;
          double* d = dst.data() + (oo * t.in + t.idx[size_t(j * t.n + k)]) * inner;
          for(int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
        }
      }
  });
  return dst;
}

}  // namespace

std::vector<ops::ResizeTaps> ops::resizeTaps(const Attrs& at, const Shape& inShape, const Shape& outShape) {
  Config c = configOf(at, inShape, outShape);
  const int r = inShape.rank();
  std::vector<AxisTaps> taps;
  for(int a = 0; a < r; ++a)
    taps.push_back(axisTaps(c, inShape[a], outShape[a], c.scales[size_t(a)], c.roi[size_t(a)], c.roi[size_t(a + r)]));
  return taps;
}

namespace {

// The taps of an axis left as it is: output j reads input j.
AxisTaps identityTaps(int64_t n) {
  AxisTaps t;
  t.in = t.out = n;
  t.n = 1;
  t.w.assign(size_t(n), 1.0);
  t.extrap.assign(size_t(n), 0);
  for(int64_t j = 0; j < n; ++j) t.idx.push_back(j);
  return t;
}

// The forward resize of float32 data whose only resized axes are the last
// two (images: N, C fixed): each output sums its taps straight from the
// input, in the order applyAxis would (the H taps of each W tap first, in
// double), so the bits are those of the axis-at-a-time passes without their
// double buffers. False where it does not apply.
bool resizeLast2(const TensorBase& src, TensorBase& dst, const std::vector<AxisTaps>& taps) {
  const int r = src.shape().rank();
  if(r < 2) return false;
  for(int a = 0; a < r - 2; ++a)
    if(!taps[size_t(a)].identity) return false;
  const AxisTaps th = taps[size_t(r - 2)].identity ? identityTaps(taps[size_t(r - 2)].in) : taps[size_t(r - 2)];
  const AxisTaps tw = taps[size_t(r - 1)].identity ? identityTaps(taps[size_t(r - 1)].in) : taps[size_t(r - 1)];
  if(th.in == 0 || tw.in == 0 || th.n == 0 || tw.n == 0) return false;
  for(const AxisTaps* t : {&th, &tw})
    for(char e : t->extrap)
      if(e) return false;
  constexpr int64_t kMaxTaps = 8;  // linear 2, cubic 4; wider (antialiased) ones take the general path
  if(th.n > kMaxTaps) return false;
  const int64_t planes = src.size() / (th.in * tw.in);
  const float* in = src.data<float>();
  float* out = dst.data<float>();
  // Each output column's taps with their zero weights dropped (as applyAxis
  // skips them), in order.
  std::vector<int64_t> xStart(size_t(tw.out + 1)), xIdx;
  std::vector<double> xW;
  for(int64_t x = 0; x < tw.out; ++x) {
    for(int64_t kx = x * tw.n; kx < (x + 1) * tw.n; ++kx)
      if(tw.w[size_t(kx)] != 0) {
        xIdx.push_back(tw.idx[size_t(kx)]);
        xW.push_back(tw.w[size_t(kx)]);
      }
    xStart[size_t(x + 1)] = int64_t(xIdx.size());
  }
  // Where the output columns read most input columns (upsampling, mild
  // downsampling), each row first sums its H taps for every input column
  // (a vector loop), then each output sums its W taps of those: the same
  // double operations in the same order as summing per output, once per
  // input column instead of once per tap. U-Net's 2x bilinear upsampling of
  // 1 x 128 x 32 x 32 on one Zen 3 core: 2.9 ms per output tap by tap.
  const bool colsFirst = int64_t(xIdx.size()) >= tw.in;
  // Linear interpolation inside the image: two taps for every column.
  bool twoTaps = int64_t(xIdx.size()) == 2 * tw.out;
  for(int64_t x = 0; twoTaps && x < tw.out; ++x) twoTaps = xStart[size_t(x)] == 2 * x;
  host::parallelFor(planes * th.out, dst.size() * th.n * tw.n, [&](int64_t b, int64_t e) {
    std::vector<double> colBuf(colsFirst ? size_t(tw.in) : 0);
    double* col = colBuf.data();
    for(int64_t row = b; row < e; ++row) {
      const int64_t p = row / th.out, y = row % th.out;
      const float* plane = in + p * th.in * tw.in;
      // This row's input rows and weights, zero weights skipped as applyAxis does.
      const float* rows[kMaxTaps];
      double wy[kMaxTaps];
      int ny = 0;
      for(int64_t ky = 0; ky < th.n; ++ky) {
        const double w = th.w[size_t(y * th.n + ky)];
        if(w == 0) continue;
        rows[ny] = plane + th.idx[size_t(y * th.n + ky)] * tw.in;
        wy[ny++] = w;
      }
      float* o = out + row * tw.out;
      if(colsFirst) {
        for(int64_t i = 0; i < tw.in; ++i) col[i] = 0;
        for(int k = 0; k < ny; ++k) {
          const float* r = rows[k];
          const double w = wy[k];
          for(int64_t i = 0; i < tw.in; ++i) col[i] += w * double(r[i]);
        }
        if(twoTaps) {
          const int64_t* ix = xIdx.data();
          const double* wx = xW.data();
          for(int64_t x = 0; x < tw.out; ++x) {
            double acc = 0;
            acc += wx[2 * x] * col[ix[2 * x]];
            acc += wx[2 * x + 1] * col[ix[2 * x + 1]];
            o[x] = float(acc);
          }
          continue;
        }
        for(int64_t x = 0; x < tw.out; ++x) {
          double acc = 0;
          for(int64_t t = xStart[size_t(x)]; t < xStart[size_t(x + 1)]; ++t) acc += xW[size_t(t)] * col[xIdx[size_t(t)]];
          o[x] = float(acc);
        }
        continue;
      }
      for(int64_t x = 0; x < tw.out; ++x) {
        double acc = 0;
        for(int64_t t = xStart[size_t(x)]; t < xStart[size_t(x + 1)]; ++t) {
          const int64_t ix = xIdx[size_t(t)];
          double c = 0;
          for(int k = 0; k < ny; ++k) c += wy[k] * double(rows[k][ix]);
          acc += xW[size_t(t)] * c;
        }
        o[x] = float(acc);
      }
    }
  });
  return true;
}

// Forward (in -> out) or adjoint (out -> in) of the resize from `inShape` to `outShape`.
template <class T>
void resizeRun(const TensorBase& src, TensorBase& dst, const Attrs& at, const Shape& inShape, const Shape& outShape,
               bool adjoint) {
  Config c = configOf(at, inShape, outShape);
  const int r = inShape.rank();
  std::vector<AxisTaps> taps = ops::resizeTaps(at, inShape, outShape);
  if constexpr(std::is_same<T, float>::value)
    if(!adjoint && resizeLast2(src, dst, taps)) return;
  std::vector<double> cur(size_t(src.size()));
  const T* sp = src.data<T>();
  for(int64_t i = 0; i < src.size(); ++i) cur[size_t(i)] = double(host::load(sp, i));
  std::vector<int64_t> dims = adjoint ? outShape.vec() : inShape.vec();
  for(int k = 0; k < r; ++k) {
    int a = adjoint ? r - 1 - k : k;
    const AxisTaps& t = taps[size_t(a)];
    if(t.identity) continue;
    if(adjoint) {
      cur = applyAxisAdjoint(cur, dims, a, t);
      dims[size_t(a)] = t.in;
    } else {
      cur = applyAxis(cur, dims, a, t, c.ev);
      dims[size_t(a)] = t.out;
    }
  }
  ONYX_ASSERT(int64_t(cur.size()) == dst.size(), "resize: ", cur.size(), " values for ", dst.shape());
  T* dp = dst.data<T>();
  for(int64_t i = 0; i < dst.size(); ++i) {
    double v = cur[size_t(i)];
    if constexpr(std::is_integral<T>::value) dp[i] = castFromDouble<T>(std::nearbyint(v));
    else host::store(dp, i, v);
  }
}

const char* kAttrNames[] = {"sizes", "scales", "roi", "mode", "coordinate_transformation_mode", "nearest_mode",
                            "cubic_coeff_a", "exclude_outside", "extrapolation_value", "antialias"};

AttrList resizeAttrs(const Attrs& a) {
  AttrList l;
  for(const char* n : kAttrNames) l.emplace_back(n, a[n]);
  return l;
}

AttrList resizeAttrs(const Shape& sizes, const ResizeOptions& o, const std::vector<double>& scales) {
  return {{"sizes", attr(sizes.vec())},
          {"scales", FloatList(scales)},
          {"roi", FloatList(o.roi)},
          {"mode", attr(o.mode)},
          {"coordinate_transformation_mode", attr(o.coordinateTransformationMode)},
          {"nearest_mode", attr(o.nearestMode)},
          {"cubic_coeff_a", attr(o.cubicCoeffA)},
          {"exclude_outside", attr(o.excludeOutside)},
          {"extrapolation_value", attr(o.extrapolationValue)},
          {"antialias", attr(o.antialias)}};
}

// Checks the attributes against x's rank; returns the output shape (sizes).
Shape checkResize(InferCtx& c, const Shape& x) {
  const int r = x.rank();
  c.check(r >= 1, "needs an input of rank >= 1, got a scalar");
  const IntList& sizes = c.attrs.ints("sizes");
  c.check(sizes.size() == size_t(r), "sizes ", attrToString(sizes), " must have one entry per dim of x (", r, ")");
  for(auto s : sizes) c.check(s >= 0, "sizes must be >= 0, got ", attrToString(sizes));
  const FloatList& scales = c.attrs.floats("scales");
  c.check(scales.empty() || scales.size() == size_t(r), "scales must have one entry per dim (", r, "), got ",
          scales.size());
  for(double s : scales) c.check(s > 0, "scales must be > 0, got ", attrToString(scales));
  const FloatList& roi = c.attrs.floats("roi");
  c.check(roi.empty() || roi.size() == size_t(2 * r), "roi must have ", 2 * r, " entries, got ", roi.size());
  Mode m;
  Ctm t;
  Near n;
  c.check(parseMode(c.attrs.s("mode"), m), "unknown mode '", c.attrs.s("mode"), "' (nearest, linear, cubic)");
  c.check(parseCtm(c.attrs.s("coordinate_transformation_mode"), t), "unknown coordinate_transformation_mode '",
          c.attrs.s("coordinate_transformation_mode"), "'");
  c.check(parseNear(c.attrs.s("nearest_mode"), n), "unknown nearest_mode '", c.attrs.s("nearest_mode"), "'");
  return Shape(Shape::Dims(sizes.begin(), sizes.end()));
}

// What the Resize importer makes of scales or sizes (one per entry of `axes`,
// normalised) under keep_aspect_ratio_policy, for an input of shape xs: the
// output dims and the scale of every dim. Returns "" or what is wrong.
std::string resolveResize(const Shape& xs, const std::vector<int64_t>& axes, const std::vector<double>& scales,
                          const std::vector<int64_t>& sizes, const std::string& policy, std::vector<int64_t>& outDims,
                          std::vector<double>& fullScales) {
  const size_t na = axes.size();
  if(scales.empty() == sizes.empty()) return "exactly one of scales and sizes must be given (non-empty)";
  if(!scales.empty() && scales.size() != na) return str("scales has ", scales.size(), " entries for ", na, " axes");
  if(!sizes.empty() && sizes.size() != na) return str("sizes has ", sizes.size(), " entries for ", na, " axes");
  outDims = xs.vec();
  fullScales.assign(size_t(xs.rank()), 1.0);
  if(!scales.empty()) {
    for(size_t i = 0; i < na; ++i) {
      if(!(scales[i] > 0)) return str("scales must be > 0, got ", scales[i]);
      fullScales[size_t(axes[i])] = scales[i];
      const double d = std::floor(double(xs[int(axes[i])]) * scales[i]);
      // Checked before the conversion (beyond int64 it is undefined).
      if(!(d <= double(kMaxTensorElements)))
        return str("scale ", scales[i], " makes axis ", axes[i], " ", d, " long, more than 2^56");
      outDims[size_t(axes[i])] = int64_t(d);
    }
  } else if(policy == "stretch") {
    for(size_t i = 0; i < na; ++i) {
      outDims[size_t(axes[i])] = sizes[i];
      fullScales[size_t(axes[i])] = double(sizes[i]) / double(xs[int(axes[i])]);
    }
  } else {
    if(policy != "not_larger" && policy != "not_smaller") return str("unknown keep_aspect_ratio_policy '", policy, "'");
    double s = policy == "not_larger" ? 1e300 : 0;
    for(size_t i = 0; i < na; ++i) {
      double si = double(sizes[i]) / double(xs[int(axes[i])]);
      s = policy == "not_larger" ? std::min(s, si) : std::max(s, si);
    }
    for(size_t i = 0; i < na; ++i) {
      fullScales[size_t(axes[i])] = s;
      outDims[size_t(axes[i])] = int64_t(s * double(xs[int(axes[i])]) + 0.5);
    }
  }
  return "";
}

// ---------------------------------------------------------------- ONNX export

const char* modeName(Mode m) { return m == Mode::Nearest ? "nearest" : m == Mode::Linear ? "linear" : "cubic"; }

const char* ctmName(Ctm m) {
  switch(m) {
    case Ctm::HalfPixel: return "half_pixel";
    case Ctm::HalfPixelSymmetric: return "half_pixel_symmetric";
    case Ctm::PytorchHalfPixel: return "pytorch_half_pixel";
    case Ctm::AlignCorners: return "align_corners";
    case Ctm::Asymmetric: return "asymmetric";
    case Ctm::TfHalfPixelForNN: return "tf_half_pixel_for_nn";
    case Ctm::TfCropAndResize: return "tf_crop_and_resize";
  }
  return "";
}

const char* nearName(Near m) {
  switch(m) {
    case Near::RoundPreferFloor: return "round_prefer_floor";
    case Near::RoundPreferCeil: return "round_prefer_ceil";
    case Near::Floor: return "floor";
    case Near::Ceil: return "ceil";
    case Near::Simple: return "simple";
  }
  return "";
}

bool sameTaps(const AxisTaps& a, const AxisTaps& b) {
  if(a.identity || b.identity) return a.identity == b.identity;
  return a.n == b.n && a.idx == b.idx && a.w == b.w && a.extrap == b.extrap;
}

// A 1-D initializer of `v`: float32 where that holds every value exactly,
// else float64.
std::string floatsConst(OnnxExportCtx& c, const std::vector<double>& v, const std::string& hint) {
  std::vector<float> f(v.begin(), v.end());
  if(std::equal(v.begin(), v.end(), f.begin(), [](double a, float b) { return a == double(b); }))
    return c.constant(TensorBase::fromVector(Shape({int64_t(f.size())}), f), hint);
  return c.constant(TensorBase::fromVector(Shape({int64_t(v.size())}), v), hint);
}

// Resize (opset 10+) or Upsample (7-9). The ONNX form is searched, not
// assumed: the attributes the target opset has (the node's own values first;
// coordinate_transformation_mode and nearest_mode may be traded for others)
// must give every axis exactly the node's interpolation taps, so e.g.
// tf_half_pixel_for_nn (Resize 11-12 only) becomes half_pixel with a shifted
// rounding, half_pixel_symmetric (19+) half_pixel where the output size is
// exact, nearest_mode 'simple' (Resize-10, Upsample) floor or ceil. Sizes or
// scales (float32) are written as whichever the importer turns back into the
// node's output shape and scales, at opset 18+ also sizes with
// keep_aspect_ratio_policy and axes.
void exportResize(OnnxExportCtx& c, bool upsample) {
  const int opset = c.opset();
  const bool legacy = upsample || opset < 11;  // asymmetric coordinates, nearest 'simple', scales only
  const std::string what = str(upsample ? "Upsample" : "Resize", "-", opset);
  const Shape& xs = c.inputShape(0);
  const Shape& ys = c.node().shape();
  const int r = xs.rank();
  const Config want = configOf(c.attrs(), xs, ys);
  auto tapsOf = [&](const Config& k, int i) {
    return axisTaps(k, xs[i], ys[i], k.scales[size_t(i)], k.roi[size_t(i)], k.roi[size_t(i + r)]);
  };
  std::vector<AxisTaps> wantTaps;
  for(int i = 0; i < r; ++i) wantTaps.push_back(tapsOf(want, i));
  auto computesSame = [&](const Config& k) {
    for(int i = 0; i < r; ++i)
      if(!sameTaps(tapsOf(k, i), wantTaps[size_t(i)])) return false;
    return true;
  };

  if(legacy && want.mode == Mode::Cubic) c.requireOpset(11, "cubic resize");
  auto ctmValid = [&](Ctm m) {
    if(legacy) return m == Ctm::Asymmetric;
    if(m == Ctm::TfHalfPixelForNN) return opset <= 12;
    if(m == Ctm::HalfPixelSymmetric) return opset >= 19;
    return true;
  };
  std::vector<Ctm> ctms;
  for(Ctm m : {want.ctm, Ctm::HalfPixel, Ctm::Asymmetric, Ctm::AlignCorners, Ctm::PytorchHalfPixel,
               Ctm::TfCropAndResize, Ctm::TfHalfPixelForNN, Ctm::HalfPixelSymmetric})
    if(ctmValid(m) && std::find(ctms.begin(), ctms.end(), m) == ctms.end()) ctms.push_back(m);
  std::vector<Near> nears;
  if(legacy) nears.push_back(Near::Simple);
  else if(want.mode != Mode::Nearest) nears.push_back(Near::RoundPreferFloor);  // unused
  else
    for(Near m : {want.nearest, Near::RoundPreferFloor, Near::RoundPreferCeil, Near::Floor, Near::Ceil})
      if(m != Near::Simple && std::find(nears.begin(), nears.end(), m) == nears.end()) nears.push_back(m);
  Config k = want;
  k.antialias = want.antialias && opset >= 18;
  k.exclude = want.exclude && !legacy;
  bool found = false;
  for(size_t i = 0; i < ctms.size() && !found; ++i)
    for(size_t j = 0; j < nears.size() && !found; ++j) {
      k.ctm = ctms[i];
      k.nearest = nears[j];
      found = computesSame(k);
    }
  // A newer Resize has more coordinate modes: with an automatic opset, move up a step.
  if(!found && opset < 19)
    c.requireOpset(opset < 11 ? 11 : opset < 13 ? 13 : opset < 18 ? 18 : 19,
                   str("this resize (coordinate_transformation_mode ", ctmName(want.ctm), ", antialias ",
                       int(want.antialias), ")"));
  c.check(found, "no ", what, " form computes this resize exactly (mode ", modeName(want.mode),
          ", coordinate_transformation_mode ", ctmName(want.ctm), ", nearest_mode ", nearName(want.nearest),
          ", antialias ", int(want.antialias), ", exclude_outside ", int(want.exclude),
          "): Resize takes tf_half_pixel_for_nn at opsets 11-12, antialias from 18, half_pixel_symmetric from 19; "
          "Upsample and Resize-10 only asymmetric coordinates");

  // Scales or sizes that the importer reads back as the node's.
  const std::vector<int64_t> out = ys.vec();
  std::vector<int64_t> allAxes(static_cast<size_t>(r)), axes;
  for(int i = 0; i < r; ++i) allAxes[size_t(i)] = i;
  auto gives = [&](const std::vector<int64_t>& ax, const std::vector<double>& sc, const std::vector<int64_t>& sz,
                   const std::string& policy) {
    std::vector<int64_t> d;
    std::vector<double> s;
    return resolveResize(xs, ax, sc, sz, policy, d, s).empty() && d == out && s == want.scales;
  };
  std::vector<double> f32;
  for(double v : want.scales) f32.push_back(double(float(v)));
  std::vector<int64_t> sizes;
  std::string policy = "stretch";
  bool byScales = gives(allAxes, f32, {}, policy);
  if(!byScales && !legacy && gives(allAxes, {}, out, policy)) sizes = out;
  if(!byScales && sizes.empty() && opset >= 18) {
    // One scale shared by the resized axes: keep_aspect_ratio_policy with
    // sizes whose min (or max) ratio is exactly that scale.
    for(int i = 0; i < r; ++i)
      if(want.scales[size_t(i)] != 1 || out[size_t(i)] != xs[i]) axes.push_back(i);
    bool roiOk = true;
    for(int i = 0; i < r && want.ctm == Ctm::TfCropAndResize; ++i)
      if(std::find(axes.begin(), axes.end(), i) == axes.end())
        roiOk = roiOk && want.roi[size_t(i)] == 0 && want.roi[size_t(i + r)] == 1;
    for(const char* p : {"not_larger", "not_smaller"}) {
      if(axes.empty() || !roiOk || !sizes.empty()) break;
      const double s = want.scales[size_t(axes[0])];
      const bool larger = std::string(p) == "not_larger";
      std::vector<int64_t> sz;
      for(int64_t i : axes) {
        int64_t o = out[size_t(i)];
        double ratio = double(o) / double(xs[int(i)]);
        if(ratio == s || (larger ? ratio > s : ratio < s)) sz.push_back(o);
        else sz.push_back(larger ? int64_t(std::ceil(s * double(xs[int(i)]))) + 1
                                 : std::max<int64_t>(0, int64_t(std::floor(s * double(xs[int(i)]))) - 1));
      }
      if(gives(axes, {}, sz, p)) {
        sizes = sz;
        policy = p;
      }
    }
    if(policy == "stretch") axes.clear();
  }
  if(!byScales && sizes.empty() && opset < 18)
    c.requireOpset(legacy ? 11 : 18, str("output shape ", ys, " with scales ", attrToString(FloatList(want.scales))));
  c.check(byScales || !sizes.empty(), what, " cannot express output shape ", ys, " with scales ",
          attrToString(FloatList(want.scales)), ": ",
          legacy ? "it takes float32 scales only, with floor(input size * scale) the output size (export with "
                   "--opset 11 for sizes)"
                 : "neither float32 scales (floor(input size * scale) the output size) nor sizes (scale = output "
                   "size / input size) give them",
          !legacy && opset < 18 ? "; keep_aspect_ratio_policy needs opset 18" : "");

  c.check(c.inputType(0) != Type::bfloat16 || (!upsample && opset >= 13), what,
          " does not take bfloat16 (Resize does from opset 13 on)");
  std::string x = c.input(0);
  OnnxAttrs at;
  at.emplace_back("mode", std::string(modeName(want.mode)));
  std::vector<std::string> ins{x};
  std::string opType = upsample ? "Upsample" : "Resize";
  if(upsample) {
    for(double v : want.scales)
      if(v < 1) c.requireOpset(10, str("scales ", attrToString(FloatList(want.scales)), " (Upsample takes scales >= 1 only)"));
    if(opset < 9) at.emplace_back("scales", FloatList(f32));
    else ins.push_back(floatsConst(c, f32, "scales"));
  } else if(legacy) {
    ins.push_back(floatsConst(c, f32, "scales"));
  } else {
    const bool nearest = want.mode == Mode::Nearest;
    if(k.ctm != Ctm::HalfPixel) at.emplace_back("coordinate_transformation_mode", std::string(ctmName(k.ctm)));
    if(nearest && k.nearest != Near::RoundPreferFloor) at.emplace_back("nearest_mode", std::string(nearName(k.nearest)));
    // Float attributes are float32 in ONNX; a value that is not one would come back changed.
    auto floatAttr = [&](const char* name, double v) {
      c.check(double(float(v)) == v, name, " ", v, " is not a float32 value, which ONNX's attribute is");
      at.emplace_back(name, v);
    };
    if(want.mode == Mode::Cubic && want.a != -0.75) floatAttr("cubic_coeff_a", want.a);
    if(!nearest && k.exclude) at.emplace_back("exclude_outside", int64_t(1));
    if(k.ctm == Ctm::TfCropAndResize && want.ev != 0) floatAttr("extrapolation_value", want.ev);
    if(!nearest && k.antialias) at.emplace_back("antialias", int64_t(1));
    if(!axes.empty()) at.emplace_back("axes", attr(axes));
    if(policy != "stretch") at.emplace_back("keep_aspect_ratio_policy", policy);
    // Resize-11/12 take roi and scales always (empty when unused), 13+ as optional inputs.
    std::string empty;
    auto absent = [&]() {
      if(opset >= 13) return std::string();
      if(empty.empty()) empty = c.constant(TensorBase::fromVector(Shape({0}), std::vector<float>{}), "empty");
      return empty;
    };
    if(k.ctm == Ctm::TfCropAndResize) {
      std::vector<double> roi;
      const std::vector<int64_t>& ax = axes.empty() ? allAxes : axes;
      for(int64_t i : ax) roi.push_back(want.roi[size_t(i)]);
      for(int64_t i : ax) roi.push_back(want.roi[size_t(i + r)]);
      ins.push_back(floatsConst(c, roi, "roi"));
    } else {
      ins.push_back(absent());
    }
    if(byScales) {
      ins.push_back(floatsConst(c, f32, "scales"));
    } else {
      ins.push_back(absent());
      ins.push_back(c.intsConst(sizes, "sizes"));
    }
  }
  c.emit(opType, ins, {c.output()}, at);
}

}  // namespace

ONYX_OP(kResizeGrad, "resize_grad");

ONYX_OP(kResize, "resize")
    .doc("y[j..] = sum over taps of w(j, i) * x[i..], separable per axis: nearest, linear or cubic interpolation at "
         "the input coordinate of output index j (ONNX Resize); output shape `sizes`")
    .inputs(1)
    .attr("sizes", IntList{})
    .attr("scales", FloatList{})
    .attr("roi", FloatList{})
    .attr("mode", std::string("nearest"))
    .attr("coordinate_transformation_mode", std::string("half_pixel"))
    .attr("nearest_mode", std::string("round_prefer_floor"))
    .attr("cubic_coeff_a", -0.75)
    .attr("exclude_outside", int64_t(0))
    .attr("extrapolation_value", 0.0)
    .attr("antialias", int64_t(0))
    .infer([](InferCtx& c) {
      Type t = c.typeOf(0);
      c.check(isFloat(t) || isInt(t), "element type ", t, " is not supported (float and integer types)");
      c.shape = checkResize(c, c.shapeOf(0));
      c.type = t;
    })
    .cpu([](KernelCtx& c) {
      dispatchNumeric(c.out.type(), "resize", [&](auto tag) {
        resizeRun<typename decltype(tag)::type>(*c.in[0], c.out, c.attrs, c.in[0]->shape(), c.out.shape(), false);
      });
    })
    // Linear in x: the gradient is the adjoint map.
    .backward([](GradCtx& g) {
      AttrList l = resizeAttrs(g.attrs);
      l.emplace_back("input_shape", attr(g.x(0)->shape().vec()));
      g.add(0, g.graph.make(kResizeGrad, {g.dy}, l));
    })
    .onnx("Resize", 10)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0);
      const Shape& xs = x->shape();
      const int r = xs.rank();
      ResizeOptions o;
      o.mode = c.attrString("mode", "nearest");
      std::vector<double> scales;
      std::vector<int64_t> sizes;
      auto readScales = [&](size_t i) {
        if(c.numInputs() > i && c.hasInput(i)) scales = c.value(i)->toVector<double>();
      };
      std::vector<int64_t> axes;
      std::string policy = "stretch";
      if(c.opset() < 11) {
        // Resize-10: asymmetric coordinates, nearest rounds like Upsample.
        o.coordinateTransformationMode = "asymmetric";
        o.nearestMode = "simple";
        readScales(1);
      } else {
        o.coordinateTransformationMode = c.attrString("coordinate_transformation_mode", "half_pixel");
        o.nearestMode = c.attrString("nearest_mode", "round_prefer_floor");
        o.cubicCoeffA = c.attrFloat("cubic_coeff_a", -0.75);
        o.excludeOutside = c.attrInt("exclude_outside", 0) != 0;
        o.extrapolationValue = c.attrFloat("extrapolation_value", 0.0);
        o.antialias = c.attrInt("antialias", 0) != 0;
        axes = c.attrInts("axes", {});
        policy = c.attrString("keep_aspect_ratio_policy", "stretch");
        if(o.coordinateTransformationMode == "tf_crop_and_resize" && c.numInputs() > 1 && c.hasInput(1))
          o.roi = c.value(1)->toVector<double>();
        readScales(2);
        if(c.numInputs() > 3 && c.hasInput(3)) sizes = c.ints(3);
      }
      if(axes.empty())
        for(int i = 0; i < r; ++i) axes.push_back(i);
      for(auto& a : axes) {
        c.check(a >= -r && a < r, "axis ", a, " is out of range for rank ", r);
        if(a < 0) a += r;
      }
      const size_t na = axes.size();
      if(!o.roi.empty()) {
        c.check(o.roi.size() == 2 * na, "roi has ", o.roi.size(), " entries, expected ", 2 * na);
        std::vector<double> full(size_t(r), 0.0);
        full.resize(size_t(2 * r), 1.0);
        for(size_t i = 0; i < na; ++i) {
          full[size_t(axes[i])] = o.roi[i];
          full[size_t(axes[i] + r)] = o.roi[i + na];
        }
        o.roi = full;
      }
      std::vector<int64_t> outDims;
      std::vector<double> fullScales;
      std::string err = resolveResize(xs, axes, scales, sizes, policy, outDims, fullScales);
      c.check(err.empty(), err);
      c.setOutput(0, resize(x, Shape(outDims), o, fullScales));
    })
    .exporter([](OnnxExportCtx& c) { exportResize(c, false); })
    // Upsample-7/8 take the scales as an attribute, 9 as an input; nearest
    // rounds down when upsampling, coordinates are asymmetric.
    .onnx("Upsample", 7)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0);
      ResizeOptions o;
      o.mode = c.attrString("mode", "nearest");
      o.coordinateTransformationMode = "asymmetric";
      o.nearestMode = "simple";
      std::vector<double> scales = c.opset() < 9 ? c.attrFloats("scales") : c.value(1)->toVector<double>();
      c.check(scales.size() == size_t(x->shape().rank()), "scales has ", scales.size(), " entries for rank ",
              x->shape().rank());
      c.setOutput(0, resize_by(x, scales, o));
    })
    .exporter([](OnnxExportCtx& c) { exportResize(c, true); });

Expr resize(Expr x, const Shape& sizes, const ResizeOptions& o, const std::vector<double>& scales) {
  return x->graph()->make(kResize, {x}, resizeAttrs(sizes, o, scales));
}

Expr resize_by(Expr x, const std::vector<double>& scales, const ResizeOptions& o) {
  const Shape& xs = x->shape();
  ONYX_CHECK(scales.size() == xs.size(), "resize_by: ", scales.size(), " scales for an input of shape ", xs);
  std::vector<int64_t> out;
  for(int i = 0; i < xs.rank(); ++i) {
    const double s = scales[size_t(i)], d = std::floor(double(xs[i]) * s);
    // Checked before the conversion (NaN or beyond int64 is undefined), as resize's import checks it.
    ONYX_CHECK(s > 0, "resize_by: scales must be > 0, got ", s);
    ONYX_CHECK(d <= double(kMaxTensorElements), "resize_by: scale ", s, " makes axis ", i, " ", d,
               " long, more than 2^56");
    out.push_back(int64_t(d));
  }
  return resize(x, Shape(out), o, scales);
}

[[maybe_unused]] static OpDef& kResizeGradDef = kResizeGrad
    .doc("dx = the adjoint of resize from input_shape to dy's shape: dy[j..] * w(j, i) added to dx[i..]")
    .inputs(1)
    .attr("input_shape", IntList{})
    .attr("sizes", IntList{})
    .attr("scales", FloatList{})
    .attr("roi", FloatList{})
    .attr("mode", std::string("nearest"))
    .attr("coordinate_transformation_mode", std::string("half_pixel"))
    .attr("nearest_mode", std::string("round_prefer_floor"))
    .attr("cubic_coeff_a", -0.75)
    .attr("exclude_outside", int64_t(0))
    .attr("extrapolation_value", 0.0)
    .attr("antialias", int64_t(0))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      const IntList& is = c.attrs.ints("input_shape");
      Shape xs(Shape::Dims(is.begin(), is.end()));
      Shape ys = checkResize(c, xs);
      c.check(ys == c.shapeOf(0), "dy of shape ", c.shapeOf(0), " does not match sizes ", ys);
      c.shape = xs;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const IntList& is = c.attrs.ints("input_shape");
      Shape xs(Shape::Dims(is.begin(), is.end()));
      dispatchFloat(c.out.type(), "resize_grad", [&](auto tag) {
        resizeRun<typename decltype(tag)::type>(*c.in[0], c.out, c.attrs, xs, c.in[0]->shape(), true);
      });
    })
    // Linear in dy: the adjoint of the adjoint is resize without the
    // extrapolation constant.
    .backward([](GradCtx& g) {
      AttrList l = resizeAttrs(g.attrs);
      for(auto& kv : l)
        if(kv.first == "extrapolation_value") kv.second = 0.0;
      g.add(0, g.graph.make(kResize, {g.dy}, l));
    })
    .noOnnx("internal: gradient of resize");

Expr resize_grad(Expr dy, const Shape& inputShape, const ResizeOptions& o, const std::vector<double>& scales) {
  AttrList l = resizeAttrs(dy->shape(), o, scales);
  l.emplace_back("input_shape", attr(inputShape.vec()));
  return dy->graph()->make(kResizeGrad, {dy}, l);
}

}  // namespace onyx
