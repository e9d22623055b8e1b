// Normalisation layers (batch, instance, group, RMS, Lp, mean-variance, LRN).
// All are composites: the heavy lifting is done by layer_norm's fused kernel
// where the statistics are over trailing dims (instance and group norm),
// otherwise by the reductions; the per-channel affine part of a batch norm
// with stored statistics is one op, channel_affine: a single pass over x. Their ONNX imports are in
// converters/import_normalization.cpp.
#include <onyx/ops/norm.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/pooling.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

void checkChannelParam(Expr x, Expr p, const char* fn, const char* what) {
  const Shape& xs = x->shape();
  ONYX_CHECK(xs.rank() >= 2, fn, ": x must have shape [N, C, ...], got ", xs);
  ONYX_CHECK(p->shape() == Shape({xs.dims()[1]}), fn, ": ", what, " must have shape [", xs.dims()[1],
             "] (one per channel of x ", xs, "), got ", p->shape());
}

std::vector<int> axesFrom(int from, int rank) {
  std::vector<int> axes;
  for(int a = from; a < rank; ++a) axes.push_back(a);
  return axes;
}

}  // namespace

namespace norm {

Expr perChannel(Expr p, const Shape& x, bool spatial) {
  if(!spatial) return p;  // [C, d1, ...] already right-aligns with x's dims 1..
  std::vector<int64_t> s(static_cast<size_t>(x.rank() - 1), 1);
  s[0] = p->shape().elements();
  return reshape(p, s);
}

std::vector<int> axesExcept1(int rank) {
  std::vector<int> axes;
  for(int a = 0; a < rank; ++a)
    if(a != 1) axes.push_back(a);
  return axes;
}

Expr affineNorm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps) {
  Expr f = scale / sqrt(var + eps);
  return x * f + (bias - mean * f);
}

Expr channelNorm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps) {
  const Shape& s = x->shape();
  Type t = x->value_type();
  bool sameType = true;
  for(Expr p : {scale, bias, mean, var}) sameType = sameType && p->value_type() == t;
  if(!sameType || (t != Type::float32 && t != Type::float64))
    return affineNorm(x, perChannel(scale, s), perChannel(bias, s), perChannel(mean, s), perChannel(var, s), eps);
  const bool onCpu = x->graph()->getDeviceId().type == DeviceType::cpu;
  auto filledWith = [&](Expr p, double v) {
    if(!onCpu || p->kind() != NodeKind::Constant) return false;
    for(double e : p->val()->toVector<double>())
      if(e != v) return false;
    return true;
  };
  // channel_affine's own ONNX form (mean 0, variance 1, epsilon 0) comes
  // back as that op, whatever scale and bias are, so that exports are stable.
  if(eps == 0 && filledWith(mean, 0) && filledWith(var, 1)) return channel_affine(x, scale, bias);
  bool constants = onCpu;
  for(Expr p : {scale, bias, mean, var}) constants = constants && p->kind() == NodeKind::Constant;
  if(!constants) {
    // Trainable or computed parameters: f and its shift stay expressions,
    // so gradients reach scale, bias, mean and var through them.
    Expr f = scale / sqrt(var + eps);
    return channel_affine(x, f, bias - mean * f);
  }
  // Stored statistics of a model run for inference: s and t once, here.
  const int64_t C = s[1];
  std::vector<double> sc = scale->val()->toVector<double>(), b = bias->val()->toVector<double>(),
                      m = mean->val()->toVector<double>(), v = var->val()->toVector<double>(), f(static_cast<size_t>(C)),
                      sh(static_cast<size_t>(C));
  for(size_t c = 0; c < size_t(C); ++c) {
    f[c] = sc[c] / std::sqrt(v[c] + eps);
    sh[c] = b[c] - m[c] * f[c];
  }
  ExpressionGraph& g = *x->graph();
  Tensor ft = TensorBase::create(Shape({C}), t), st = TensorBase::create(Shape({C}), t);
  ft->set(f);
  st->set(sh);
  return channel_affine(x, g.constant(ft), g.constant(st));
}

BatchNormResult normalizeByBatch(Expr x, const std::vector<int>& axes, Expr scale, Expr bias, double eps) {
  const Shape& s = x->shape();
  const Type t = x->value_type();
  std::vector<int64_t> pc(static_cast<size_t>(std::max(1, s.rank() - 1)), 1);
  if(s.rank() >= 2) pc[0] = s[1];
  if(s.rank() >= 2 && axes == axesExcept1(s.rank()) && (t == Type::float32 || t == Type::float64) &&
     scale->value_type() == t && bias->value_type() == t && scale->shape() == Shape(pc) &&
     bias->shape() == Shape(pc)) {
    // Statistics over every axis but 1 (the spatial batch norm): the fused
    // ops, two passes over x forward (batch_moments, batch_normalize).
    const int64_t C = s[1];
    const std::vector<int64_t> perC{C};
    Expr m = batch_moments(x);
    Expr mu = reshape(slice(m, 0, 0, 1), perC), var = reshape(slice(m, 0, 1, 2), perC);
    Expr y = batch_normalize(x, mu, var, reshape(scale, perC), reshape(bias, perC), eps);
    std::vector<int64_t> kept(static_cast<size_t>(s.rank()), 1);
    kept[1] = C;
    return {y, reshape(mu, kept), reshape(var, kept)};
  }
  Expr mu = mean(x, axes, true);
  Expr xc = x - mu;
  Expr var = mean(xc * xc, axes, true);
  return {xc * (scale / sqrt(var + eps)) + bias, mu, var};
}

}  // namespace norm

// ------------------------------------------------------------ channel affine

namespace {

// Where channel c's values of sample n start, for x given as parts joined
// along the channels: plain [N, C_i, inner] or channel-blocked [N, C_i/b,
// inner, b] per part (c a multiple of b there).
template <class T>
struct AffineParts {
  std::vector<const T*> base;
  std::vector<int64_t> c0, ci;
  std::vector<int> partOf;  // per channel (per channel block when blocked)
  int64_t unit = 1, inner = 0;
  AffineParts(const KernelCtx& c, int64_t unitSize, int64_t innerSize) : unit(unitSize), inner(innerSize) {
    const size_t k = c.in.size() - 2;
    int64_t off = 0;
    for(size_t i = 0; i < k; ++i) {
      base.push_back(c.in[i]->data<T>());
      c0.push_back(off);
      ci.push_back(c.in[i]->shape()[1]);
      for(int64_t j = 0; j < ci.back() / unit; ++j) partOf.push_back(int(i));
      off += ci.back();
    }
  }
  const T* at(int64_t n, int64_t c) const {
    const size_t i = size_t(partOf[size_t(c / unit)]);
    return base[i] + (n * (ci[i] / unit) + (c - c0[i]) / unit) * inner * unit;
  }
};

template <class T>
inline T affineOut(T x, T s, T t, bool relu) {
  T z = x * s + t;
  return relu && z < T(0) ? T(0) : z;  // relu's own rule: x < 0 ? 0 : x (NaN and -0 stay)
}

// y = x * s + t over blocks of B channels ([inner, B] each), y's block k
// being (sample k / perSample, channel block k % perSample).
template <int B, bool Relu>
void channelAffineBlocked(const AffineParts<float>& x, const float* s, const float* t, float* y, int64_t blocks,
                          int64_t perSample) {
  const int64_t inner = x.inner;
  host::parallelFor(blocks, blocks * inner * B, [&](int64_t lo, int64_t hi) {
    for(int64_t k = lo; k < hi; ++k) {
      float sc[B], sh[B];
      const int64_t c = (k % perSample) * B;
      for(int i = 0; i < B; ++i) {
        sc[i] = s[c + i];
        sh[i] = t[c + i];
      }
      const float* __restrict xk = x.at(k / perSample, c);
      float* __restrict yk = y + k * inner * B;
      for(int64_t p = 0; p < inner; ++p)
        for(int i = 0; i < B; ++i) yk[p * B + i] = affineOut(xk[p * B + i], sc[i], sh[i], Relu);
    }
  });
}

template <class T, bool Relu>
void channelAffinePlain(const AffineParts<T>& x, const T* s, const T* t, T* y, int64_t N, int64_t C) {
  const int64_t inner = x.inner, planes = N * C;
  host::parallelFor(planes, planes * inner, [&](int64_t lo, int64_t hi) {
    for(int64_t p = lo; p < hi; ++p) {
      const T sc = s[p % C], sh = t[p % C];
      const T* __restrict xp = x.at(p / C, p % C);
      T* __restrict yp = y + p * inner;
      for(int64_t i = 0; i < inner; ++i) yp[i] = affineOut(xp[i], sc, sh, Relu);
    }
  });
}

template <class T>
void channelAffineKernel(KernelCtx& c) {
  const Shape& ys = c.out.shape();
  const int64_t N = ys[0], C = ys[1], inner = ys.elements() / std::max<int64_t>(1, N * C);
  const size_t k = c.in.size() - 2;
  const T *s = c.in[k]->data<T>(), *t = c.in[k + 1]->data<T>();
  T* y = c.out.data<T>();
  const bool relu = c.attrs.i("relu") != 0;
  if(const int64_t b = c.attrs.i("block")) {
    // [N, C/b, H, W, b] in memory: per block of b channels, inner rows of b.
    if constexpr(std::is_same<T, float>::value) {
      const AffineParts<float> x(c, b, inner);
      ONYX_ASSERT(b == 8 || b == 16, "channel_affine: block ", b);
      if(b == 8)
        return relu ? channelAffineBlocked<8, true>(x, s, t, y, N * C / b, C / b)
                    : channelAffineBlocked<8, false>(x, s, t, y, N * C / b, C / b);
      return relu ? channelAffineBlocked<16, true>(x, s, t, y, N * C / b, C / b)
                  : channelAffineBlocked<16, false>(x, s, t, y, N * C / b, C / b);
    }
    ONYX_ASSERT(false, "channel_affine: block ", b, " on ", c.out.type());
  }
  const AffineParts<T> x(c, 1, inner);
  if(relu) channelAffinePlain<T, true>(x, s, t, y, N, C);
  else channelAffinePlain<T, false>(x, s, t, y, N, C);
}

}  // namespace

// y[n, c, ...] = x[n, c, ...] * s[c] + t[c] (then max(., 0) with relu),
// x given as one tensor or as parts joined along axis 1.
ONYX_OP(kChannelAffine, "channel_affine")
    .doc("y = x * s[c] + t[c] along axis 1 (c) of x [N, C, ...]: a batch norm with stored statistics in one pass; "
         "inputs x_0, ..., x_k-1, s, t: x is the x_i joined along axis 1 (a concatenation read in place); relu 1: "
         "y = max(y, 0) as relu computes it; block 8 or 16: the x_i and y are stored channel-blocked (oneDNN's "
         "nChw8c/16c; float32 4-D, set by the blocked_layout pass)")
    .inputs(3, -1)
    .attr("block", int64_t(0))
    .attr("relu", int64_t(0))
    .infer([](InferCtx& c) {
      c.type = c.commonType();
      c.check(c.type == Type::float32 || c.type == Type::float64, "element type ", c.type,
              " is not supported (float32, float64)");
      const size_t k = c.n() - 2;
      const Shape& x0 = c.shapeOf(0);
      c.check(x0.rank() >= 2, "x must have shape [N, C, ...], got ", x0);
      Shape::Dims d = x0.dims();
      for(size_t i = 1; i < k; ++i) {
        const Shape& si = c.shapeOf(i);
        bool ok = si.rank() == x0.rank();
        for(int j = 0; ok && j < x0.rank(); ++j) ok = j == 1 || si[j] == x0[j];
        c.check(ok, "x part ", i, " has shape ", si, " but part 0 has shape ", x0,
                "; the parts join along axis 1, so all other dims must match");
        d[1] += si[1];
      }
      const Shape xs(d);
      c.check(c.shapeOf(k) == Shape({xs[1]}) && c.shapeOf(k + 1) == Shape({xs[1]}), "s and t must have shape [",
              xs[1], "]");
      c.shape = xs;
      const int64_t b = c.attrs.i("block"), relu = c.attrs.i("relu");
      c.check(relu == 0 || relu == 1, "relu must be 0 or 1, got ", relu);
      c.check(b == 0 || b == 8 || b == 16, "block must be 0 (plain) or 8 or 16 (channel-blocked), got ", b);
      c.check(b == 0 || (c.type == Type::float32 && xs.rank() == 4 && xs[1] % b == 0), "block (a channel-blocked "
              "layout) needs float32 [N, C, H, W] with C a multiple of ", b, ", got ", c.type, " ", xs);
      for(size_t i = 0; b != 0 && i < k; ++i)
        c.check(c.shapeOf(i)[1] % b == 0, "x part ", i, " of shape ", c.shapeOf(i), " has channels that are not a "
                "multiple of block ", b);
    })
    .cpu([](KernelCtx& c) {
      if(c.out.type() == Type::float32) channelAffineKernel<float>(c);
      else channelAffineKernel<double>(c);
    })
    .gpuOnHost("no GPU form yet: a CPU inference kernel (issue 16); GPU graphs get it from the importer on host copies")
    .backward([](GradCtx& g) {
      ONYX_ASSERT(g.attrs.i("block") == 0, "channel_affine: a gradient through channel-blocked tensors (the "
                  "blocked_layout pass runs on inference graphs only)");
      const size_t k = g.n() - 2;
      std::vector<Expr> parts;
      for(size_t i = 0; i < k; ++i) parts.push_back(g.x(i));
      Expr x = concat(parts, 1);
      const Shape& xs = x->shape();
      std::vector<int> axes = norm::axesExcept1(xs.rank());
      Expr dz = g.attrs.i("relu") ? relu_grad(g.dy, g.y()) : g.dy;  // y > 0 exactly where x * s + t > 0
      bool anyX = false;
      for(size_t i = 0; i < k; ++i) anyX = anyX || g.needs(i);
      if(anyX) {
        Expr dx = dz * norm::perChannel(g.x(k), xs);
        int64_t off = 0;
        for(size_t i = 0; i < k; ++i) {
          const int64_t ci = g.x(i)->shape()[1];
          if(g.needs(i)) g.add(i, k == 1 ? dx : slice(dx, 1, off, off + ci));
          off += ci;
        }
      }
      if(g.needs(k)) g.add(k, sum(dz * x, axes, false));
      if(g.needs(k + 1)) g.add(k + 1, sum(dz, axes, false));
    })
    // ONNX's per-channel multiply-add is BatchNormalization with mean 0,
    // variance 1 and epsilon 0: exactly x * s + t, imported back as this op
    // (norm::channelNorm), and what runtimes fold into a preceding Conv;
    // parts are a Concat before it, relu a Relu after it.
    .onnxExport(7, [](OnnxExportCtx& c) {
      ONYX_ASSERT(c.attrs().i("block") == 0, "channel_affine: channel-blocked tensors in a graph being exported "
                  "(the blocked_layout pass runs for the CPU kernels only)");
      const size_t k = c.inputs().size() - 2;
      std::string x = c.input(0);
      int64_t C = c.inputShape(0)[1];
      if(k > 1) {
        x = c.fresh("joined");
        std::vector<std::string> parts;
        for(size_t i = 0; i < k; ++i) parts.push_back(c.input(i));
        for(size_t i = 1; i < k; ++i) C += c.inputShape(i)[1];
        c.emit("Concat", parts, {x}, {{"axis", int64_t(1)}});
      }
      Tensor zero = TensorBase::create(Shape({C}), c.inputType(0)), one = TensorBase::create(Shape({C}), c.inputType(0));
      zero->set(0.0);
      one->set(1.0);
      const bool relu = c.attrs().i("relu") != 0;
      const std::string y = relu ? c.fresh("affine") : c.output();
      c.emit("BatchNormalization", {x, c.input(k), c.input(k + 1), c.constant(zero, "mean"), c.constant(one, "var")},
             {y}, {{"epsilon", 0.0}});
      if(relu) c.emit("Relu", {y}, {c.output()});
    });

Expr channel_affine(Expr x, Expr s, Expr t, bool relu) {
  return x->graph()->make(kChannelAffine, {x, s, t}, {{"relu", attr(int64_t(relu ? 1 : 0))}});
}

Expr channel_affine(const std::vector<Expr>& xs, Expr s, Expr t, bool relu) {
  ONYX_CHECK(!xs.empty(), "channel_affine: needs at least one x part");
  std::vector<Expr> in(xs);
  in.push_back(s);
  in.push_back(t);
  return s->graph()->make(kChannelAffine, in, {{"relu", attr(int64_t(relu ? 1 : 0))}});
}

// ------------------------------------------------------ batch norm, training
//
// A training batch norm over x [N, C, d1, ...] in four registry ops, each a
// pass or two over x (it was 13 element-wise and reduction nodes forward and
// about 30 backward, half of a ResNet-18 training step):
//   m  = batch_moments(x)          [2, C]: mean, population variance (its rows)
//   y  = batch_normalize(x, mean, var, scale, bias, eps)
//                                  (x - mean) / sqrt(var + eps) * scale + bias
// and for their gradients
//   s  = batch_norm_grad_sums(dy, x, mean)  [2, C]: sum dy, sum dy * (x - mean)
//   dx = batch_moments_grad(x, m, dm)       (dmean + 2 dvar (x - mean)) / count
// Each backward is the op's own partial derivative (batch_normalize takes
// mean and var as inputs like any other), so the chain rule through m gives
// the familiar batch-norm gradient. Statistics and sums are accumulated in
// double.

namespace {

// x [N, C, d1, ...] as N * C planes of `inner` elements.
struct Planes {
  int64_t N, C, inner;
  explicit Planes(const Shape& s)
      : N(s[0]), C(s[1]), inner(s.elements() / std::max<int64_t>(1, s[0] * s[1])) {}
  int64_t count() const { return N * inner; }  // elements per channel
};

void checkPlanes(InferCtx& c, const Shape& xs) {
  c.check(xs.rank() >= 2, "x must have shape [N, C, ...], got ", xs);
}

void checkFloat3264(InferCtx& c) {
  c.type = c.commonType();
  c.check(c.type == Type::float32 || c.type == Type::float64, "element type ", c.type,
          " is not supported (float32, float64)");
}

void checkPerChannel(InferCtx& c, size_t i, const Shape& want, const char* what) {
  c.check(c.shapeOf(i) == want, what, " must have shape ", want, ", got ", c.shapeOf(i));
}

// Per channel c: fold(c, run, len) over its N runs of `inner` elements, in
// order, in parallel over the channels.
template <class Fn>
void forEachChannel(const Planes& p, Fn fn) {
  host::parallelFor(p.C, p.N * p.C * p.inner, [&](int64_t lo, int64_t hi) {
    for(int64_t c = lo; c < hi; ++c) fn(c);
  });
}

// The sum over channel ch of get(element) in double, in the order that the
// reduction kernel (host::reduceInto) adds the same elements for ReduceMean
// over every axis but 1: runs of 16 or more folded in four and added run by
// run, shorter runs as one chain. An exported batch_moments (ReduceMean, Sub,
// Mul, ReduceMean) imports back to the same bits.
// One channel (C = 1) is one run of N * inner.
template <class T, class Get>
double channelSum(const Planes& p, const T* x, int64_t ch, Get get) {
  const int64_t runs = p.C == 1 ? 1 : p.N, len = p.C == 1 ? p.N * p.inner : p.inner;
  double s = 0;
  for(int64_t n = 0; n < runs; ++n) {
    const T* r = x + (n * p.C + ch) * p.inner;
    if(len >= 16) {
      s += host::sumInFour(len, [r, &get](int64_t j) { return get(r[j]); });
    } else {
      for(int64_t j = 0; j < len; ++j) s += get(r[j]);
    }
  }
  return s;
}


// mean = sum / count; var = the mean of (x - mean)^2, each difference and
// square rounded to T as the element-wise ops round them.
template <class T>
void momentsKernel(KernelCtx& c) {
  const Planes p(c.in[0]->shape());
  const T* x = c.in[0]->data<T>();
  T* out = c.out.data<T>();
  const double count = double(p.count());
  forEachChannel(p, [&](int64_t ch) {
    const T mean = static_cast<T>(channelSum(p, x, ch, [](T v) { return double(v); }) / count);
    const double v = channelSum(p, x, ch, [mean](T e) {
      const T d = e - mean;
      return double(T(d * d));
    });
    out[ch] = mean;
    out[p.C + ch] = static_cast<T>(v / count);
  });
}

// y = x * f + (bias - mean * f), f = scale / sqrt(var + eps), in T: the
// form of channel_affine (and of PyTorch's CPU batch norm).
template <class T>
void normalizeKernel(KernelCtx& c) {
  const Planes p(c.in[0]->shape());
  const T *x = c.in[0]->data<T>(), *mean = c.in[1]->data<T>(), *var = c.in[2]->data<T>(), *sc = c.in[3]->data<T>(),
          *b = c.in[4]->data<T>();
  T* y = c.out.data<T>();
  const T eps = c.in[5]->data<T>()[0];
  std::vector<T> f(size_t(p.C)), t(size_t(p.C));
  for(int64_t ch = 0; ch < p.C; ++ch) {
    const T sd = std::sqrt(T(var[ch] + eps));
    f[size_t(ch)] = sc[ch] / sd;
    t[size_t(ch)] = b[ch] - mean[ch] * f[size_t(ch)];
  }
  const int64_t planes = p.N * p.C;
  host::parallelFor(planes, planes * p.inner, [&](int64_t lo, int64_t hi) {
    for(int64_t q = lo; q < hi; ++q) {
      const int64_t ch = q % p.C;
      const T fc = f[size_t(ch)], tc = t[size_t(ch)];
      const T* xr = x + q * p.inner;
      T* yr = y + q * p.inner;
      for(int64_t j = 0; j < p.inner; ++j) yr[j] = xr[j] * fc + tc;
    }
  });
}

template <class T>
void gradSumsKernel(KernelCtx& c) {
  const Planes p(c.in[0]->shape());
  const T *dy = c.in[0]->data<T>(), *x = c.in[1]->data<T>(), *m = c.in[2]->data<T>();
  T* out = c.out.data<T>();
  forEachChannel(p, [&](int64_t ch) {
    const double mean = double(m[ch]);
    double s = 0, sx = 0;
    for(int64_t n = 0; n < p.N; ++n) {
      const int64_t off = (n * p.C + ch) * p.inner;
      const T *g = dy + off, *r = x + off;
      s += host::sumInFour(p.inner, [g](int64_t j) { return g[j]; });
      sx += host::sumInFour(p.inner, [g, r, mean](int64_t j) { return double(g[j]) * (double(r[j]) - mean); });
    }
    out[ch] = static_cast<T>(s);
    out[p.C + ch] = static_cast<T>(sx);
  });
}

template <class T>
void momentsGradKernel(KernelCtx& c) {
  const Planes p(c.in[0]->shape());
  const T *x = c.in[0]->data<T>(), *m = c.in[1]->data<T>(), *dm = c.in[2]->data<T>();
  // With inputs 3 and 4: dy * f[c] first, then the moments' term added
  // (the product and the sum rounded as the mul and add nodes they replace).
  const T* dy = c.in.size() > 3 ? c.in[3]->data<T>() : nullptr;
  const T* f = c.in.size() > 3 ? c.in[4]->data<T>() : nullptr;
  T* dx = c.out.data<T>();
  const double count = double(std::max<int64_t>(1, p.count()));
  // dx = a[c] + b[c] * (x - mean[c]): a = dmean / count, b = 2 dvar / count
  std::vector<T> a(size_t(p.C)), bb(size_t(p.C));
  for(int64_t ch = 0; ch < p.C; ++ch) {
    a[size_t(ch)] = static_cast<T>(double(dm[ch]) / count);
    bb[size_t(ch)] = static_cast<T>(2.0 * double(dm[p.C + ch]) / count);
  }
  const int64_t planes = p.N * p.C;
  host::parallelFor(planes, planes * p.inner, [&](int64_t lo, int64_t hi) {
    for(int64_t q = lo; q < hi; ++q) {
      const int64_t ch = q % p.C;
      const T ac = a[size_t(ch)], bc = bb[size_t(ch)], mc = m[ch];
      const T* xr = x + q * p.inner;
      T* o = dx + q * p.inner;
      if(dy) {
        const T fc = f[ch];
        const T* g = dy + q * p.inner;
        for(int64_t j = 0; j < p.inner; ++j) {
          const T prod = g[j] * fc;
          const T moments = ac + bc * (xr[j] - mc);
          o[j] = prod + moments;
        }
      } else {
        for(int64_t j = 0; j < p.inner; ++j) o[j] = ac + bc * (xr[j] - mc);
      }
    }
  });
}

template <void (*F)(KernelCtx&), void (*D)(KernelCtx&)>
void floatOrDouble(KernelCtx& c) {
  if(c.out.type() == Type::float32) F(c);
  else D(c);
}

// Row r of m [2, C] as a [C] vector.
Expr row(Expr m, int64_t r) { return reshape(slice(m, 0, r, r + 1), std::vector<int64_t>{m->shape()[1]}); }

// ReduceMean of `x` over every axis but 1, kept dims, at the export's opset.
std::string exportChannelMean(OnnxExportCtx& c, const std::string& x, int rank, const std::string& hint) {
  std::vector<int64_t> axes;
  for(int a = 0; a < rank; ++a)
    if(a != 1) axes.push_back(a);
  std::string y = c.fresh(hint);
  if(c.opset() >= 18) c.emit("ReduceMean", {x, c.intsConst(axes, hint + "_axes")}, {y});
  else c.emit("ReduceMean", {x}, {y}, {{"axes", AttrValue(IntList(axes.begin(), axes.end()))}});
  return y;
}

}  // namespace

ONYX_OP(kBatchMomentsGrad, "batch_moments_grad");
ONYX_OP(kBatchNormGradSums, "batch_norm_grad_sums");

// m = [mean of x over all axes but 1; population variance of the same]
ONYX_OP(kBatchMoments, "batch_moments")
    .doc("m [2, C] = [mean; population variance] of x [N, C, ...] over every axis but 1 (a training batch norm's "
         "statistics)")
    .inputs(1)
    .infer([](InferCtx& c) {
      checkFloat3264(c);
      checkPlanes(c, c.shapeOf(0));
      c.shape = Shape({2, c.shapeOf(0)[1]});
    })
    .cpu(floatOrDouble<momentsKernel<float>, momentsKernel<double>>)
    .backward([](GradCtx& g) { g.add(0, g.graph.make(kBatchMomentsGrad, {g.x(0), g.y(), g.dy}, {})); })
    .onnxExport(13, [](OnnxExportCtx& c) {
      // ReduceMean(x), ReduceMean((x - mean)^2), each reshaped to [1, C], concatenated.
      const int rank = c.inputShape(0).rank();
      const int64_t C = c.inputShape(0)[1];
      std::string x = c.input(0);
      std::string mean = exportChannelMean(c, x, rank, "mean");
      std::string d = c.fresh("centered"), sq = c.fresh("squares");
      c.emit("Sub", {x, mean}, {d});
      c.emit("Mul", {d, d}, {sq});
      std::string var = exportChannelMean(c, sq, rank, "var");
      // Shapes named as reshape's exporter names them (<output>/shape), so
      // that a second export writes the same file.
      std::string m1 = c.fresh("mean_row"), v1 = c.fresh("var_row");
      c.emit("Reshape", {mean, c.intsConst({1, C}, "mean_row/shape")}, {m1});
      c.emit("Reshape", {var, c.intsConst({1, C}, "var_row/shape")}, {v1});
      c.emit("Concat", {m1, v1}, {c.output()}, {{"axis", int64_t(0)}});
    });

// dx = (dm[0, c] + 2 dm[1, c] (x - m[0, c])) / count [+ dy * f[c]]
[[maybe_unused]] static OpDef& kBatchMomentsGradDef = kBatchMomentsGrad
    .doc("dx = (dm[0, c] + 2 dm[1, c] (x - m[0, c])) / count: the gradient of batch_moments (count = elements per "
         "channel); with inputs dy (x's shape) and f (C values), dy * f[c] + that (a training batch norm's whole dx, "
         "GradCtx::add folds batch_normalize's part in)")
    .inputs(3, 5)
    .infer([](InferCtx& c) {
      checkFloat3264(c);
      const Shape& xs = c.shapeOf(0);
      checkPlanes(c, xs);
      checkPerChannel(c, 1, Shape({2, xs[1]}), "m");
      checkPerChannel(c, 2, Shape({2, xs[1]}), "dm");
      c.check(c.n() == 3 || c.n() == 5, c.n(), " inputs; batch_moments_grad takes x, m, dm and optionally dy, f");
      if(c.n() == 5) {
        c.check(c.shapeOf(3) == xs, "dy must have x's shape ", xs, ", got ", c.shapeOf(3));
        c.check(c.shapeOf(4).elements() == xs[1], "f must hold one value per channel (", xs[1], "), got shape ",
                c.shapeOf(4));  // (their type: checkFloat3264's common type)
      }
      c.shape = xs;
    })
    .cpu(floatOrDouble<momentsGradKernel<float>, momentsGradKernel<double>>)
    .notDifferentiable("internal: the gradient of batch_moments")
    .noOnnx("internal: the gradient of batch_moments");

// s = [sum of dy; sum of dy * (x - mean)] per channel
[[maybe_unused]] static OpDef& kBatchNormGradSumsDef = kBatchNormGradSums
    .doc("s [2, C] = [sum of dy; sum of dy * (x - mean[c])] over every axis but 1 (batch_normalize's gradient)")
    .inputs(3)
    .infer([](InferCtx& c) {
      checkFloat3264(c);
      const Shape& xs = c.shapeOf(1);
      checkPlanes(c, xs);
      c.check(c.shapeOf(0) == xs, "dy must have x's shape ", xs, ", got ", c.shapeOf(0));
      checkPerChannel(c, 2, Shape({xs[1]}), "mean");
      c.shape = Shape({2, xs[1]});
    })
    .cpu(floatOrDouble<gradSumsKernel<float>, gradSumsKernel<double>>)
    .notDifferentiable("internal: part of the gradient of batch_normalize")
    .noOnnx("internal: part of the gradient of batch_normalize");

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]
//
// BatchNormalization's inputs, with eps a scalar input rather than an
// attribute: exported, the op is ONNX element-wise ops, whose epsilon is a
// constant either way, and a constant of the graph keeps its place on a
// second export (the file stays the same).
ONYX_OP(kBatchNormalize, "batch_normalize")
    .doc("y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c] for x [N, C, ...], per-channel mean, var, "
         "scale, bias [C] and a scalar eps (a training batch norm with the rows of batch_moments(x))")
    .inputs(6)
    .infer([](InferCtx& c) {
      checkFloat3264(c);
      const Shape& xs = c.shapeOf(0);
      checkPlanes(c, xs);
      const char* names[] = {"mean", "var", "scale", "bias"};
      for(size_t i = 1; i <= 4; ++i) checkPerChannel(c, i, Shape({xs[1]}), names[i - 1]);
      checkPerChannel(c, 5, Shape(), "eps");
      c.shape = xs;
    })
    .cpu(floatOrDouble<normalizeKernel<float>, normalizeKernel<double>>)
    // With r = 1 / sqrt(var + eps), s0 = sum dy, s1 = sum dy (x - mean) per channel:
    //   dx = dy * scale r (m held), dscale = s1 r, dbias = s0,
    //   dmean = -scale r s0, dvar = -scale r^3 s1 / 2.
    .backward([](GradCtx& g) {
      Expr x = g.x(0), mean = g.x(1), scale = g.x(3);
      const Shape& xs = x->shape();
      Expr r = 1.0 / sqrt(g.x(2) + g.x(5));
      Expr sr = scale * r;
      if(g.needs(0)) g.add(0, g.dy * norm::perChannel(sr, xs));
      if(!g.needs(1) && !g.needs(2) && !g.needs(3) && !g.needs(4) && !g.needs(5)) return;
      Expr s = g.graph.make(kBatchNormGradSums, {g.dy, x, mean}, {});
      Expr s0 = row(s, 0), s1 = row(s, 1);
      Expr dvar = sr * r * r * s1 * -0.5;
      if(g.needs(1)) g.add(1, -(sr * s0));
      if(g.needs(2)) g.add(2, dvar);
      if(g.needs(3)) g.add(3, s1 * r);
      if(g.needs(4)) g.add(4, s0);
      if(g.needs(5)) g.add(5, sum(dvar));
    })
    // The kernel's arithmetic as ONNX element-wise ops (f = scale / sqrt(var
    // + eps), t = bias - mean * f, y = x * f + t): they import back to ops
    // that compute the same bits and export again to the same nodes (a
    // BatchNormalization would import as channel_affine, another form).
    .onnxExport(13, [](OnnxExportCtx& c) {
      const Shape& xs = c.inputShape(0);
      std::string mean = c.input(1), var = c.input(2);
      std::string ve = c.fresh("var_eps"), sd = c.fresh("std"), f = c.fresh("factor"), mf = c.fresh("mean_factor"),
                  sh = c.fresh("shift");
      c.emit("Add", {var, c.input(5)}, {ve});
      c.emit("Sqrt", {ve}, {sd});
      c.emit("Div", {c.input(3), sd}, {f});
      c.emit("Mul", {mean, f}, {mf});
      c.emit("Sub", {c.input(4), mf}, {sh});
      std::vector<int64_t> pc(static_cast<size_t>(xs.rank() - 1), 1);
      pc[0] = xs[1];
      std::string f1 = c.fresh("factor_c"), sh1 = c.fresh("shift_c"), xf = c.fresh("scaled");
      c.emit("Reshape", {f, c.intsConst(pc, "factor_c/shape")}, {f1});
      c.emit("Reshape", {sh, c.intsConst(pc, "shift_c/shape")}, {sh1});
      c.emit("Mul", {c.input(0), f1}, {xf});
      c.emit("Add", {xf, sh1}, {c.output()});
    });

Expr batch_moments(Expr x) { return x->graph()->make(kBatchMoments, {x}); }
Expr batch_normalize(Expr x, Expr mean, Expr var, Expr scale, Expr bias, double eps) {
  return x->graph()->make(kBatchNormalize, {x, mean, var, scale, bias, x->graph()->scalar(eps, x->value_type())});
}
Expr batch_moments_grad(Expr x, Expr m, Expr dm) { return x->graph()->make(kBatchMomentsGrad, {x, m, dm}); }
Expr batch_norm_grad_sums(Expr dy, Expr x, Expr mean) { return x->graph()->make(kBatchNormGradSums, {dy, x, mean}); }

// ---------------------------------------------------------------- batch norm

Expr batch_norm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps) {
  for(auto [p, what] : {std::pair<Expr, const char*>{scale, "scale"}, {bias, "bias"}, {mean, "mean"}, {var, "var"}})
    checkChannelParam(x, p, "batch_norm", what);
  return norm::channelNorm(x, scale, bias, mean, var, eps);
}

BatchNormResult batch_norm_train(Expr x, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "batch_norm_train", "scale");
  checkChannelParam(x, bias, "batch_norm_train", "bias");
  const Shape& s = x->shape();
  BatchNormResult b = norm::normalizeByBatch(x, norm::axesExcept1(s.rank()), norm::perChannel(scale, s),
                                             norm::perChannel(bias, s), eps);
  return {b.y, reshape(b.mean, std::vector<int64_t>{s.dims()[1]}), reshape(b.var, std::vector<int64_t>{s.dims()[1]})};
}

// ------------------------------------------------------------- instance norm

Expr instance_norm(Expr x, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "instance_norm", "scale");
  checkChannelParam(x, bias, "instance_norm", "bias");
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() >= 3, "instance_norm: x must have shape [N, C, d1, ...] with spatial dims, got ", s);
  return layer_norm(x, 2, eps) * norm::perChannel(scale, s) + norm::perChannel(bias, s);
}

// ---------------------------------------------------------------- group norm

Expr group_norm(Expr x, int64_t groups, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "group_norm", "scale");
  checkChannelParam(x, bias, "group_norm", "bias");
  const Shape& s = x->shape();
  const int64_t C = s.dims()[1];
  ONYX_CHECK(groups >= 1 && C % groups == 0, "group_norm: ", C, " channels do not split into ", groups, " groups");
  Expr g = reshape(x, std::vector<int64_t>{s.dims()[0], groups, -1});
  Expr y = reshape(layer_norm(g, 2, eps), s);
  return y * norm::perChannel(scale, s) + norm::perChannel(bias, s);
}

// ------------------------------------------------------------------ rms norm

Expr rms_norm(Expr x, Expr scale, int axis, double eps) {
  const int r = x->shape().rank();
  ONYX_CHECK(r >= 1 && axis >= -r && axis < r, "rms_norm: axis ", axis, " is out of range for x of shape ",
             x->shape());
  if(axis < 0) axis += r;
  return x / sqrt(mean(x * x, axesFrom(axis, r), true) + eps) * scale;
}

// ----------------------------------------------------------- lp normalisation

Expr lp_normalize(Expr x, int axis, int p) {
  ONYX_CHECK(p == 1 || p == 2, "lp_normalize: p must be 1 or 2, got ", p);
  const int r = x->shape().rank();
  ONYX_CHECK(r >= 1 && axis >= -r && axis < r, "lp_normalize: axis ", axis, " is out of range for x of shape ",
             x->shape());
  // A line of zeros stays zeros (ONNX's reference), not 0/0.
  Expr n = p == 2 ? l2_norm(x, axis) : sum(abs(x), axis);
  return x / where(eq(n, 0.0), 1.0, n);
}

// --------------------------------------------------- mean-variance normalisation

Expr mean_variance_norm(Expr x, const std::vector<int>& axes) {
  Expr xc = x - mean(x, axes, true);
  return xc / (sqrt(mean(xc * xc, axes, true)) + 1e-9);
}

// ----------------------------------------------------------------------- lrn

Expr lrn(Expr x, int64_t size, double alpha, double beta, double bias) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() >= 2, "lrn: x must have shape [N, C, ...], got ", s);
  ONYX_CHECK(size >= 1, "lrn: size must be >= 1, got ", size);
  // The window sum over channels [c - (size-1)/2, c + size/2] is a padded
  // average pool over a [N, 1, C, rest] view of the squares (padding counted
  // in the divisor, so the mean is sum / size): one node and one kernel loop
  // for any size (unrolled into `size` slices, size = 1e6 built 2M nodes).
  const int64_t N = s.dims()[0], C = s.dims()[1], rest = s.elements() / std::max<int64_t>(1, N * C);
  Expr sq = reshape(x * x, Shape{N, 1, C, rest});
  PoolOptions o;
  o.pads = {(size - 1) / 2, 0, size / 2, 0};
  o.countIncludePad = true;
  Expr mean = reshape(average_pool(sq, {size, 1}, o), s);
  return x * pow(mean * alpha + bias, -beta);
}

}  // namespace onyx
