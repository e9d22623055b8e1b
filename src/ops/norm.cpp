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

#include <onyx/backend/cpu/parallel.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/ops/elementwise.h>
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
  Expr mu = mean(x, axes, true);
  Expr xc = x - mu;
  Expr var = mean(xc * xc, axes, true);
  return {xc * (scale / sqrt(var + eps)) + bias, mu, var};
}

}  // namespace norm

// ------------------------------------------------------------ channel affine

namespace {

template <class T>
void channelAffineKernel(KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const int64_t C = xs[1], inner = xs.elements() / std::max<int64_t>(1, xs[0] * C), planes = xs[0] * C;
  const T *x = c.in[0]->data<T>(), *s = c.in[1]->data<T>(), *t = c.in[2]->data<T>();
  T* y = c.out.data<T>();
  host::parallelFor(planes, planes * inner, [&](int64_t lo, int64_t hi) {
    for(int64_t p = lo; p < hi; ++p) {
      const T sc = s[p % C], sh = t[p % C];
      const T* xp = x + p * inner;
      T* yp = y + p * inner;
      for(int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * sc + sh;
    }
  });
}

}  // namespace

// y[n, c, ...] = x[n, c, ...] * s[c] + t[c]
ONYX_OP(kChannelAffine, "channel_affine")
    .doc("y = x * s[c] + t[c] along axis 1 (c) of x [N, C, ...]: a batch norm with stored statistics in one pass")
    .inputs(3)
    .infer([](InferCtx& c) {
      c.type = c.commonType();
      c.check(c.type == Type::float32 || c.type == Type::float64, "element type ", c.type,
              " is not supported (float32, float64)");
      const Shape& xs = c.shapeOf(0);
      c.check(xs.rank() >= 2, "x must have shape [N, C, ...], got ", xs);
      c.check(c.shapeOf(1) == Shape({xs[1]}) && c.shapeOf(2) == Shape({xs[1]}), "s and t must have shape [", xs[1],
              "]");
      c.shape = xs;
    })
    .cpu([](KernelCtx& c) {
      if(c.out.type() == Type::float32) channelAffineKernel<float>(c);
      else channelAffineKernel<double>(c);
    })
    .gpuOnHost("no GPU form yet: a CPU inference kernel (issue 16); GPU graphs get it from the importer on host copies")
    .backward([](GradCtx& g) {
      Expr x = g.x(0);
      const Shape& xs = x->shape();
      std::vector<int> axes = norm::axesExcept1(xs.rank());
      if(g.needs(0)) g.add(0, g.dy * norm::perChannel(g.x(1), xs));
      if(g.needs(1)) g.add(1, sum(g.dy * x, axes, false));
      if(g.needs(2)) g.add(2, sum(g.dy, axes, false));
    })
    // ONNX's per-channel multiply-add is BatchNormalization with mean 0,
    // variance 1 and epsilon 0: exactly x * s + t, imported back as this op
    // (norm::channelNorm), and what runtimes fold into a preceding Conv.
    .onnxExport(7, [](OnnxExportCtx& c) {
      const int64_t C = c.inputShape(0)[1];
      Tensor zero = TensorBase::create(Shape({C}), c.inputType(0)), one = TensorBase::create(Shape({C}), c.inputType(0));
      zero->set(0.0);
      one->set(1.0);
      c.emit("BatchNormalization",
             {c.input(0), c.input(1), c.input(2), c.constant(zero, "mean"), c.constant(one, "var")}, {c.output()},
             {{"epsilon", 0.0}});
    });

Expr channel_affine(Expr x, Expr s, Expr t) { return x->graph()->make(kChannelAffine, {x, s, t}); }

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
