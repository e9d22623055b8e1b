// Neural-network ops: softmax, log_softmax, layer_norm, cross_entropy and the
// dropout mask. Kernels are fused per row and numerically stable (the row max
// is subtracted before exp; variance is two-pass); sums accumulate in double.
// Backward rules are expressions, so they run on every device and can be
// differentiated again.
#include <onyx/ops/nn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <onyx/backend/cpu/vecmath.h>
#ifndef ONYX_GPU_PLUGIN
#include <onyx/backend/cpu/dnnl_conv.h>
#endif
#include <onyx/graph/node_initializers.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

// Checks `axis` against x's rank (x must have rank >= 1) and returns it in
// [0, rank).
int checkedAxis(InferCtx& c, const Shape& x, int64_t axis) {
  c.check(x.rank() >= 1, "needs an input of rank >= 1, got a scalar");
  return c.axis(axis, x.rank());
}

using ops::Lines;

// Softmax or log-softmax of every line along `axis`. A line along a
// non-trailing axis is strided; the common axis = -1 case is contiguous.
template <class T>
void softmaxLines(const TensorBase& xt, TensorBase& yt, int axis, bool logOut) {
  using C = typename ComputeOf<T>::type;
  Lines lines(xt.shape(), axis);
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t n = lines.n, st = lines.inner;
#ifndef ONYX_GPU_PLUGIN
  if constexpr(std::is_same<T, float>::value) {
    // float32 without NaN: oneDNN's softmax kernels (BERT-base's 12
    // attention softmaxes, 12 x 128 lines of 128 each: 7.0 -> 2.2 ms on one
    // core); NaN keeps the loops below, which give NaN for the whole line.
    // Another axis is moved last around the call, so that every axis gives
    // the bits the last axis gives (an exported opset-12 Softmax transposes
    // the axis last: the round trip must compute the same).
    int64_t bad = 0;
    const int64_t total = xt.size();
    for(int64_t i = 0; i < total; ++i) bad += int64_t(x[i] != x[i]);
    if(bad == 0) {
      if(st == 1) {
        if(host::dnnlSoftmax(logOut, x, y, lines.outer, n, 1)) return;
      } else {
        std::vector<float> moved(static_cast<size_t>(total));
        for(int64_t o = 0; o < lines.outer; ++o)
          for(int64_t j = 0; j < n; ++j)
            for(int64_t i = 0; i < st; ++i) moved[size_t((o * st + i) * n + j)] = x[(o * n + j) * st + i];
        if(host::dnnlSoftmax(logOut, moved.data(), moved.data(), lines.outer * st, n, 1)) {
          for(int64_t o = 0; o < lines.outer; ++o)
            for(int64_t j = 0; j < n; ++j)
              for(int64_t i = 0; i < st; ++i) y[(o * n + j) * st + i] = moved[size_t((o * st + i) * n + j)];
          return;
        }
      }
    }
  }
#endif
  host::parallelFor(lines.count(), xt.size(), [&](int64_t b, int64_t e) {
    std::vector<float> line;
    for(int64_t k = b; k < e; ++k) {
      const int64_t o = lines.start(k);
      if constexpr(std::is_same<T, float>::value) {
        if(!logOut) {
          // float: exp as one vector pass (vecmath), the sum in four
          // partials. A strided line is gathered into a contiguous one
          // first, so that every axis gives the bits the last axis gives
          // (an exported opset-12 Softmax transposes the axis last).
          const float* xl = x + o;
          float* yl = y + o;
          if(st != 1) {
            line.resize(static_cast<size_t>(n));
            for(int64_t j = 0; j < n; ++j) line[static_cast<size_t>(j)] = x[o + j * st];
            xl = yl = line.data();
          }
          float mf = -std::numeric_limits<float>::infinity();
          bool nan = false;
          for(int64_t j = 0; j < n; ++j) {
            mf = xl[j] > mf ? xl[j] : mf;
            nan |= xl[j] != xl[j];
          }
          if(!nan) {
            for(int64_t j = 0; j < n; ++j) yl[j] = xl[j] - mf;
            host::vec::exp(yl, yl, n);
            const float inv = static_cast<float>(1.0 / host::sumInFour(n, [yl](int64_t j) { return yl[j]; }));
            for(int64_t j = 0; j < n; ++j) yl[j] *= inv;
            if(st != 1)
              for(int64_t j = 0; j < n; ++j) y[o + j * st] = line[static_cast<size_t>(j)];
            continue;
          }
        }
      }
      C m = -std::numeric_limits<C>::infinity();
      for(int64_t j = 0; j < n; ++j) m = std::max(m, host::load(x, o + j * st));
      double s = 0;
      if(logOut) {
        for(int64_t j = 0; j < n; ++j) s += std::exp(host::load(x, o + j * st) - m);
        const C lse = m + static_cast<C>(std::log(s));
        for(int64_t j = 0; j < n; ++j) host::store(y, o + j * st, host::load(x, o + j * st) - lse);
      } else if constexpr(std::is_same<T, C>::value) {
        // Full-precision output: keep exp(x - m) in y instead of computing it twice.
        for(int64_t j = 0; j < n; ++j) {
          C v = std::exp(x[o + j * st] - m);
          y[o + j * st] = v;
          s += v;
        }
        const C inv = static_cast<C>(1.0 / s);
        for(int64_t j = 0; j < n; ++j) y[o + j * st] *= inv;
      } else {
        // float16/bfloat16: rounding exp(x - m) before the division would
        // cost precision, so it is recomputed in float.
        for(int64_t j = 0; j < n; ++j) s += std::exp(host::load(x, o + j * st) - m);
        const C inv = static_cast<C>(1.0 / s);
        for(int64_t j = 0; j < n; ++j) host::store(y, o + j * st, std::exp(host::load(x, o + j * st) - m) * inv);
      }
    }
  });
}

void inferSoftmax(InferCtx& c) {
  c.requireFloat(0);
  checkedAxis(c, c.shapeOf(0), c.attrs.i("axis"));
  infer::sameAsInput0(c);
}

// The CPU kernel here; the GPU's is in the CUDA plugin (backend/cuda/ops_nn.cpp).
KernelFn softmaxKernel(bool logOut) {
  return [logOut](KernelCtx& c) {
    int axis = c.in[0]->shape().axis(c.attrs.i("axis"));
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      softmaxLines<typename decltype(tag)::type>(*c.in[0], c.out, axis, logOut);
    });
  };
}

// ---- export helpers

// ONNX has no bfloat16 before opset 13 (not even in Cast).
void checkBf16Opset(OnnxExportCtx& c, Type t) {
  if(t == Type::bfloat16) c.requireOpset(13, "bfloat16 (ONNX has none before opset 13)");
}

// The permutation moving axis `from` of a rank-r tensor to position `to`
// (the others keep their order), and its inverse.
std::vector<int64_t> moveAxisPerm(int r, int from, int to) {
  std::vector<int64_t> p;
  for(int d = 0; d < r; ++d)
    if(d != from) p.push_back(d);
  p.insert(p.begin() + to, from);
  return p;
}
std::vector<int64_t> inversePerm(const std::vector<int64_t>& p) {
  std::vector<int64_t> q(p.size());
  for(size_t i = 0; i < p.size(); ++i) q[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return q;
}

// Softmax, LogSoftmax and Hardmax at opsets 1-12, which view the input as
// 2-D [d0*..*d(axis-1), d(axis)*..*d(n-1)] and normalise each row. That is
// this op when every dim after the axis is 1 (the old importer maps it back
// to this op); otherwise the axis is moved last by a Transpose, the op runs
// on the last axis and a second Transpose restores the order (the re-import
// computes the same lines in the same order, so the same bits).
void exportCoerced2d(OnnxExportCtx& c, const char* opType) {
  const Shape& s = c.inputShape(0);
  const int r = s.rank();
  const int axis = s.axis(c.attrs().i("axis"));
  bool trailingOnes = true;
  for(int d = axis + 1; d < r; ++d) trailingOnes = trailingOnes && s.dims()[d] == 1;
  checkBf16Opset(c, c.inputType(0));
  const std::string x = c.input(0), y = c.output();
  if(trailingOnes) {
    c.emit(opType, {x}, {y}, {{"axis", int64_t(axis)}});
  } else {
    std::vector<int64_t> perm = moveAxisPerm(r, axis, r - 1);
    std::string t = c.fresh("axis_last"), u = c.fresh("axis_last_out");
    c.emit("Transpose", {x}, {t}, {{"perm", attr(perm)}});
    c.emit(opType, {t}, {u}, {{"axis", int64_t(r - 1)}});
    c.emit("Transpose", {u}, {y}, {{"perm", attr(inversePerm(perm))}});
  }
}

}  // namespace

// ------------------------------------------------------------------ softmax

// y = exp(x - max) / sum(exp(x - max)) along `axis`
ONYX_OP(kSoftmax, "softmax")
    .doc("y = exp(x) / sum(exp(x)) along axis (stable: the max is subtracted first)")
    .inputs(1)
    .attr("axis", int64_t(-1))
    .infer(inferSoftmax)
    .cpu(softmaxKernel(false))
    // dx = y * (dy - sum(dy * y, axis)): one softmax_grad pass (was four
    // nodes: mul, sum, sub, mul).
    .backward([](GradCtx& g) { g.add(0, softmax_grad(g.dy, g.y(), static_cast<int>(g.attrs.i("axis")))); })
    // Opset 13 changed Softmax from "flatten to 2-D at axis" to "along one
    // axis", which is this op; older opsets differ for rank > 2.
    .onnx("Softmax", 13)
    .onnxExport(1, [](OnnxExportCtx& c) { exportCoerced2d(c, "Softmax"); }, 12);

Expr softmax(Expr x, int axis) { return x->graph()->make(kSoftmax, {x}, {{"axis", attr(axis)}}); }

// dx = y * (dy - sum(dy * y, axis)), the sum in double per line
template <class T>
void softmaxGradLines(const TensorBase& dyt, const TensorBase& yt, TensorBase& out, int axis) {
  using C = typename ComputeOf<T>::type;
  const ops::Lines L(yt.shape(), axis);
  const T *dy = dyt.data<T>(), *y = yt.data<T>();
  T* dx = out.data<T>();
  const int64_t n = L.n, st = L.inner;
  host::parallelFor(L.count(), 3 * yt.size(), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const int64_t o = L.start(r);
      const T *dyr = dy + o, *yr = y + o;
      T* dxr = dx + o;
      const C sc = static_cast<C>(
          host::sumInFour(n, [=](int64_t j) { return C(host::load(dyr, j * st)) * C(host::load(yr, j * st)); }));
      for(int64_t j = 0; j < n; ++j)
        host::store(dxr, j * st, C(host::load(yr, j * st)) * (C(host::load(dyr, j * st)) - sc));
    }
  });
}

ONYX_OP(kSoftmaxGrad, "softmax_grad")
    .doc("dx = y * (dy - sum(dy * y, axis)): the gradient of softmax given its output y, one pass per line")
    .inputs(2)
    .attr("axis", int64_t(-1))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      c.requireFloat(1);
      c.type = c.commonType();
      c.check(c.shapeOf(0) == c.shapeOf(1), "dy of shape ", c.shapeOf(0), " and y of shape ", c.shapeOf(1),
              " must have one shape");
      checkedAxis(c, c.shapeOf(1), c.attrs.i("axis"));
      c.shape = c.shapeOf(1);
    })
    .cpu([](KernelCtx& c) {
      const int axis = c.in[1]->shape().axis(c.attrs.i("axis"));
      dispatchFloat(c.out.type(), "softmax_grad", [&](auto tag) {
        softmaxGradLines<typename decltype(tag)::type>(*c.in[0], *c.in[1], c.out, axis);
      });
    })
    // With s = sum(dy y) and upstream g: d/d(dy) = y (g - sum(g y)), which is
    // softmax_grad(g, y); d/dy = g (dy - s) - dy sum(g y).
    .backward([](GradCtx& g) {
      const int axis = static_cast<int>(g.attrs.i("axis"));
      Expr dy = g.x(0), y = g.x(1);
      if(g.needs(0)) g.add(0, softmax_grad(g.dy, y, axis));
      if(g.needs(1)) {
        std::vector<int> ax{axis};
        g.add(1, g.dy * (dy - sum(dy * y, ax, true)) - dy * sum(g.dy * y, ax, true));
      }
    })
    .noOnnx("internal: the gradient of softmax");

Expr softmax_grad(Expr dy, Expr y, int axis) {
  return y->graph()->make(kSoftmaxGrad, {dy, y}, {{"axis", attr(axis)}});
}

// y = x - max - log(sum(exp(x - max))) along `axis`
ONYX_OP(kLogSoftmax, "log_softmax")
    .doc("y = x - log(sum(exp(x))) along axis (stable: the max is subtracted first)")
    .inputs(1)
    .attr("axis", int64_t(-1))
    .infer(inferSoftmax)
    .cpu(softmaxKernel(true))
    // dx = dy - softmax(x) * sum(dy, axis), with softmax(x) = exp(y)
    .backward([](GradCtx& g) {
      int axis = static_cast<int>(g.attrs.i("axis"));
      g.add(0, g.dy - exp(g.y()) * sum(g.dy, std::vector<int>{axis}, true));
    })
    .onnx("LogSoftmax", 13)  // same opset-13 semantics change as Softmax
    .onnxExport(1, [](OnnxExportCtx& c) { exportCoerced2d(c, "LogSoftmax"); }, 12);

Expr log_softmax(Expr x, int axis) { return x->graph()->make(kLogSoftmax, {x}, {{"axis", attr(axis)}}); }

// ------------------------------------------------------------------ hardmax

namespace {

// 1 at the first maximum of every line along `axis`, 0 elsewhere.
template <class T>
void hardmaxLines(const TensorBase& xt, TensorBase& yt, int axis) {
  using C = typename ComputeOf<T>::type;
  Lines lines(xt.shape(), axis);
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t n = lines.n, st = lines.inner;
  host::parallelFor(lines.count(), xt.size(), [&](int64_t b, int64_t e) {
    for(int64_t k = b; k < e; ++k) {
      const int64_t o = lines.start(k);
      int64_t best = 0;
      C m = host::load(x, o);
      for(int64_t j = 1; j < n; ++j) {
        C v = host::load(x, o + j * st);
        if(v > m) {
          m = v;
          best = j;
        }
      }
      for(int64_t j = 0; j < n; ++j) host::store(y, o + j * st, C(j == best ? 1 : 0));
    }
  });
}

}  // namespace

// y = onehot(argmax(x, axis)) (the first maximum wins ties)
ONYX_OP(kHardmax, "hardmax")
    .doc("y = 1 at the first maximum of x along axis, 0 elsewhere")
    .inputs(1)
    .attr("axis", int64_t(-1))
    .infer(inferSoftmax)
    .cpu([](KernelCtx& c) {
      int axis = c.in[0]->shape().axis(c.attrs.i("axis"));
      dispatchFloat(c.out.type(), "hardmax", [&](auto tag) {
        hardmaxLines<typename decltype(tag)::type>(*c.in[0], c.out, axis);
      });
    })
    .notDifferentiable("piecewise constant: the gradient is zero almost everywhere")
    .onnx("Hardmax", 13)
    .onnxExport(1, [](OnnxExportCtx& c) { exportCoerced2d(c, "Hardmax"); }, 12);

Expr hardmax(Expr x, int axis) { return x->graph()->make(kHardmax, {x}, {{"axis", attr(axis)}}); }

// --------------------------------------------------------------- layer_norm

namespace {

// Dims of x from `axis` to the end: the normalised block of each row.
Shape::Dims trailingDims(const Shape& x, int axis) {
  return Shape::Dims(x.dims().begin() + axis, x.dims().end());
}

// p (gamma or beta, right-aligned, broadcasting) expanded to the n values of
// one normalised block.
template <class T, class C>
std::vector<C> expandToBlock(const TensorBase& p, const Shape::Dims& block, int64_t n) {
  std::vector<C> out(static_cast<size_t>(n));
  const T* pd = p.data<T>();
  const Shape& ps = p.shape();
  const auto pst = ps.strides();
  const int br = static_cast<int>(block.size()), off = br - ps.rank();
  for(int64_t j = 0; j < n; ++j) {
    int64_t rem = j, idx = 0;
    for(int k = br - 1; k >= 0; --k) {
      int64_t i = rem % block[k];
      rem /= block[k];
      if(k >= off && ps.dims()[k - off] != 1) idx += i * pst[k - off];
    }
    out[static_cast<size_t>(j)] = host::load(pd, idx);
  }
  return out;
}

}  // namespace

// Rounded to float32, the type of ONNX's epsilon attribute, so that an
// exported and re-imported layer_norm computes the same bits.
double ops::layerNormEps(const Attrs& a) { return static_cast<double>(static_cast<float>(a.f("epsilon"))); }

namespace {

using ops::layerNormEps;

template <class T>
void layerNormRows(KernelCtx& c) {
  using C = typename ComputeOf<T>::type;
  const TensorBase& xt = *c.in[0];
  const int axis = xt.shape().axis(c.attrs.i("axis"));
  const double eps = layerNormEps(c.attrs);
  const Shape::Dims block = trailingDims(xt.shape(), axis);
  int64_t n = 1;
  for(auto d : block) n *= d;
  if(n == 0) return;
  const int64_t rows = xt.size() / n;
  const std::vector<C> gamma = expandToBlock<T, C>(*c.in[1], block, n);
  const std::vector<C> beta = expandToBlock<T, C>(*c.in[2], block, n);
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  host::parallelFor(rows, xt.size(), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      // Four partial sums each (host::sumInFour): one chain of dependent
      // double adds was the bound of the whole kernel.
      const double mean = host::sumInFour(n, [xr](int64_t j) { return host::load(xr, j); }) / double(n);
      const double v = host::sumInFour(n, [xr, mean](int64_t j) {
        double d = host::load(xr, j) - mean;
        return d * d;
      });
      const C rstd = static_cast<C>(1.0 / std::sqrt(v / double(n) + eps));
      const C mu = static_cast<C>(mean);
      for(int64_t j = 0; j < n; ++j) {
        size_t jj = static_cast<size_t>(j);
        host::store(yr, j, (host::load(xr, j) - mu) * rstd * gamma[jj] + beta[jj]);
      }
    }
  });
}

// Whether p (gamma or beta, right-aligned) broadcasts to the normalised
// block: each of its dims the block's or 1.
bool broadcastsToBlock(const Shape& p, const Shape::Dims& block) {
  const int br = static_cast<int>(block.size());
  if(p.rank() > br) return false;
  for(int k = 0; k < p.rank(); ++k) {
    const int64_t d = p.dims()[k], want = block[static_cast<size_t>(br - p.rank() + k)];
    if(d != want && d != 1) return false;
  }
  return true;
}

// The mean and 1/sqrt(var + eps) of one row of n values in T's compute
// type, as layerNormRows has them (its xhat is (x - mu) * rstd).
template <class T, class C>
void rowStats(const T* xr, int64_t n, double eps, C& mu, C& rstd) {
  const double mean = host::sumInFour(n, [xr](int64_t j) { return host::load(xr, j); }) / double(n);
  const double v = host::sumInFour(n, [xr, mean](int64_t j) {
    double d = host::load(xr, j) - mean;
    return d * d;
  });
  rstd = static_cast<C>(1.0 / std::sqrt(v / double(n) + eps));
  mu = static_cast<C>(mean);
}

// The rows of x (input 1 of layer_norm's gradient ops, whose attributes
// these are): the normalised block from axis on, its size n, the count.
struct NormRows {
  Shape::Dims block;
  int64_t n = 1, rows = 0;
  double eps;
  explicit NormRows(KernelCtx& c)
      : block(trailingDims(c.in[1]->shape(), c.in[1]->shape().axis(c.attrs.i("axis")))), eps(layerNormEps(c.attrs)) {
    for(auto d : block) n *= d;
    rows = n > 0 ? c.in[1]->size() / n : 0;
  }
};

// layer_norm_grad: per row, dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat
// xhat)) with dxhat = dy gamma; the two means are double sums.
template <class T>
void layerNormGradRows(KernelCtx& c) {
  using C = typename ComputeOf<T>::type;
  const TensorBase &dyt = *c.in[0], &xt = *c.in[1];
  const NormRows L(c);
  const int64_t n = L.n, rows = L.rows;
  const double eps = L.eps;
  if(n == 0) return;
  const std::vector<C> gamma = expandToBlock<T, C>(*c.in[2], L.block, n);
  const T *dy = dyt.data<T>(), *x = xt.data<T>();
  T* dx = c.out.data<T>();
  host::parallelFor(rows, 3 * xt.size(), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const T *xr = x + r * n, *dyr = dy + r * n;
      T* dxr = dx + r * n;
      C mu, rstd;
      rowStats(xr, n, eps, mu, rstd);
      const C* g = gamma.data();
      const double a = host::sumInFour(n, [=](int64_t j) { return C(host::load(dyr, j)) * g[j]; });
      const double bs = host::sumInFour(n, [=](int64_t j) {
        return (C(host::load(dyr, j)) * g[j]) * ((C(host::load(xr, j)) - mu) * rstd);
      });
      const C ma = static_cast<C>(a / double(n)), mb = static_cast<C>(bs / double(n));
      for(int64_t j = 0; j < n; ++j) {
        const C xhat = (C(host::load(xr, j)) - mu) * rstd;
        host::store(dxr, j, rstd * (C(host::load(dyr, j)) * g[j] - ma - xhat * mb));
      }
    }
  });
}

// layer_norm_param_grad: out[0, j] = sum over rows of dy xhat, out[1, j] =
// sum of dy, in double. The rows split into a number of blocks fixed by the
// shape (not by the threads), each summed in row order, the blocks then in
// order: the same bits on any thread count.
template <class T>
void layerNormParamGradRows(KernelCtx& c) {
  using C = typename ComputeOf<T>::type;
  const TensorBase &dyt = *c.in[0], &xt = *c.in[1];
  const NormRows L(c);
  const int64_t n = L.n, rows = L.rows;
  const double eps = L.eps;
  T* out = c.out.data<T>();
  if(n == 0) return;
  const int64_t blocks = std::min<int64_t>(rows, 64);
  std::vector<double> part(static_cast<size_t>(std::max<int64_t>(blocks, 1) * 2 * n), 0.0);
  const T *dy = dyt.data<T>(), *x = xt.data<T>();
  host::parallelFor(blocks, 2 * xt.size(), [&](int64_t b, int64_t e) {
    for(int64_t k = b; k < e; ++k) {
      double* s = part.data() + k * 2 * n;
      for(int64_t r = k * rows / blocks, r1 = (k + 1) * rows / blocks; r < r1; ++r) {
        const T *xr = x + r * n, *dyr = dy + r * n;
        C mu, rstd;
        rowStats(xr, n, eps, mu, rstd);
        for(int64_t j = 0; j < n; ++j) {
          const C d = C(host::load(dyr, j));
          s[j] += double(d * ((C(host::load(xr, j)) - mu) * rstd));
          s[n + j] += double(d);
        }
      }
    }
  });
  for(int64_t j = 0; j < 2 * n; ++j) {
    double t = 0;
    for(int64_t k = 0; k < blocks; ++k) t += part[static_cast<size_t>(k * 2 * n + j)];
    host::store(out, j, t);
  }
}

}  // namespace

// y = (x - mean) / sqrt(var + epsilon) * gamma + beta, mean/var over dims axis..end
ONYX_OP(kLayerNorm, "layer_norm")
    .doc("y = (x - mean) / sqrt(var + epsilon) * gamma + beta, mean and var over the dims from axis to the end "
         "(epsilon used as a float32 value, as in ONNX)")
    .inputs(3)
    .attr("axis", int64_t(-1))
    .attr("epsilon", 1e-5)
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      c.type = c.commonType();
      const Shape& xs = c.shapeOf(0);
      int axis = checkedAxis(c, xs, c.attrs.i("axis"));
      Shape block(trailingDims(xs, axis));
      const char* names[] = {"x", "gamma", "beta"};
      for(size_t i = 1; i < 3; ++i)
        c.check(broadcastsToBlock(c.shapeOf(i), block.dims()), names[i], " of shape ", c.shapeOf(i),
                " does not broadcast to the normalised dims ", block, " (x's dims from axis ", axis, " on)");
      c.check(c.attrs.f("epsilon") >= 0, "epsilon must be >= 0, got ", c.attrs.f("epsilon"));
      c.shape = xs;
    })
    .cpu([](KernelCtx& c) {
      dispatchFloat(c.out.type(), "layer_norm", [&](auto tag) { layerNormRows<typename decltype(tag)::type>(c); });
    })
    // With xhat = (x - mean) * rstd over the normalised dims (N elements):
    //   dbeta = dy, dgamma = dy * xhat, summed over the rows (and the dims
    //   gamma broadcasts over: GradCtx::add),
    //   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * gamma,
    // as two fused ops (the expression was about twenty nodes).
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      const int axis = x->shape().axis(g.attrs.i("axis"));
      const double eps = g.attrs.f("epsilon");
      if(g.needs(0)) g.add(0, layer_norm_grad(g.dy, x, g.x(1), axis, eps));
      if(g.needs(1) || g.needs(2)) {
        Expr pg = layer_norm_param_grad(g.dy, x, axis, eps);
        Shape block(trailingDims(x->shape(), axis));
        if(g.needs(1)) g.add(1, reshape(slice(pg, 0, 0, 1), block));
        if(g.needs(2)) g.add(2, reshape(slice(pg, 0, 1, 2), block));
      }
    })
    // Same attribute names. B is optional in ONNX (zeros here); the optional
    // Mean and InvStdDev outputs are built from reductions (shape: x's with
    // the normalised dims set to 1). stash_type only names the precision of
    // the statistics, which the kernel keeps in double anyway.
    .onnx("LayerNormalization", 17)
    .exporter([](OnnxExportCtx& c) {
      // axis as the import stores it (non-negative), stash_type left at its default
      c.emit("LayerNormalization", c.inputs(), {c.output()},
             {{"axis", int64_t(c.inputShape(0).axis(c.attrs().i("axis")))}, {"epsilon", c.attrs().f("epsilon")}});
    })
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0), scale = c.input(1);
      const int r = x->shape().rank();
      int64_t axis = c.attrInt("axis", -1);
      double eps = c.attrFloat("epsilon", 1e-5);
      int64_t stash = c.attrInt("stash_type", 1);
      c.check(stash == 1 || stash == 11 || stash == 10 || stash == 16, "stash_type ", stash,
              " is not a floating-point type");
      c.check(r >= 1 && axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
      if(axis < 0) axis += r;
      Expr bias = c.hasInput(2) ? c.input(2)
                                : c.graph().zeros(Shape(trailingDims(x->shape(), static_cast<int>(axis))), x->value_type());
      c.setOutput(0, layer_norm(x, scale, bias, static_cast<int>(axis), eps));
      if(c.numOutputs() > 1 && (c.wantsOutput(1) || (c.numOutputs() > 2 && c.wantsOutput(2)))) {
        std::vector<int> axes;
        for(int a = static_cast<int>(axis); a < r; ++a) axes.push_back(a);
        Expr mu = mean(x, axes, true);
        Expr xc = x - mu;
        Expr inv = 1.0 / sqrt(mean(xc * xc, axes, true) + eps);
        auto out = [&](size_t i, Expr e) {
          if(i >= c.numOutputs() || !c.wantsOutput(i)) return;
          Type t = c.declaredOutputType(i);
          c.setOutput(i, t != Type::undefined && t != e->value_type() ? cast(e, t) : e);
        };
        out(1, mu);
        out(2, inv);
      }
    });

Expr layer_norm(Expr x, Expr gamma, Expr beta, int axis, double eps) {
  return x->graph()->make(kLayerNorm, {x, gamma, beta}, {{"axis", attr(axis)}, {"epsilon", attr(eps)}});
}

// Checks the inputs of layer_norm's gradient ops: dy and x float, of one
// shape; the normalised block from axis; returns it.
Shape::Dims layerNormGradBlock(InferCtx& c) {
  c.requireFloat(0);
  c.requireFloat(1);
  c.type = c.commonType();
  c.check(c.shapeOf(0) == c.shapeOf(1), "dy of shape ", c.shapeOf(0), " and x of shape ", c.shapeOf(1),
          " must have one shape");
  c.check(c.attrs.f("epsilon") >= 0, "epsilon must be >= 0, got ", c.attrs.f("epsilon"));
  return trailingDims(c.shapeOf(1), checkedAxis(c, c.shapeOf(1), c.attrs.i("axis")));
}

ONYX_OP(kLayerNormGrad, "layer_norm_grad")
    .doc("dx of layer_norm(x, gamma, beta, axis, epsilon) given dy: rstd (dxhat - mean(dxhat) - xhat "
         "mean(dxhat xhat)), dxhat = dy gamma, means over the normalised dims (one pass per row)")
    .inputs(3)
    .attr("axis", int64_t(-1))
    .attr("epsilon", 1e-5)
    .infer([](InferCtx& c) {
      Shape::Dims block = layerNormGradBlock(c);
      c.check(broadcastsToBlock(c.shapeOf(2), block), "gamma of shape ", c.shapeOf(2),
              " does not broadcast to the normalised dims ", Shape(block));
      c.shape = c.shapeOf(1);
    })
    .cpu([](KernelCtx& c) {
      dispatchFloat(c.out.type(), "layer_norm_grad",
                    [&](auto tag) { layerNormGradRows<typename decltype(tag)::type>(c); });
    })
    .notDifferentiable("internal: the gradient of layer_norm (its second derivative is not implemented)")
    .noOnnx("internal: the gradient of layer_norm");

ONYX_OP(kLayerNormParamGrad, "layer_norm_param_grad")
    .doc("[2, N]: the sums over the rows of dy * xhat and of dy, N the normalised dims' size: layer_norm's "
         "gamma and beta gradients before GradCtx folds gamma's broadcast dims (one pass)")
    .inputs(2)
    .attr("axis", int64_t(-1))
    .attr("epsilon", 1e-5)
    .infer([](InferCtx& c) {
      Shape::Dims block = layerNormGradBlock(c);
      int64_t n = 1;
      for(auto d : block) n *= d;
      c.shape = Shape({2, n});
    })
    .cpu([](KernelCtx& c) {
      dispatchFloat(c.out.type(), "layer_norm_param_grad",
                    [&](auto tag) { layerNormParamGradRows<typename decltype(tag)::type>(c); });
    })
    .notDifferentiable("internal: the gradient of layer_norm's gamma and beta")
    .noOnnx("internal: the gradient of layer_norm's gamma and beta");

Expr layer_norm_grad(Expr dy, Expr x, Expr gamma, int axis, double eps) {
  return x->graph()->make(kLayerNormGrad, {dy, x, gamma}, {{"axis", attr(axis)}, {"epsilon", attr(eps)}});
}

Expr layer_norm_param_grad(Expr dy, Expr x, int axis, double eps) {
  return x->graph()->make(kLayerNormParamGrad, {dy, x}, {{"axis", attr(axis)}, {"epsilon", attr(eps)}});
}

Expr layer_norm(Expr x, int axis, double eps) {
  int r = x->shape().rank();
  ONYX_CHECK(r >= 1 && axis >= -r && axis < r, "layer_norm: axis ", axis, " is out of range for input of shape ",
             x->shape());
  Shape block(trailingDims(x->shape(), x->shape().axis(axis)));
  auto* graph = x->graph();
  return layer_norm(x, graph->ones(block, x->value_type()), graph->zeros(block, x->value_type()), axis, eps);
}

// ------------------------------------------------------------ cross_entropy

namespace {

// "[i, j, ...]": the multi-index of flat position `flat` in `shape`.
std::string indexString(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for(int k = shape.rank() - 1; k >= 0; --k) {
    idx[static_cast<size_t>(k)] = flat % shape.dims()[k];
    flat /= shape.dims()[k];
  }
  std::string s = "[";
  for(size_t k = 0; k < idx.size(); ++k) s += (k ? ", " : "") + std::to_string(idx[k]);
  return s + "]";
}

// One loss per line of the logits along the class axis; line k's label is
// labels[k] (the labels are the logits' shape without the class axis).
// Labels must lie in [0, classes); the error names the first that does not.
template <class L>
void checkLabels(const L* labels, const Shape& shape, int64_t classes) {
  for(int64_t r = 0, rows = shape.elements(); r < rows; ++r) {
    int64_t l = static_cast<int64_t>(labels[r]);
    if(l < 0 || l >= classes)
      fail("cross_entropy: label ", l, " at index ", indexString(shape, r), " of the labels (shape ", shape,
           ") is out of range for ", classes, " classes; labels must be in [0, ", classes, ")");
  }
}

}  // namespace

void ops::checkLabels(const TensorBase& labels, int64_t classes) {
  ONYX_ASSERT(labels.onHost(), "label check of a device tensor");
  dispatchIndex(labels.type(), "cross_entropy labels", [&](auto tag) {
    onyx::checkLabels(labels.data<typename decltype(tag)::type>(), labels.shape(), classes);
  });
}

namespace {

template <class T, class L>
void crossEntropyRows(KernelCtx& c) {
  const TensorBase& lt = *c.in[0];
  const TensorBase& labt = *c.in[1];
  const Lines lines(lt.shape(), lt.shape().axis(c.attrs.i("axis")));
  const int64_t classes = lines.n, st = lines.inner;
  const int64_t rows = labt.size();
  const L* labels = labt.data<L>();
  // Checked up front, on one thread: an exception must not leave an OpenMP region.
  checkLabels(labels, labt.shape(), classes);
  const T* x = lt.data<T>();
  T* y = c.out.data<T>();
  host::parallelFor(rows, lt.size(), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const T* xr = x + lines.start(r);
      double m = -std::numeric_limits<double>::infinity();
      for(int64_t j = 0; j < classes; ++j) m = std::max(m, double(host::load(xr, j * st)));
      double s = 0;
      for(int64_t j = 0; j < classes; ++j) s += std::exp(double(host::load(xr, j * st)) - m);
      // -log_softmax(x)[label] = lse - x[label]
      const double lse = m + std::log(s);
      host::store(y, r, lse - double(host::load(xr, static_cast<int64_t>(labels[r]) * st)));
    }
  });
}

}  // namespace

// ONNX NegativeLogLikelihoodLoss on log-probabilities lp [N, C, d1, ...] and
// targets [N, d1, ...], with the node's optional weight input 2 and its
// reduction / ignore_index attributes. Built from where/sum over a one-hot
// of the targets, so it is differentiable in lp (and in the weights).
Expr nllLossImport(OnnxImportCtx& c, Expr lp, Expr target) {
  std::string reduction = c.attrString("reduction", "mean");
  c.check(reduction == "none" || reduction == "sum" || reduction == "mean", "reduction '", reduction,
          "' is not one of none, sum, mean");
  const Shape& ls = lp->shape();
  c.check(ls.rank() >= 2, "input must have shape [N, C, d1, ...], got ", ls);
  c.check(target->value_type() == Type::int32 || target->value_type() == Type::int64, "target has element type ",
          target->value_type(), "; it must be int32 or int64 class indices");
  std::vector<int64_t> want = ls.vec();
  want.erase(want.begin() + 1);
  c.check(target->shape().vec() == want, "target of shape ", target->shape(), " does not match input of shape ", ls,
          ": expected ", Shape(want));
  const int64_t classes = ls.dims()[1];
  std::vector<int64_t> column = target->shape().vec();
  column.insert(column.begin() + 1, 1);
  Expr t = reshape(target, column);
  std::vector<int64_t> ids(static_cast<size_t>(classes));
  std::iota(ids.begin(), ids.end(), int64_t(0));
  std::vector<int64_t> idShape(static_cast<size_t>(ls.rank()), 1);
  idShape[1] = classes;
  Expr hit = eq(t, c.graph().constant(Shape(idShape), inits::fromVector(ids), target->value_type()));
  if(c.hasAttr("ignore_index")) {
    int64_t ii = c.attrInt("ignore_index", 0);
    if(ii >= 0 && ii < classes) hit = logical_and(hit, ne(t, double(ii)));
  }
  Expr w = cast(hit, lp->value_type());  // one-hot of the counted targets
  Expr picked = where(hit, lp, 0.0);     // not lp * w: lp may hold -inf off target
  if(c.numInputs() > 2 && c.hasInput(2)) {
    Expr weight = c.input(2);
    c.check(weight->shape() == Shape({classes}), "weight must have shape [", classes, "], got ", weight->shape());
    Expr wc = reshape(weight, idShape);
    w = w * wc;
    picked = picked * wc;
  }
  Expr loss = -sum(picked, std::vector<int>{1}, false);
  if(reduction == "none") return loss;
  if(reduction == "sum") return sum(loss);
  return sum(loss) / sum(w);
}

namespace {

// cross_entropy as SoftmaxCrossEntropyLoss (reduction "none"), classes on
// axis 1.
void exportCrossEntropy(OnnxExportCtx& c) {
  const Shape& s = c.inputShape(0);
  const int r = s.rank();
  const int axis = s.axis(c.attrs().i("axis"));
  const Type t = c.inputType(0);
  checkBf16Opset(c, t);
  std::string x = c.input(0), labels = c.input(1);
  if(r == 1) {
    // One row: [1, C] and [1], the loss [1] reshaped to a scalar at the end.
    // The shapes are named "<value>/shape" as the reshape nodes of the
    // re-import name theirs, so a second round trip gives the same file.
    std::string x2 = c.fresh("logits_row"), l2 = c.fresh("labels_row");
    c.emit("Reshape", {x, c.intsConst({1, s.dims()[0]}, "logits_row/shape")}, {x2});
    c.emit("Reshape", {labels, c.intsConst({1}, "labels_row/shape")}, {l2});
    x = x2;
    labels = l2;
  } else if(axis != 1) {
    std::string x2 = c.fresh("classes_axis1");
    c.emit("Transpose", {x}, {x2}, {{"perm", attr(moveAxisPerm(r, axis, 1))}});
    x = x2;
  }
  const std::string y = r == 1 ? c.fresh("row_loss") : c.output();
  c.emit("SoftmaxCrossEntropyLoss", {x, labels}, {y}, {{"reduction", std::string("none")}});
  if(r == 1) c.emit("Reshape", {y, c.intsConst({}, "shape")}, {c.output()});
}

}  // namespace

// y[...] = -log_softmax(logits)[..., label] along the class axis
ONYX_OP(kCrossEntropy, "cross_entropy")
    .doc("y = -log_softmax(logits)[label] along the class axis (default the last); labels int32/int64 with logits' "
         "shape minus the class axis (label smoothing: see cross_entropy())")
    .inputs(2)
    .attr("axis", int64_t(-1))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      const Shape& ls = c.shapeOf(0);
      const Shape& lb = c.shapeOf(1);
      c.check(c.typeOf(1) == Type::int32 || c.typeOf(1) == Type::int64, "labels (input 1) have element type ",
              c.typeOf(1), "; they must be class indices of type int32 or int64");
      c.check(ls.rank() >= 1, "logits must have rank >= 1 (classes on the class axis), got a scalar");
      const int axis = checkedAxis(c, ls, c.attrs.i("axis"));
      c.check(ls.dims()[axis] >= 1, "logits have no classes (dim ", axis, " is 0)");
      Shape::Dims wd = ls.dims();
      wd.erase(wd.begin() + axis);
      Shape want(wd);
      c.check(lb == want, "labels of shape ", lb, " do not match logits of shape ", ls, ": expected labels of shape ",
              want, " (one class index per line of logits along axis ", axis, ")");
      c.shape = lb;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      dispatchFloat(c.out.type(), "cross_entropy", [&](auto tag) {
        dispatchIndex(c.in[1]->type(), "cross_entropy labels", [&](auto ltag) {
          crossEntropyRows<typename decltype(tag)::type, typename decltype(ltag)::type>(c);
        });
      });
    })
    // dlogits = (softmax(logits) - onehot(labels)) * dy with a unit class axis inserted;
    // labels are not differentiable.
    .backward([](GradCtx& g) {
      if(!g.needs(0)) return;
      Expr logits = g.x(0), labels = g.x(1);
      const Shape& s = logits->shape();
      const int axis = s.axis(g.attrs.i("axis"));
      const int64_t classes = s.dims()[axis];
      std::vector<int64_t> column = labels->shape().vec();
      column.insert(column.begin() + axis, 1);
      std::vector<int64_t> ids(static_cast<size_t>(classes));
      std::iota(ids.begin(), ids.end(), int64_t(0));
      std::vector<int64_t> idShape(static_cast<size_t>(s.rank()), 1);
      idShape[static_cast<size_t>(axis)] = classes;
      Expr classIds = g.graph.constant(Shape(idShape), inits::fromVector(ids), labels->value_type());
      Expr q = cast(eq(reshape(labels, column), classIds), logits->value_type());
      g.add(0, (softmax(logits, axis) - q) * reshape(g.dy, column));
    })
    // SoftmaxCrossEntropyLoss differs in two ways the exporter bridges: its
    // default reduction is "mean" (export sets reduction="none") and its class
    // axis is 1 (another class axis is moved to 1 by a Transpose; 1-D logits
    // become one row [1, C] by Reshapes). It has no label smoothing, and
    // neither has this op: cross_entropy() builds smoothing from other ops.
    // Import: logits without weights, ignore_index or log_prob use this op
    // (class axis 1; -1 for 2-D), reduction a sum or mean of its result;
    // everything else is the composite NLL(log_softmax(x, 1)).
    .onnx("SoftmaxCrossEntropyLoss", 12)
    .exporter(exportCrossEntropy)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0), labels = c.input(1);
      const bool logProb = c.numOutputs() > 1 && c.wantsOutput(1);
      if(x->shape().rank() >= 2 && !c.hasAttr("ignore_index") && !(c.numInputs() > 2 && c.hasInput(2)) && !logProb &&
         (labels->value_type() == Type::int32 || labels->value_type() == Type::int64)) {
        std::string reduction = c.attrString("reduction", "mean");
        Expr loss = cross_entropy(x, labels, 0.f, x->shape().rank() == 2 ? -1 : 1);
        if(reduction == "sum") loss = sum(loss);
        else if(reduction == "mean") loss = mean(loss);
        else c.check(reduction == "none", "reduction '", reduction, "' is not one of none, sum, mean");
        c.setOutput(0, loss);
        return;
      }
      c.check(x->shape().rank() >= 2, "scores must have shape [N, C, d1, ...], got ", x->shape());
      Expr lp = log_softmax(x, 1);
      c.setOutput(0, nllLossImport(c, lp, labels));
      if(logProb) c.setOutput(1, lp);
    });

// With label smoothing ls: (1 - ls) * ce + ls * (logsumexp(x) - mean(x))
// over the class axis, built from ops that ONNX expresses one to one, so
// that an exported graph re-imports to the same bits.
Expr cross_entropy(Expr logits, Expr labels, float labelSmoothing, int axis) {
  ONYX_CHECK(labelSmoothing >= 0 && labelSmoothing <= 1, "cross_entropy: label_smoothing must be in [0, 1], got ",
             labelSmoothing);
  Expr ce = logits->graph()->make(kCrossEntropy, {logits, labels}, {{"axis", attr(axis)}});
  if(labelSmoothing == 0) return ce;
  const double ls = labelSmoothing;
  std::vector<int> classes{logits->shape().axis(axis)};
  return ce * (1 - ls) + (logsumexp(logits, classes, false) - mean(logits, classes, false)) * ls;
}

// ------------------------------------------------------------------ dropout

// y[i] = bernoulli(1 - p) / (1 - p)
ONYX_OP(kDropoutMask, "dropout_mask")
    .doc("y[i] = 1 / (1 - p) with probability 1 - p, else 0: an inverted-dropout mask of shape `shape`, type `to`")
    .inputs(0)
    .attr("shape", IntList{})
    .attr("p", 0.5)
    .attr("to", int64_t(Type::float32))
    .stochastic()
    .infer([](InferCtx& c) {
      Type to = static_cast<Type>(c.attrs.i("to"));
      c.check(isFloat(to), "mask element type ", to, " is not a floating-point type");
      double p = c.attrs.f("p");
      c.check(p >= 0 && p < 1, "drop probability p must be in [0, 1), got ", p);
      const IntList& s = c.attrs.ints("shape");
      for(auto d : s) c.check(d >= 0, "shape ", attrToString(s), " has a negative dimension");
      c.shape = Shape(Shape::Dims(s.begin(), s.end()));
      c.type = to;
    })
    .cpu([](KernelCtx& c) {
      const double p = c.attrs.f("p");
      dispatchFloat(c.out.type(), "dropout_mask", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = typename ComputeOf<T>::type;
        const C scale = static_cast<C>(1.0 / (1.0 - p));
        T* y = c.out.data<T>();
        // One sequential stream from the graph's generator: the mask depends
        // on the seed only, not on the number of threads.
        for(int64_t i = 0; i < c.out.size(); ++i) {
          double u = static_cast<double>(c.rng() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
          host::store(y, i, u >= p ? scale : C(0));
        }
      });
    })
    .gpuOnHost(ops::kDrawOnHost)
    .notDifferentiable("a random mask with no inputs; dropout's gradient flows through the mul by the mask")
    // No ONNX op is a bare mask, but Dropout in training mode (opset 12+) on
    // ones outputs exactly 1 / (1 - ratio) where kept and 0 elsewhere: the
    // mask is exported as Dropout(Expand(1, shape), ratio, training_mode =
    // true), which the Dropout import maps back to this op alone. Its draws
    // come from the runtime's generator (other runtimes draw other masks).
    .noOnnx("no ONNX op is a bare random mask; exported as Dropout(Expand(1, shape), p, training_mode=true)")
    .onnxExport(12, [](OnnxExportCtx& c) {
      const Attrs a = c.attrs();
      const Type to = static_cast<Type>(a.i("to"));
      checkBf16Opset(c, to);
      const IntList& shape = a.ints("shape");
      std::string ones = c.fresh("ones");
      c.emit("Expand", {c.scalarConst(1, to, "one"), c.intsConst(std::vector<int64_t>(shape.begin(), shape.end()), "shape")},
             {ones});
      c.emit("Dropout",
             {ones, c.scalarConst(a.f("p"), Type::float64, "ratio"), c.scalarConst(1, Type::boolean, "training_mode")},
             {c.output()});
    });

Expr dropout_mask(ExpressionGraph* graph, const Shape& shape, float p, Type type) {
  if(type == Type::undefined) type = graph->getDefaultElementType();
  Expr m = graph->make(kDropoutMask, std::vector<Expr>(),
                       {{"shape", attr(shape.vec())}, {"p", attr(p)}, {"to", int64_t(type)}});
  // A checkpointing graph recomputes freed values; a redrawn mask would no
  // longer match the forward pass, so this one is always kept.
  m->markCheckpoint();
  return m;
}

Expr dropout(Expr x, float p, bool training) {
  if(!training || p == 0 || x->graph()->isInference()) return x;
  return x * dropout_mask(x->graph(), x->shape(), p, x->value_type());
}

}  // namespace onyx
