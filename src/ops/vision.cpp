// Vision ops: grid_sample (with kernels for its gradients w.r.t. the input
// and the grid), roi_align (and its gradient w.r.t. the input), the
// affine_grid composite and the eagerly computed non_max_suppression (their
// ONNX imports are in converters/import_vision.cpp).
//
// grid_sample computes, for each grid point, the taps of every spatial axis
// (index, weight, d weight / d coordinate) once and combines them into the
// product taps; the forward pass sums them over the channels, the adjoint
// scatters into them and the grid gradient contracts them with x and dy.
// Values are processed in double.
#include <onyx/ops/vision.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <onyx/core/allocation_limit.h>
#include <onyx/core/checked.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

using AttrList = std::vector<std::pair<std::string, AttrValue>>;

// ================================================================ grid_sample

constexpr int kMaxSpatial = 5;

enum class GsMode { Nearest, Linear, Cubic };
enum class GsPad { Zeros, Border, Reflection };

bool parseGsMode(const std::string& s, GsMode& m) {
  if(s == "nearest") m = GsMode::Nearest;
  else if(s == "linear" || s == "bilinear" || s == "trilinear") m = GsMode::Linear;
  else if(s == "cubic" || s == "bicubic") m = GsMode::Cubic;
  else return false;
  return true;
}

bool parseGsPad(const std::string& s, GsPad& p) {
  if(s == "zeros") p = GsPad::Zeros;
  else if(s == "border") p = GsPad::Border;
  else if(s == "reflection") p = GsPad::Reflection;
  else return false;
  return true;
}

struct GsGeom {
  GsMode mode = GsMode::Linear;
  GsPad pad = GsPad::Zeros;
  bool align = false;
  int r = 0;                        // spatial rank
  int64_t dims[kMaxSpatial] = {};   // x's spatial dims
  int64_t stride[kMaxSpatial] = {};
  int64_t N = 0, C = 0, plane = 1;  // plane: elements of one x channel
  int64_t points = 1;               // grid points per batch entry
  int maxTaps = 1;
};

GsGeom gsGeom(const Attrs& at, const Shape& xs, const Shape& gs) {
  GsGeom g;
  parseGsMode(at.s("mode"), g.mode);
  parseGsPad(at.s("padding_mode"), g.pad);
  g.align = at.i("align_corners") != 0;
  g.r = xs.rank() - 2;
  g.N = xs[0];
  g.C = xs[1];
  for(int a = g.r - 1; a >= 0; --a) {
    g.dims[a] = xs[2 + a];
    g.stride[a] = g.plane;
    g.plane *= g.dims[a];
  }
  for(int a = 0; a < g.r; ++a) g.points *= gs[1 + a];
  const int per = g.mode == GsMode::Nearest ? 1 : g.mode == GsMode::Linear ? 2 : 4;
  for(int a = 0; a < g.r; ++a) g.maxTaps *= per;
  return g;
}

// Folds x into [lo, hi] by reflecting at the borders; sign is d result / d x.
double reflectCoord(double x, double lo, double hi, double& sign) {
  sign = 1;
  const double rng = hi - lo;
  if(!(rng > 0)) {
    sign = 0;
    return lo;
  }
  if(x >= lo && x <= hi) return x;
  const bool below = x < lo;
  const double d = below ? lo - x : x - hi;
  const double k = std::floor(d / rng), rem = d - k * rng;
  const bool even = std::fmod(k, 2.0) == 0;
  if(below) {
    sign = even ? -1 : 1;
    return even ? lo + rem : hi - rem;
  }
  sign = even ? -1 : 1;
  return even ? hi - rem : lo + rem;
}

// Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2
// for a fraction t in [0, 1), and their derivatives in t.
void cubicCoeffs(double t, double* w, double* dw) {
  const double A = -0.75;
  auto far = [&](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };  // 1 <= s < 2
  auto dfar = [&](double s) { return (3 * A * s - 10 * A) * s + 8 * A; };
  auto nearW = [&](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };  // 0 <= s <= 1
  auto dnear = [&](double s) { return (3 * (A + 2) * s - 2 * (A + 3)) * s; };
  w[0] = far(t + 1);
  dw[0] = dfar(t + 1);
  w[1] = nearW(t);
  dw[1] = dnear(t);
  w[2] = nearW(1 - t);
  dw[2] = -dnear(1 - t);
  w[3] = far(2 - t);
  dw[3] = -dfar(2 - t);
}

struct GsAxis {
  int n = 0;
  int64_t idx[4];  // -1: the tap reads zero padding
  double w[4], dw[4];
};

// Taps of spatial axis a for the normalised coordinate u.
void gsAxis(const GsGeom& g, int a, double u, GsAxis& t) {
  const int64_t d = g.dims[a];
  double x, dx;
  if(g.align) {
    x = (u + 1) / 2 * double(d - 1);
    dx = double(d - 1) / 2;
  } else {
    x = ((u + 1) * double(d) - 1) / 2;
    dx = double(d) / 2;
  }
  // Keeps the integer conversions below defined for huge or NaN coordinates.
  x = std::min(1e15, std::max(-1e15, x));
  const double lo = g.align ? 0.0 : -0.5, hi = g.align ? double(d - 1) : double(d) - 0.5;
  if(g.mode == GsMode::Nearest) {
    x = std::nearbyint(x);
    dx = 0;
  }
  if(x < lo || x > hi) {
    if(g.pad == GsPad::Border) {
      x = std::min(double(d - 1), std::max(0.0, x));
      dx = 0;
    } else if(g.pad == GsPad::Reflection) {
      double s;
      x = reflectCoord(x, lo, hi, s);
      dx *= s;
    }
  }
  auto fetch = [&](int64_t i) -> int64_t {
    if(i >= 0 && i < d) return i;
    if(g.pad == GsPad::Zeros) return -1;
    if(g.pad == GsPad::Reflection) {
      double s;
      i = static_cast<int64_t>(reflectCoord(double(i), lo, hi, s));
    }
    return std::min(d - 1, std::max<int64_t>(0, i));
  };
  if(g.mode == GsMode::Nearest) {
    t.n = 1;
    t.idx[0] = fetch(static_cast<int64_t>(x));
    t.w[0] = 1;
    t.dw[0] = 0;
    return;
  }
  const double x0 = std::floor(x), f = x - x0;
  const int64_t i0 = static_cast<int64_t>(x0);
  if(g.mode == GsMode::Linear) {
    t.n = 2;
    t.idx[0] = fetch(i0);
    t.idx[1] = fetch(i0 + 1);
    t.w[0] = 1 - f;
    t.w[1] = f;
    t.dw[0] = -dx;
    t.dw[1] = dx;
    return;
  }
  t.n = 4;
  cubicCoeffs(f, t.w, t.dw);
  for(int k = 0; k < 4; ++k) {
    t.idx[k] = fetch(i0 - 1 + k);
    t.dw[k] *= dx;
  }
}

// A product tap: x offset within a channel, weight, and d weight / d u_a.
struct GsTap {
  int64_t off;
  double w;
  double g[kMaxSpatial];
};

// The product taps of the grid point whose r coordinates start at gp
// (gp[0] indexes the last spatial axis). Returns their number.
template <class T>
int gsTaps(const GsGeom& g, const T* gp, GsTap* taps) {
  int m = 1;
  taps[0].off = 0;
  taps[0].w = 1;
  for(int a = 0; a < g.r; ++a) {
    GsAxis t;
    gsAxis(g, a, double(host::load(gp, g.r - 1 - a)), t);
    int nm = 0;
    for(int j = 0; j < m; ++j) {
      for(int k = 0; k < t.n; ++k) {
        if(t.idx[k] < 0) continue;
        GsTap& o = taps[m + nm];  // staged after the current ones
        o.off = taps[j].off + t.idx[k] * g.stride[a];
        o.w = taps[j].w * t.w[k];
        for(int b = 0; b < a; ++b) o.g[b] = taps[j].g[b] * t.w[k];
        o.g[a] = taps[j].w * t.dw[k];
        ++nm;
      }
    }
    std::copy(taps + m, taps + m + nm, taps);
    m = nm;
  }
  return m;
}

// Room for the staged taps of gsTaps.
size_t gsTapRoom(const GsGeom& g) { return size_t(g.maxTaps) * 2 + 4; }

template <class T>
void gsForward(const GsGeom& g, const TensorBase& xt, const TensorBase& gt, TensorBase& yt) {
  const T* x = xt.data<T>();
  const T* gp = gt.data<T>();
  T* y = yt.data<T>();
  const int64_t total = g.N * g.points;
  host::parallelFor(total, total * g.C * g.maxTaps, [&](int64_t b, int64_t e) {
    std::vector<GsTap> taps(gsTapRoom(g));
    for(int64_t k = b; k < e; ++k) {
      const int64_t n = k / g.points, o = k % g.points;
      const int m = gsTaps(g, gp + k * g.r, taps.data());
      for(int64_t c = 0; c < g.C; ++c) {
        const T* xp = x + (n * g.C + c) * g.plane;
        double s = 0;
        for(int j = 0; j < m; ++j) s += taps[size_t(j)].w * double(host::load(xp, taps[size_t(j)].off));
        host::store(y, (n * g.C + c) * g.points + o, s);
      }
    }
  });
}

// dx = adjoint of the forward pass applied to dy.
template <class T>
void gsGradX(const GsGeom& g, const TensorBase& dyt, const TensorBase& gt, TensorBase& dxt) {
  const T* dy = dyt.data<T>();
  const T* gp = gt.data<T>();
  T* dx = dxt.data<T>();
  host::parallelFor(g.N * g.C, g.N * g.C * g.points * g.maxTaps, [&](int64_t b, int64_t e) {
    std::vector<GsTap> taps(gsTapRoom(g));
    std::vector<double> acc(size_t(g.plane));
    for(int64_t nc = b; nc < e; ++nc) {
      const int64_t n = nc / g.C;
      std::fill(acc.begin(), acc.end(), 0.0);
      for(int64_t o = 0; o < g.points; ++o) {
        const double d = double(host::load(dy, nc * g.points + o));
        if(d == 0) continue;
        const int m = gsTaps(g, gp + (n * g.points + o) * g.r, taps.data());
        for(int j = 0; j < m; ++j) acc[size_t(taps[size_t(j)].off)] += d * taps[size_t(j)].w;
      }
      for(int64_t i = 0; i < g.plane; ++i) host::store(dx, nc * g.plane + i, acc[size_t(i)]);
    }
  });
}

// dgrid[n, o, r-1-a] = sum_c dy[n, c, o] * sum_taps x[n, c, off] * d w / d u_a.
template <class T>
void gsGradGrid(const GsGeom& g, const TensorBase& xt, const TensorBase& gt, const TensorBase& dyt, TensorBase& dgt) {
  const T* x = xt.data<T>();
  const T* gp = gt.data<T>();
  const T* dy = dyt.data<T>();
  T* dg = dgt.data<T>();
  const int64_t total = g.N * g.points;
  host::parallelFor(total, total * g.C * g.maxTaps, [&](int64_t b, int64_t e) {
    std::vector<GsTap> taps(gsTapRoom(g));
    for(int64_t k = b; k < e; ++k) {
      const int64_t n = k / g.points, o = k % g.points;
      double acc[kMaxSpatial] = {};
      if(g.mode != GsMode::Nearest) {
        const int m = gsTaps(g, gp + k * g.r, taps.data());
        for(int64_t c = 0; c < g.C; ++c) {
          const double d = double(host::load(dy, (n * g.C + c) * g.points + o));
          if(d == 0) continue;
          const T* xp = x + (n * g.C + c) * g.plane;
          for(int j = 0; j < m; ++j) {
            const double v = d * double(host::load(xp, taps[size_t(j)].off));
            for(int a = 0; a < g.r; ++a) acc[a] += v * taps[size_t(j)].g[a];
          }
        }
      }
      for(int a = 0; a < g.r; ++a) host::store(dg, k * g.r + (g.r - 1 - a), acc[a]);
    }
  });
}

void checkGsAttrs(InferCtx& c) {
  GsMode m;
  GsPad p;
  c.check(parseGsMode(c.attrs.s("mode"), m), "mode '", c.attrs.s("mode"), "' is not one of nearest, linear, cubic");
  c.check(parseGsPad(c.attrs.s("padding_mode"), p), "padding_mode '", c.attrs.s("padding_mode"),
          "' is not one of zeros, border, reflection");
}

// Checks x [N, C, D1..Dr] against grid [N, O1..Or, r]; returns [N, C, O1..Or].
Shape checkGsShapes(InferCtx& c, const Shape& xs, const Shape& gs, const char* xname) {
  const int r = xs.rank() - 2;
  c.check(r >= 1 && r <= kMaxSpatial, xname, " of shape ", xs, " must be [N, C, D1..Dr] with 1 <= r <= ", kMaxSpatial);
  c.check(gs.rank() == r + 2 && gs[0] == xs[0] && gs[r + 1] == r, "grid of shape ", gs, " does not fit ", xname,
          " of shape ", xs, ": expected [", xs[0], ", O1..O", r, ", ", r, "]");
  Shape::Dims out{xs[0], xs[1]};
  for(int a = 0; a < r; ++a) out.push_back(gs[1 + a]);
  return Shape(out);
}

void requireSameFloat(InferCtx& c) {
  c.requireFloat(0);
  c.type = c.commonType();
}

AttrList gsAttrs(const Attrs& a) {
  return {{"mode", a["mode"]}, {"padding_mode", a["padding_mode"]}, {"align_corners", a["align_corners"]}};
}

#define ONYX_GS_DISPATCH(ctx, body)                                              \
  dispatchFloat((ctx).out.type(), (ctx).node.type().c_str(), [&](auto tag) { \
    using T = typename decltype(tag)::type;                                    \
    body;                                                                      \
  })

// Emits opType on `inputs` into the node's output; with `via` (not
// undefined) the inputs whose index is in `cast` go to that type first and
// the result comes back by a Cast. The kernels here compute in double, so
// double and one Cast back round as they do.
void emitBridged(OnnxExportCtx& c, const std::string& opType, std::vector<std::string> inputs,
                 const std::vector<size_t>& cast, Type via, const OnnxAttrs& attrs) {
  if(via == Type::undefined) {
    c.emit(opType, inputs, {c.output()}, attrs);
    return;
  }
  c.requireOpset(13, str(opType, " on ", c.inputType(0), " (run in ", via, " through Cast)"));
  for(size_t i : cast) {
    std::string v = c.fresh("in" + std::to_string(i) + "_" + typeName(via));
    c.emit("Cast", {inputs[i]}, {v}, {{"to", int64_t(via)}});
    inputs[i] = v;
  }
  std::string y = c.fresh(std::string("out_") + typeName(via));
  c.emit(opType, inputs, {y}, attrs);
  c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(c.node().value_type())}});
}

// GridSample-16 names the modes bilinear/bicubic and takes 4-D X only, 20
// linear/cubic and any rank; bfloat16 from 22 (before, in double).
void exportGridSample(OnnxExportCtx& c) {
  const int opset = c.opset();
  const Attrs a = c.attrs();
  GsMode m = GsMode::Linear;
  GsPad p = GsPad::Zeros;
  parseGsMode(a.s("mode"), m);
  parseGsPad(a.s("padding_mode"), p);
  if(c.inputShape(0).rank() != 4) c.requireOpset(20, str("GridSample with ", c.inputShape(0).rank() - 2, " spatial dims"));
  std::string mode = m == GsMode::Nearest ? "nearest"
                     : m == GsMode::Linear ? (opset < 20 ? "bilinear" : "linear")
                                           : (opset < 20 ? "bicubic" : "cubic");
  OnnxAttrs at{{"mode", mode}};
  if(p != GsPad::Zeros) at.emplace_back("padding_mode", std::string(p == GsPad::Border ? "border" : "reflection"));
  if(a.i("align_corners") != 0) at.emplace_back("align_corners", int64_t(1));
  Type via = c.inputType(0) == Type::bfloat16 && opset < 22 ? Type::float64 : Type::undefined;
  emitBridged(c, "GridSample", c.inputs(), {0, 1}, via, at);
}

}  // namespace

ONYX_OP(kGridSample, "grid_sample");
ONYX_OP(kGridSampleGradX, "grid_sample_grad_x");
ONYX_OP(kGridSampleGradGrid, "grid_sample_grad_grid");

// y[n, c, o..] = sum_taps w(grid[n, o..]) * x[n, c, taps]
[[maybe_unused]] static OpDef& kGridSampleDef = kGridSample
    .doc("y[n, c, o..] = x[n, c] interpolated (nearest, linear or cubic) at the normalised position grid[n, o..] "
         "(grid[.., 0] indexes the last dim of x); x [N, C, D1..Dr], grid [N, O1..Or, r], y [N, C, O1..Or]")
    .inputs(2)
    .attr("mode", std::string("linear"))
    .attr("padding_mode", std::string("zeros"))
    .attr("align_corners", int64_t(0))
    .infer([](InferCtx& c) {
      requireSameFloat(c);
      checkGsAttrs(c);
      c.shape = checkGsShapes(c, c.shapeOf(0), c.shapeOf(1), "x");
    })
    .cpu([](KernelCtx& c) {
      GsGeom g = gsGeom(c.attrs, c.in[0]->shape(), c.in[1]->shape());
      ONYX_GS_DISPATCH(c, gsForward<T>(g, *c.in[0], *c.in[1], c.out));
    })
    .gpuOnHost("no GPU form yet: it waits for GPU interpolation kernels")
    // dx = grid_sample_grad_x(dy, grid), dgrid = grid_sample_grad_grid(x, grid, dy).
    .backward([](GradCtx& g) {
      Expr x = g.x(0), grid = g.x(1);
      AttrList l = gsAttrs(g.attrs);
      if(g.needs(0)) {
        AttrList lx = l;
        lx.emplace_back("shape", attr(x->shape().vec()));
        g.add(0, g.graph.make(kGridSampleGradX, {g.dy, grid}, lx));
      }
      if(g.needs(1)) g.add(1, g.graph.make(kGridSampleGradGrid, {x, grid, g.dy}, l));
    })
    // Opset 16: bilinear/bicubic names and 4-D x only; 20: linear/cubic and
    // N-D; 22: more types. Both name sets are accepted at every opset.
    .onnx("GridSample", 16)
    .importer([](OnnxImportCtx& c) {
      GridSampleOptions o;
      o.mode = c.attrString("mode", c.opset() < 20 ? "bilinear" : "linear");
      o.paddingMode = c.attrString("padding_mode", "zeros");
      o.alignCorners = c.attrInt("align_corners", 0) != 0;
      Expr x = c.input(0), grid = c.input(1);
      c.check(isFloat(x->value_type()) && isFloat(grid->value_type()), "X (", x->value_type(), ") and grid (",
              grid->value_type(), ") must have float types");
      c.check(c.opset() >= 20 || x->shape().rank() == 4, "X must be 4-D before opset 20, got shape ", x->shape());
      c.setOutput(0, grid_sample(x, grid, o));
    })
    .exporter(exportGridSample);

// The adjoint of grid_sample in x: dx[n, c, i..] = sum_o dy[n, c, o..] * w(grid[n, o..], i..)
[[maybe_unused]] static OpDef& kGridSampleGradXDef = kGridSampleGradX
    .doc("dx[n, c, i..] = sum_{o..} dy[n, c, o..] * (weight of x[n, c, i..] in grid_sample at grid[n, o..]): "
         "grid_sample's gradient w.r.t. x, of shape `shape`")
    .inputs(2)
    .attr("mode", std::string("linear"))
    .attr("padding_mode", std::string("zeros"))
    .attr("align_corners", int64_t(0))
    .attr("shape", IntList{})
    .infer([](InferCtx& c) {
      requireSameFloat(c);
      checkGsAttrs(c);
      const IntList& s = c.attrs.ints("shape");
      for(auto d : s) c.check(d >= 0, "shape ", attrToString(s), " has a negative dim");
      Shape xs(Shape::Dims(s.begin(), s.end()));
      Shape ys = checkGsShapes(c, xs, c.shapeOf(1), "shape");
      c.check(c.shapeOf(0) == ys, "dy of shape ", c.shapeOf(0), " does not match grid_sample's output ", ys);
      c.shape = xs;
    })
    .cpu([](KernelCtx& c) {
      GsGeom g = gsGeom(c.attrs, c.out.shape(), c.in[1]->shape());
      ONYX_GS_DISPATCH(c, gsGradX<T>(g, *c.in[0], *c.in[1], c.out));
    })
    .gpuOnHost("no GPU form yet: it waits for GPU interpolation kernels")
    // Linear in dy: <G, A(grid)^T dy> = <A(grid) G, dy>, so d/d dy is
    // grid_sample(G, grid) and d/d grid is grid_sample_grad_grid(G, grid, dy).
    .backward([](GradCtx& g) {
      Expr dy = g.x(0), grid = g.x(1);
      AttrList l = gsAttrs(g.attrs);
      if(g.needs(0)) g.add(0, g.graph.make(kGridSample, {g.dy, grid}, l));
      if(g.needs(1)) g.add(1, g.graph.make(kGridSampleGradGrid, {g.dy, grid, dy}, l));
    })
    .noOnnx("internal: gradient of grid_sample");

// dgrid[n, o.., k] = sum_c dy[n, c, o..] * d grid_sample(x, grid)[n, c, o..] / d grid[n, o.., k]
[[maybe_unused]] static OpDef& kGridSampleGradGridDef = kGridSampleGradGrid
    .doc("dgrid[n, o.., k] = sum_c dy[n, c, o..] * d y[n, c, o..] / d grid[n, o.., k] with y = grid_sample(x, grid): "
         "grid_sample's gradient w.r.t. the grid (0 for nearest)")
    .inputs(3)
    .attr("mode", std::string("linear"))
    .attr("padding_mode", std::string("zeros"))
    .attr("align_corners", int64_t(0))
    .infer([](InferCtx& c) {
      requireSameFloat(c);
      checkGsAttrs(c);
      Shape ys = checkGsShapes(c, c.shapeOf(0), c.shapeOf(1), "x");
      c.check(c.shapeOf(2) == ys, "dy of shape ", c.shapeOf(2), " does not match grid_sample's output ", ys);
      c.shape = c.shapeOf(1);
    })
    .cpu([](KernelCtx& c) {
      GsGeom g = gsGeom(c.attrs, c.in[0]->shape(), c.in[1]->shape());
      ONYX_GS_DISPATCH(c, gsGradGrid<T>(g, *c.in[0], *c.in[1], *c.in[2], c.out));
    })
    .gpuOnHost("no GPU form yet: it waits for GPU interpolation kernels")
    .notDifferentiable("second derivatives of the sampling weights w.r.t. the grid are not implemented")
    .noOnnx("internal: gradient of grid_sample");

Expr grid_sample(Expr x, Expr grid, const GridSampleOptions& o) {
  if(grid->value_type() != x->value_type() && isFloat(grid->value_type()) && isFloat(x->value_type()))
    grid = cast(grid, x->value_type());
  return x->graph()->make(kGridSample, {x, grid},
                          {{"mode", attr(o.mode)},
                           {"padding_mode", attr(o.paddingMode)},
                           {"align_corners", attr(int64_t(o.alignCorners))}});
}

// ================================================================ affine_grid

Expr affine_grid(Expr theta, const std::vector<int64_t>& spatial, bool alignCorners) {
  const int r = static_cast<int>(spatial.size());
  const Shape& ts = theta->shape();
  ONYX_CHECK(r == 2 || r == 3, "affine_grid: the output size must have 2 or 3 spatial dims, got ", r);
  ONYX_CHECK(ts.rank() == 3 && ts[1] == r && ts[2] == r + 1, "affine_grid: theta must have shape [N, ", r, ", ",
             r + 1, "] for ", r, " spatial dims, got ", ts);
  ONYX_CHECK(isFloat(theta->value_type()), "affine_grid: theta has element type ", theta->value_type(),
             "; it must be a float type");
  int64_t points = 1;
  for(auto d : spatial) {
    ONYX_CHECK(d >= 1, "affine_grid: spatial sizes must be >= 1, got ", d);
    points = mulChecked(points, d, "affine_grid: the output's spatial size");
  }
  // The base grid is built on the host: held to the run's memory limit.
  const int64_t baseSize = mulChecked(points, r + 1, "affine_grid: the base grid's size");
  const int64_t baseBytes = mulChecked(baseSize, int64_t(sizeof(double)), "affine_grid: the base grid's bytes");
  checkHostAllocation(static_cast<size_t>(baseBytes), "affine_grid's base grid");
  // Normalised coordinate of position i of n.
  auto coord = [&](int64_t i, int64_t n) {
    if(alignCorners) return n == 1 ? -1.0 : -1 + 2.0 * double(i) / double(n - 1);
    return -1 + (2.0 * double(i) + 1) / double(n);
  };
  // base[p] = (x, y[, z], 1): x along the last spatial dim.
  std::vector<double> base(static_cast<size_t>(baseSize));
  for(int64_t p = 0; p < points; ++p) {
    int64_t rem = p;
    for(int a = r - 1; a >= 0; --a) {
      int64_t i = rem % spatial[size_t(a)];
      rem /= spatial[size_t(a)];
      base[size_t(p * (r + 1) + (r - 1 - a))] = coord(i, spatial[size_t(a)]);
    }
    base[size_t(p * (r + 1) + r)] = 1;
  }
  Expr b = theta->graph()->constant(Shape{points, r + 1}, inits::fromVector(base), theta->value_type());
  Expr g = dot(b, theta, false, true);  // [N, points, r]
  std::vector<int64_t> out{ts[0]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  out.push_back(r);
  return reshape(g, out);
}

// =============================================================== deform_conv

Expr deform_conv(Expr x, Expr W, Expr offset, Expr b, Expr mask, const DeformConvOptions& o) {
  const Shape& xs = x->shape();
  const Shape& ws = W->shape();
  const Shape& os = offset->shape();
  ONYX_CHECK(xs.rank() == 4 && ws.rank() == 4 && os.rank() == 4, "deform_conv: x ", xs, ", W ", ws, " and offset ",
             os, " must be 4-D (2-D convolution)");
  const int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], M = ws[0], kh = ws[2], kw = ws[3];
  const int64_t G = o.group, OG = o.offsetGroup, K = kh * kw, oh = os[2], ow = os[3], P = oh * ow;
  auto list = [&](const std::vector<int64_t>& v, size_t n, int64_t def, const char* what) {
    ONYX_CHECK(v.empty() || v.size() == n, "deform_conv: ", what, " must have ", n, " entries, got ", v.size());
    return v.empty() ? std::vector<int64_t>(n, def) : v;
  };
  std::vector<int64_t> st = list(o.strides, 2, 1, "strides"), dl = list(o.dilations, 2, 1, "dilations");
  std::vector<int64_t> pd = list(o.pads, 4, 0, "pads");
  // Every size below comes from the file: multiplied and added with checks.
  ONYX_CHECK(G >= 1 && OG >= 1 && C % G == 0 && M % G == 0 && mulChecked(ws[1], G, "deform_conv: group") == C &&
                 C % OG == 0,
             "deform_conv: x has ", C, " channels, W has shape ", ws, ", group ", G, ", offset_group ", OG,
             ": need C = W.shape[1] * group, M and C divisible by group, C divisible by offset_group");
  const int64_t OGK = mulChecked(OG, K, "deform_conv: offset_group * kernel taps");
  const int64_t OGK2 = mulChecked(OGK, 2, "deform_conv: offset channels");
  ONYX_CHECK(os[0] == N && os[1] == OGK2, "deform_conv: offset of shape ", os, " must be [", N, ", ", OGK2,
             ", oh, ow]");
  for(int a = 0; a < 2; ++a) {
    ONYX_CHECK(st[size_t(a)] >= 1 && dl[size_t(a)] >= 1, "deform_conv: strides and dilations must be >= 1");
    const int64_t in = xs[2 + a], k = ws[2 + a];
    const int64_t span = addChecked(mulChecked(k - 1, dl[size_t(a)], "deform_conv: dilated kernel"), 1,
                                    "deform_conv: dilated kernel");
    const int64_t padded = addChecked(addChecked(in, pd[size_t(a)], "deform_conv: padded input"),
                                      pd[size_t(a + 2)], "deform_conv: padded input");
    const int64_t want = subChecked(padded, span, "deform_conv: output size") / st[size_t(a)] + 1;
    ONYX_CHECK(os[2 + a] == want, "deform_conv: offset's spatial dim ", a, " is ", os[2 + a],
               " but the convolution gives ", want);
  }
  if(mask)
    ONYX_CHECK(mask->shape() == Shape({N, OGK, oh, ow}), "deform_conv: mask of shape ", mask->shape(),
               " must be [", N, ", ", OGK, ", ", oh, ", ", ow, "]");
  ExpressionGraph& g = *x->graph();
  const Type t = x->value_type();
  // Normalised (align_corners = false) coordinates: u = (2 pos + 1) / size - 1,
  // so grid = (pos + base) * scale + shift with pos = (w, h) of each tap.
  const int64_t baseSize = mulChecked(mulChecked(K, P, "deform_conv: taps * positions"), 2, "deform_conv: taps");
  checkHostAllocation(static_cast<size_t>(mulChecked(baseSize, int64_t(sizeof(double)), "deform_conv: taps")),
                      "deform_conv's tap positions");
  std::vector<double> base(static_cast<size_t>(baseSize));
  for(int64_t a = 0; a < kh; ++a)
    for(int64_t c = 0; c < kw; ++c)
      for(int64_t i = 0; i < oh; ++i)
        for(int64_t j = 0; j < ow; ++j) {
          size_t at = size_t((((a * kw + c) * oh + i) * ow + j) * 2);
          // In double: no integer arithmetic on the file's strides and pads.
          base[at] = double(j) * double(st[1]) - double(pd[1]) + double(c) * double(dl[1]);
          base[at + 1] = double(i) * double(st[0]) - double(pd[0]) + double(a) * double(dl[0]);
        }
  Expr baseC = g.constant(Shape{1, K, oh, ow, 2}, inits::fromVector(base), t);
  Expr scale = g.constant(Shape{2}, inits::fromVector(std::vector<double>{2.0 / double(Wd), 2.0 / double(H)}), t);
  Expr shift = g.constant(Shape{2}, inits::fromVector(std::vector<double>{1.0 / double(Wd) - 1, 1.0 / double(H) - 1}), t);
  // offset [N, OG, K, 2 (dy, dx), oh, ow] -> [N, OG, K, oh, ow, 2 (dx, dy)]
  Expr off = transpose(reshape(offset, std::vector<int64_t>{N, OG, K, 2, oh, ow}), {0, 1, 2, 4, 5, 3});
  off = gather(off, 5, g.indices(std::vector<int64_t>{1, 0}));
  GridSampleOptions so;  // linear, zeros, align_corners false
  std::vector<Expr> cols;
  const int64_t Cg = C / OG;
  for(int64_t q = 0; q < OG; ++q) {
    Expr oq = reshape(slice(off, 1, q, q + 1), std::vector<int64_t>{N, K, oh, ow, 2});
    Expr grid = reshape((oq + baseC) * scale + shift, std::vector<int64_t>{N, K * oh, ow, 2});
    Expr xq = OG == 1 ? x : slice(x, 1, q * Cg, (q + 1) * Cg);
    Expr s = reshape(grid_sample(xq, grid, so), std::vector<int64_t>{N, Cg, K, P});
    if(mask) s = s * reshape(slice(mask, 1, q * K, (q + 1) * K), std::vector<int64_t>{N, 1, K, P});
    cols.push_back(s);
  }
  Expr col = cols.size() == 1 ? cols[0] : concat(cols, 1);                  // [N, C, K, P]
  col = reshape(col, std::vector<int64_t>{N, G, (C / G) * K, P});
  Expr w = reshape(W, std::vector<int64_t>{G, M / G, (C / G) * K});
  Expr y = reshape(matmul(w, col), std::vector<int64_t>{N, M, oh, ow});  // [N, G, M/G, P]
  if(b) {
    ONYX_CHECK(b->shape() == Shape({M}), "deform_conv: b of shape ", b->shape(), " must be [", M, "]");
    y = y + reshape(b, std::vector<int64_t>{1, M, 1, 1});
  }
  return y;
}

// ================================================================= roi_align

namespace {

struct RoiSample {
  int64_t pos[4];
  double w[4];
};

struct RoiPlan {
  int64_t batch = 0, perBin = 0, count = 1;
  std::vector<RoiSample> s;  // [ph][pw][iy][ix]
};

struct RoiCfg {
  bool max = false, halfPixel = true;
  int64_t PH = 1, PW = 1, ratio = 0;
  double scale = 1;
  int64_t N = 0, C = 0, H = 0, W = 0;
};

RoiCfg roiCfg(const Attrs& at, const Shape& xs) {
  RoiCfg c;
  c.max = at.s("mode") == "max";
  c.halfPixel = at.s("coordinate_transformation_mode") == "half_pixel";
  c.PH = at.i("output_height");
  c.PW = at.i("output_width");
  c.ratio = at.i("sampling_ratio");
  c.scale = at.f("spatial_scale");
  c.N = xs[0];
  c.C = xs[1];
  c.H = xs[2];
  c.W = xs[3];
  return c;
}

// The bilinear samples of one roi (x1, y1, x2, y2).
RoiPlan roiPlan(const RoiCfg& c, const double* roi, int64_t batch) {
  RoiPlan p;
  p.batch = batch;
  const double off = c.halfPixel ? 0.5 : 0.0;
  const double sw = roi[0] * c.scale - off, sh = roi[1] * c.scale - off;
  const double ew = roi[2] * c.scale - off, eh = roi[3] * c.scale - off;
  double rw = ew - sw, rh = eh - sh;
  if(!c.halfPixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  const double bh = rh / double(c.PH), bw = rw / double(c.PW);
  auto gridOf = [&](double bin) {
    double v = c.ratio > 0 ? double(c.ratio) : std::ceil(bin);
    return static_cast<int64_t>(std::min(1e6, std::max(0.0, v)));
  };
  const int64_t gh = gridOf(bh), gw = gridOf(bw);
  p.perBin = gh * gw;  // each at most 1e6
  p.count = std::max<int64_t>(p.perBin, 1);
  // The plan holds every sample of the ROI: bounded (a sampling_ratio of
  // INT64_MAX asked for 10^12 per bin), a one-line error instead of an OOM.
  int64_t samples = 0;
  ONYX_CHECK(!__builtin_mul_overflow(c.PH * c.PW, p.perBin, &samples) && samples <= (int64_t(1) << 26),
             "roi_align: ", c.PH, "x", c.PW, " bins of ", gh, "x", gw, " samples each: more than 2^26 samples per ROI ",
             "(lower sampling_ratio)");
  p.s.resize(size_t(samples));
  size_t k = 0;
  for(int64_t ph = 0; ph < c.PH; ++ph)
    for(int64_t pw = 0; pw < c.PW; ++pw)
      for(int64_t iy = 0; iy < gh; ++iy)
        for(int64_t ix = 0; ix < gw; ++ix) {
          RoiSample& s = p.s[k++];
          double y = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
          double x = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
          if(!(y >= -1.0 && y <= double(c.H) && x >= -1.0 && x <= double(c.W))) {
            for(int j = 0; j < 4; ++j) {
              s.pos[j] = 0;
              s.w[j] = 0;
            }
            continue;
          }
          y = std::max(y, 0.0);
          x = std::max(x, 0.0);
          int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
          if(yl >= c.H - 1) {
            yh = yl = c.H - 1;
            y = double(yl);
          } else {
            yh = yl + 1;
          }
          if(xl >= c.W - 1) {
            xh = xl = c.W - 1;
            x = double(xl);
          } else {
            xh = xl + 1;
          }
          const double ly = y - double(yl), lx = x - double(xl), hy = 1 - ly, hx = 1 - lx;
          s.pos[0] = yl * c.W + xl;
          s.pos[1] = yl * c.W + xh;
          s.pos[2] = yh * c.W + xl;
          s.pos[3] = yh * c.W + xh;
          s.w[0] = hy * hx;
          s.w[1] = hy * lx;
          s.w[2] = ly * hx;
          s.w[3] = ly * lx;
        }
  return p;
}

// Plans of every roi; batch indices are checked here (one thread).
template <class T>
std::vector<RoiPlan> roiPlans(const RoiCfg& c, const TensorBase& rois, const TensorBase& bi) {
  const int64_t R = rois.shape()[0];
  const T* rp = rois.data<T>();
  std::vector<RoiPlan> plans;
  plans.reserve(size_t(R));
  for(int64_t i = 0; i < R; ++i) {
    double b = bi.getAsDouble(i);
    if(!(b >= 0 && b < double(c.N)))
      fail("roi_align: batch index ", b, " of roi ", i, " is out of range for x with batch size ", c.N);
    double roi[4];
    for(int j = 0; j < 4; ++j) roi[j] = double(host::load(rp, i * 4 + j));
    plans.push_back(roiPlan(c, roi, static_cast<int64_t>(b)));
  }
  return plans;
}

// The value of one bin; for max, also the winning (sample, corner) (-1: none).
template <class T>
double roiBin(const RoiCfg& c, const RoiPlan& p, int64_t bin, const T* xp, int64_t& win) {
  const RoiSample* s = p.s.data() + bin * p.perBin;
  win = -1;
  if(!c.max) {
    double acc = 0;
    for(int64_t k = 0; k < p.perBin; ++k)
      for(int j = 0; j < 4; ++j) acc += s[k].w[j] * double(host::load(xp, s[k].pos[j]));
    return acc / double(p.count);
  }
  double best = 0;
  for(int64_t k = 0; k < p.perBin; ++k)
    for(int j = 0; j < 4; ++j) {
      double v = s[k].w[j] * double(host::load(xp, s[k].pos[j]));
      if(win < 0 || v > best) {
        best = v;
        win = k * 4 + j;
      }
    }
  return best;
}

template <class T>
void roiForward(const RoiCfg& c, const TensorBase& xt, const TensorBase& rois, const TensorBase& bi, TensorBase& yt) {
  std::vector<RoiPlan> plans = roiPlans<T>(c, rois, bi);
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t R = int64_t(plans.size()), bins = c.PH * c.PW;
  host::parallelFor(R * c.C, R * c.C * bins * 4, [&](int64_t b, int64_t e) {
    for(int64_t rc = b; rc < e; ++rc) {
      const RoiPlan& p = plans[size_t(rc / c.C)];
      const T* xp = x + (p.batch * c.C + rc % c.C) * c.H * c.W;
      for(int64_t bin = 0; bin < bins; ++bin) {
        int64_t win;
        host::store(y, rc * bins + bin, roiBin(c, p, bin, xp, win));
      }
    }
  });
}

// dx (like x) from dy [R, C, PH, PW]; parallel over channels, so rois
// sharing a batch entry never write the same plane at once.
template <class T>
void roiGradX(const RoiCfg& c, const TensorBase& xt, const TensorBase& rois, const TensorBase& bi,
              const TensorBase& dyt, TensorBase& dxt) {
  std::vector<RoiPlan> plans = roiPlans<T>(c, rois, bi);
  const T* x = xt.data<T>();
  const T* dy = dyt.data<T>();
  T* dx = dxt.data<T>();
  const int64_t R = int64_t(plans.size()), bins = c.PH * c.PW, plane = c.H * c.W;
  host::parallelFor(c.C, c.N * c.C * plane + R * c.C * bins * 4, [&](int64_t b, int64_t e) {
    std::vector<double> acc(size_t(c.N * plane));
    for(int64_t ch = b; ch < e; ++ch) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for(int64_t r = 0; r < R; ++r) {
        const RoiPlan& p = plans[size_t(r)];
        const T* xp = x + (p.batch * c.C + ch) * plane;
        double* ap = acc.data() + p.batch * plane;
        for(int64_t bin = 0; bin < bins; ++bin) {
          const double d = double(host::load(dy, (r * c.C + ch) * bins + bin));
          const RoiSample* s = p.s.data() + bin * p.perBin;
          if(!c.max) {
            const double f = d / double(p.count);
            for(int64_t k = 0; k < p.perBin; ++k)
              for(int j = 0; j < 4; ++j) ap[s[k].pos[j]] += f * s[k].w[j];
            continue;
          }
          int64_t win;
          roiBin(c, p, bin, xp, win);
          if(win >= 0) ap[s[win / 4].pos[win % 4]] += d * s[win / 4].w[win % 4];
        }
      }
      for(int64_t n = 0; n < c.N; ++n)
        for(int64_t i = 0; i < plane; ++i)
          host::store(dx, (n * c.C + ch) * plane + i, acc[size_t(n * plane + i)]);
    }
  });
}

void checkRoi(InferCtx& c, const Shape& xs) {
  c.requireFloat(0);
  c.check(c.typeOf(1) == c.typeOf(0), "rois have element type ", c.typeOf(1), " but x has ", c.typeOf(0));
  c.check(c.typeOf(2) == Type::int32 || c.typeOf(2) == Type::int64, "batch_indices have element type ", c.typeOf(2),
          "; they must be int32 or int64");
  c.check(xs.rank() == 4, "x must be [N, C, H, W], got ", xs);
  const Shape& rs = c.shapeOf(1);
  c.check(rs.rank() == 2 && rs[1] == 4, "rois must be [num_rois, 4], got ", rs);
  c.check(c.shapeOf(2) == Shape{rs[0]}, "batch_indices of shape ", c.shapeOf(2), " must be [", rs[0], "]");
  const std::string& m = c.attrs.s("mode");
  c.check(m == "avg" || m == "max", "mode '", m, "' is not avg or max");
  const std::string& t = c.attrs.s("coordinate_transformation_mode");
  c.check(t == "half_pixel" || t == "output_half_pixel", "coordinate_transformation_mode '", t,
          "' is not half_pixel or output_half_pixel");
  c.check(c.attrs.i("output_height") >= 1 && c.attrs.i("output_width") >= 1, "output_height and output_width must be "
          ">= 1, got ", c.attrs.i("output_height"), " and ", c.attrs.i("output_width"));
  c.check(c.attrs.i("sampling_ratio") >= 0, "sampling_ratio must be >= 0, got ", c.attrs.i("sampling_ratio"));
  c.check(xs[2] >= 1 && xs[3] >= 1, "x of shape ", xs, " has an empty spatial dim");
}

const char* kRoiAttrNames[] = {"mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
                               "coordinate_transformation_mode"};

AttrList roiAttrs(const Attrs& a) {
  AttrList l;
  for(const char* n : kRoiAttrNames) l.emplace_back(n, a[n]);
  return l;
}

// RoiAlign-10 computes output_half_pixel coordinates; 16 adds
// coordinate_transformation_mode; bfloat16 from 22 (before, in double).
// batch_indices are int64 in ONNX.
void exportRoiAlign(OnnxExportCtx& c) {
  const int opset = c.opset();
  const Attrs a = c.attrs();
  const std::string& ctm = a.s("coordinate_transformation_mode");
  const double scale = a.f("spatial_scale");
  c.check(double(float(scale)) == scale, "spatial_scale ", scale,
          " is not a float32 value, which ONNX's attribute is (it would come back changed)");
  OnnxAttrs at{{"mode", a["mode"]},
               {"output_height", a["output_height"]},
               {"output_width", a["output_width"]},
               {"sampling_ratio", a["sampling_ratio"]},
               {"spatial_scale", a["spatial_scale"]}};
  if(opset >= 16) at.emplace_back("coordinate_transformation_mode", ctm);
  else
    if(ctm != "output_half_pixel") c.requireOpset(16, str("RoiAlign's coordinate_transformation_mode '", ctm, "'"));
  std::vector<std::string> ins = c.inputs();
  if(c.inputType(2) != Type::int64) {
    std::string b = c.fresh("batch_indices_int64");
    c.emit("Cast", {ins[2]}, {b}, {{"to", int64_t(Type::int64)}});
    ins[2] = b;
  }
  Type via = c.inputType(0) == Type::bfloat16 && opset < 22 ? Type::float64 : Type::undefined;
  emitBridged(c, "RoiAlign", ins, {0, 1}, via, at);
}

}  // namespace

ONYX_OP(kRoiAlign, "roi_align");
ONYX_OP(kRoiAlignGrad, "roi_align_grad");

// y[r, c, i, j] = mean (or max) over bin (i, j) of roi r of bilinear samples of x[batch[r], c]
[[maybe_unused]] static OpDef& kRoiAlignDef = kRoiAlign
    .doc("y[r, c, i, j] = average (or max) of bilinear samples of x[batch_indices[r], c] on a regular grid in bin "
         "(i, j) of roi r = (x1, y1, x2, y2) * spatial_scale; x [N, C, H, W], rois [R, 4], y [R, C, oh, ow]")
    .inputs(3)
    .attr("mode", std::string("avg"))
    .attr("output_height", int64_t(1))
    .attr("output_width", int64_t(1))
    .attr("sampling_ratio", int64_t(0))
    .attr("spatial_scale", 1.0)
    .attr("coordinate_transformation_mode", std::string("half_pixel"))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      checkRoi(c, xs);
      c.shape = Shape{c.shapeOf(1)[0], xs[1], c.attrs.i("output_height"), c.attrs.i("output_width")};
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      RoiCfg cfg = roiCfg(c.attrs, c.in[0]->shape());
      dispatchFloat(c.out.type(), "roi_align", [&](auto tag) {
        roiForward<typename decltype(tag)::type>(cfg, *c.in[0], *c.in[1], *c.in[2], c.out);
      });
    })
    .gpuOnHost("no GPU form yet: it waits for GPU interpolation kernels")
    // dx scatters dy back onto the samples (to the winners for max). The rois
    // get no gradient: they are treated as constants (as torchvision does).
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, g.graph.make(kRoiAlignGrad, {g.x(0), g.x(1), g.x(2), g.dy}, roiAttrs(g.attrs)));
    })
    // RoiAlign-10 has no coordinate_transformation_mode and behaves as
    // output_half_pixel; 16 adds it (default half_pixel); 22 adds types.
    .onnx("RoiAlign", 10)
    .importer([](OnnxImportCtx& c) {
      RoiAlignOptions o;
      o.mode = c.attrString("mode", "avg");
      o.outputHeight = c.attrInt("output_height", 1);
      o.outputWidth = c.attrInt("output_width", 1);
      o.samplingRatio = c.attrInt("sampling_ratio", 0);
      o.spatialScale = c.attrFloat("spatial_scale", 1.0);
      o.coordinateTransformationMode =
          c.opset() >= 16 ? c.attrString("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
      Expr x = c.input(0), rois = c.input(1);
      if(rois->value_type() != x->value_type()) rois = cast(rois, x->value_type());
      c.setOutput(0, roi_align(x, rois, c.input(2), o));
    })
    .exporter(exportRoiAlign);

// dx[n, c, h, w] = sum over the bins of the rois on batch entry n of dy * sample weight
[[maybe_unused]] static OpDef& kRoiAlignGradDef = kRoiAlignGrad
    .doc("dx = roi_align's gradient w.r.t. x: dy[r, c, i, j] spread back over the bilinear samples of bin (i, j) "
         "(divided by the sample count for avg, to the winning sample corner for max); inputs x, rois, "
         "batch_indices, dy")
    .inputs(4)
    .attr("mode", std::string("avg"))
    .attr("output_height", int64_t(1))
    .attr("output_width", int64_t(1))
    .attr("sampling_ratio", int64_t(0))
    .attr("spatial_scale", 1.0)
    .attr("coordinate_transformation_mode", std::string("half_pixel"))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      checkRoi(c, xs);
      Shape ys{c.shapeOf(1)[0], xs[1], c.attrs.i("output_height"), c.attrs.i("output_width")};
      c.check(c.shapeOf(3) == ys && c.typeOf(3) == c.typeOf(0), "dy of shape ", c.shapeOf(3), " ", c.typeOf(3),
              " does not match roi_align's output ", ys, " ", c.typeOf(0));
      c.shape = xs;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      RoiCfg cfg = roiCfg(c.attrs, c.in[0]->shape());
      dispatchFloat(c.out.type(), "roi_align_grad", [&](auto tag) {
        roiGradX<typename decltype(tag)::type>(cfg, *c.in[0], *c.in[1], *c.in[2], *c.in[3], c.out);
      });
    })
    .gpuOnHost("no GPU form yet: it waits for GPU interpolation kernels")
    .notDifferentiable("second derivatives of roi_align are not implemented")
    .noOnnx("internal: gradient of roi_align");

Expr roi_align(Expr x, Expr rois, Expr batchIndices, const RoiAlignOptions& o) {
  return x->graph()->make(kRoiAlign, {x, rois, batchIndices},
                          {{"mode", attr(o.mode)},
                           {"output_height", attr(o.outputHeight)},
                           {"output_width", attr(o.outputWidth)},
                           {"sampling_ratio", attr(o.samplingRatio)},
                           {"spatial_scale", attr(o.spatialScale)},
                           {"coordinate_transformation_mode", attr(o.coordinateTransformationMode)}});
}

// ======================================================= non_max_suppression

Expr non_max_suppression(ExpressionGraph& graph, const Tensor& boxes, const Tensor& scores, int64_t maxPerClass,
                         double iouThreshold, double scoreThreshold, bool hasScoreThreshold, bool centerPointBox) {
  const Shape& bs = boxes->shape();
  const Shape& ss = scores->shape();
  ONYX_CHECK(bs.rank() == 3 && bs[2] == 4, "non_max_suppression: boxes must be [batches, boxes, 4], got ", bs);
  ONYX_CHECK(ss.rank() == 3 && ss[0] == bs[0] && ss[2] == bs[1], "non_max_suppression: scores of shape ", ss,
             " do not match boxes of shape ", bs, ": expected [", bs[0], ", classes, ", bs[1], "]");
  const int64_t B = bs[0], S = bs[1], C = ss[1];
  maxPerClass = std::max<int64_t>(maxPerClass, 0);
  // Box i of batch b as (x_min, y_min, x_max, y_max).
  std::vector<double> box(size_t(B * S * 4));
  for(int64_t i = 0; i < B * S; ++i) {
    double v[4];
    for(int j = 0; j < 4; ++j) v[j] = boxes->getAsDouble(i * 4 + j);
    double* o = &box[size_t(i * 4)];
    if(centerPointBox) {
      o[0] = v[0] - v[2] / 2;
      o[2] = v[0] + v[2] / 2;
      o[1] = v[1] - v[3] / 2;
      o[3] = v[1] + v[3] / 2;
    } else {
      o[0] = std::min(v[1], v[3]);
      o[2] = std::max(v[1], v[3]);
      o[1] = std::min(v[0], v[2]);
      o[3] = std::max(v[0], v[2]);
    }
  }
  auto suppresses = [&](const double* a, const double* b) {
    const double ix = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    const double iy = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if(ix <= 0 || iy <= 0) return false;
    const double inter = ix * iy;
    const double areaA = (a[2] - a[0]) * (a[3] - a[1]), areaB = (b[2] - b[0]) * (b[3] - b[1]);
    const double uni = areaA + areaB - inter;
    if(areaA <= 0 || areaB <= 0 || uni <= 0) return false;
    return inter / uni > iouThreshold;
  };
  std::vector<int64_t> out;
  std::vector<int64_t> order, kept;
  for(int64_t b = 0; b < B; ++b)
    for(int64_t c = 0; c < C; ++c) {
      const int64_t so = (b * C + c) * S;
      order.clear();
      for(int64_t i = 0; i < S; ++i)
        if(!hasScoreThreshold || scores->getAsDouble(so + i) > scoreThreshold) order.push_back(i);
      // Decreasing score; ties keep the lower box index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
        return scores->getAsDouble(so + i) > scores->getAsDouble(so + j);
      });
      kept.clear();
      for(int64_t i : order) {
        if(int64_t(kept.size()) >= maxPerClass) break;
        const double* bi = &box[size_t((b * S + i) * 4)];
        bool keep = true;
        for(int64_t k : kept)
          if(suppresses(bi, &box[size_t((b * S + k) * 4)])) {
            keep = false;
            break;
          }
        if(!keep) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  return graph.constant(Shape{int64_t(out.size() / 3), 3}, inits::fromVector(out), Type::int64);
}

Expr non_max_suppression(Expr boxes, Expr scores, int64_t maxPerClass, double iouThreshold, double scoreThreshold,
                         bool hasScoreThreshold, bool centerPointBox) {
  ExpressionGraph& g = *boxes->graph();
  return non_max_suppression(g, g.value(boxes), g.value(scores), maxPerClass, iouThreshold, scoreThreshold,
                             hasScoreThreshold, centerPointBox);
}

}  // namespace onyx
