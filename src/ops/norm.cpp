// Normalisation layers (batch, instance, group, RMS, Lp, mean-variance, LRN)
// and their ONNX imports. All are composites: the heavy lifting is done by
// layer_norm's fused kernel where the statistics are over trailing dims
// (instance and group norm), otherwise by the reductions; the per-channel
// affine part folds into one multiply-add over x.
#include <onyx/ops/norm.h>

#include <string>

#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>

namespace onyx {

namespace {

// p of shape [C] (or [C, d1, ...] when !spatial) viewed so that it
// broadcasts along axis 1 of x: [C, 1, ..., 1] with x's rank - 1 dims.
Expr perChannel(Expr p, const Shape& x, bool spatial = true) {
  if(!spatial) return p;  // [C, d1, ...] already right-aligns with x's dims 1..
  std::vector<int64_t> s(static_cast<size_t>(x.rank() - 1), 1);
  s[0] = p->shape().elements();
  return reshape(p, s);
}

void checkChannelParam(Expr x, Expr p, const char* fn, const char* what) {
  const Shape& xs = x->shape();
  ONYX_CHECK(xs.rank() >= 2, fn, ": x must have shape [N, C, ...], got ", xs);
  ONYX_CHECK(p->shape() == Shape({xs.dims()[1]}), fn, ": ", what, " must have shape [", xs.dims()[1],
             "] (one per channel of x ", xs, "), got ", p->shape());
}

std::vector<int> axesExcept1(int rank) {
  std::vector<int> axes;
  for(int a = 0; a < rank; ++a)
    if(a != 1) axes.push_back(a);
  return axes;
}

std::vector<int> axesFrom(int from, int rank) {
  std::vector<int> axes;
  for(int a = from; a < rank; ++a) axes.push_back(a);
  return axes;
}

// y = (x - mean) / sqrt(var + eps) * scale + bias as x * f + (bias - mean * f)
// with f = scale / sqrt(var + eps) computed on the small parameter tensors.
Expr affineNorm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps) {
  Expr f = scale / sqrt(var + eps);
  return x * f + (bias - mean * f);
}

// Batch normalisation with the batch's statistics over `axes` (kept as size-1
// dims): y = (x - mean) / sqrt(var + eps) * scale + bias, with the population
// variance; scale and bias already broadcast to x.
struct BatchStats {
  Expr y, mean, var;
};
BatchStats normalizeByBatch(Expr x, const std::vector<int>& axes, Expr scale, Expr bias, double eps) {
  Expr mu = mean(x, axes, true);
  Expr xc = x - mu;
  Expr var = mean(xc * xc, axes, true);
  return {xc * (scale / sqrt(var + eps)) + bias, mu, var};
}

}  // namespace

// ---------------------------------------------------------------- batch norm

Expr batch_norm(Expr x, Expr scale, Expr bias, Expr mean, Expr var, double eps) {
  for(auto [p, what] : {std::pair<Expr, const char*>{scale, "scale"}, {bias, "bias"}, {mean, "mean"}, {var, "var"}})
    checkChannelParam(x, p, "batch_norm", what);
  const Shape& s = x->shape();
  return affineNorm(x, perChannel(scale, s), perChannel(bias, s), perChannel(mean, s), perChannel(var, s), eps);
}

BatchNormResult batch_norm_train(Expr x, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "batch_norm_train", "scale");
  checkChannelParam(x, bias, "batch_norm_train", "bias");
  const Shape& s = x->shape();
  BatchStats b = normalizeByBatch(x, axesExcept1(s.rank()), perChannel(scale, s), perChannel(bias, s), eps);
  return {b.y, reshape(b.mean, std::vector<int64_t>{s.dims()[1]}), reshape(b.var, std::vector<int64_t>{s.dims()[1]})};
}

// BatchNormalization, every opset. Inference unless training_mode=1
// (opset 14+) or, before opset 14, the node asks for the training outputs
// (mean, var, saved_mean, saved_var) and is not is_test (opsets < 7).
// Training: batch statistics (population variance) normalise x, and
// running = input * momentum + batch * (1 - momentum). saved_mean/saved_var
// (opsets < 14) are the batch mean and variance. spatial=0 (opsets < 9):
// parameters and statistics per activation [C, d1, ...].
ONYX_ONNX_IMPORT(kOnnxBatchNorm, "BatchNormalization", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), scale = c.input(1), bias = c.input(2);
  // With trainable params (fine-tuning), the running statistics are buffers
  // of their own that training steps update.
  Expr rmean = c.stateInput(3), rvar = c.stateInput(4);
  const Shape& s = x->shape();
  c.check(s.rank() >= 2, "X must have shape [N, C, ...], got ", s);
  double eps = c.attrFloat("epsilon", 1e-5);
  double momentum = c.attrFloat("momentum", 0.9);
  bool spatial = true;
  bool training = false;
  if(c.opset() < 9) spatial = c.attrInt("spatial", 1) != 0;
  if(c.opset() < 6) c.ignoreAttr("consumed_inputs");
  if(c.opset() >= 14) {
    training = c.attrInt("training_mode", 0) != 0;
  } else {
    for(size_t i = 1; i < c.numOutputs(); ++i) training = training || c.wantsOutput(i);
    if(c.opset() < 7 && c.attrInt("is_test", 0) != 0) training = false;
  }
  std::vector<int64_t> pshape = spatial ? std::vector<int64_t>{s.dims()[1]}
                                        : std::vector<int64_t>(s.dims().begin() + 1, s.dims().end());
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  Expr ps[] = {scale, bias, rmean, rvar};
  for(int i = 0; i < 4; ++i)
    c.check(ps[i]->shape() == Shape(pshape), names[i], " must have shape ", Shape(pshape), ", got ", ps[i]->shape());
  auto pc = [&](Expr p) { return perChannel(p, s, spatial); };
  if(!training && !c.training()) {
    c.setOutput(0, affineNorm(x, pc(scale), pc(bias), pc(rmean), pc(rvar), eps));
    for(size_t i = 1; i < c.numOutputs(); ++i) c.check(!c.wantsOutput(i), "output ", i, " needs training mode");
    return;
  }
  std::vector<int> axes = spatial ? axesExcept1(s.rank()) : std::vector<int>{0};
  int64_t count = 1;
  for(int a : axes) count *= s.dims()[static_cast<size_t>(a)];
  BatchStats b = normalizeByBatch(x, axes, pc(scale), pc(bias), eps);
  c.setOutput(0, b.y);
  Expr bm = reshape(b.mean, pshape), bv = reshape(b.var, pshape);
  if(!training) {
    // An inference node in a graph built for a training step (fine-tuning an
    // exported model): the running statistics are updated as PyTorch's
    // train() mode does, with the unbiased batch variance (ONNX's
    // training_mode=1 below uses the population variance).
    c.check(count > 1, "training needs more than one value per channel, got input shape ", s);
    c.updateState(rmean, rmean * momentum + bm * (1 - momentum));
    c.updateState(rvar, rvar * momentum + bv * (double(count) / double(count - 1)) * (1 - momentum));
    for(size_t i = 1; i < c.numOutputs(); ++i) c.check(!c.wantsOutput(i), "output ", i, " needs training mode");
    return;
  }
  auto out = [&](size_t i, Expr e) {
    if(i < c.numOutputs() && c.wantsOutput(i)) c.setOutput(i, e);
  };
  out(1, rmean * momentum + bm * (1 - momentum));
  out(2, rvar * momentum + bv * (1 - momentum));
  out(3, bm);
  out(4, bv);
});

// ------------------------------------------------------------- instance norm

Expr instance_norm(Expr x, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "instance_norm", "scale");
  checkChannelParam(x, bias, "instance_norm", "bias");
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() >= 3, "instance_norm: x must have shape [N, C, d1, ...] with spatial dims, got ", s);
  return layer_norm(x, 2, eps) * perChannel(scale, s) + perChannel(bias, s);
}

ONYX_ONNX_IMPORT(kOnnxInstanceNorm, "InstanceNormalization", 1).importer([](OnnxImportCtx& c) {
  if(c.opset() < 6) c.ignoreAttr("consumed_inputs");
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 3, "input must have shape [N, C, d1, ...], got ", x->shape());
  c.setOutput(0, instance_norm(x, c.input(1), c.input(2), c.attrFloat("epsilon", 1e-5)));
});

// ---------------------------------------------------------------- group norm

Expr group_norm(Expr x, int64_t groups, Expr scale, Expr bias, double eps) {
  checkChannelParam(x, scale, "group_norm", "scale");
  checkChannelParam(x, bias, "group_norm", "bias");
  const Shape& s = x->shape();
  const int64_t C = s.dims()[1];
  ONYX_CHECK(groups >= 1 && C % groups == 0, "group_norm: ", C, " channels do not split into ", groups, " groups");
  Expr g = reshape(x, std::vector<int64_t>{s.dims()[0], groups, -1});
  Expr y = reshape(layer_norm(g, 2, eps), s);
  return y * perChannel(scale, s) + perChannel(bias, s);
}

// Opset 18: scale and bias per group [G]; opset 21: per channel [C]
// (stash_type names the statistics' precision, always high here).
ONYX_ONNX_IMPORT(kOnnxGroupNorm, "GroupNormalization", 18).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), scale = c.input(1), bias = c.input(2);
  const Shape& s = x->shape();
  c.check(s.rank() >= 2, "X must have shape [N, C, ...], got ", s);
  int64_t groups = c.attrInt("num_groups");
  double eps = c.attrFloat("epsilon", 1e-5);
  if(c.opset() >= 21) c.attrInt("stash_type", 1);
  const int64_t C = s.dims()[1];
  c.check(groups >= 1 && C % groups == 0, C, " channels do not split into num_groups = ", groups);
  if(c.opset() < 21) {
    for(Expr* p : {&scale, &bias}) {
      c.check((*p)->shape() == Shape({groups}), "scale and bias must have shape [", groups, "], got ",
              (*p)->shape());
      *p = reshape(expand(reshape(*p, std::vector<int64_t>{groups, 1}), Shape({groups, C / groups})),
                   std::vector<int64_t>{C});
    }
  }
  c.check(scale->shape() == Shape({C}) && bias->shape() == Shape({C}), "scale and bias must have shape [", C, "]");
  c.setOutput(0, group_norm(x, groups, scale, bias, eps));
});

// ------------------------------------------------------------------ rms norm

Expr rms_norm(Expr x, Expr scale, int axis, double eps) {
  const int r = x->shape().rank();
  ONYX_CHECK(r >= 1 && axis >= -r && axis < r, "rms_norm: axis ", axis, " is out of range for x of shape ",
             x->shape());
  if(axis < 0) axis += r;
  return x / sqrt(mean(x * x, axesFrom(axis, r), true) + eps) * scale;
}

ONYX_ONNX_IMPORT(kOnnxRmsNorm, "RMSNormalization", 23).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t axis = c.attrInt("axis", -1);
  double eps = c.attrFloat("epsilon", 1e-5);
  c.attrInt("stash_type", 1);
  const int r = x->shape().rank();
  c.check(axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
  c.setOutput(0, rms_norm(x, c.input(1), static_cast<int>(axis), eps));
});

// ----------------------------------------------------------- lp normalisation

Expr lp_normalize(Expr x, int axis, int p) {
  ONYX_CHECK(p == 1 || p == 2, "lp_normalize: p must be 1 or 2, got ", p);
  const int r = x->shape().rank();
  ONYX_CHECK(r >= 1 && axis >= -r && axis < r, "lp_normalize: axis ", axis, " is out of range for x of shape ",
             x->shape());
  return x / (p == 2 ? l2_norm(x, axis) : sum(abs(x), axis));
}

ONYX_ONNX_IMPORT(kOnnxLpNorm, "LpNormalization", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t axis = c.attrInt("axis", -1), p = c.attrInt("p", 2);
  const int r = x->shape().rank();
  c.check(p == 1 || p == 2, "p must be 1 or 2, got ", p);
  c.check(r >= 1 && axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
  c.setOutput(0, lp_normalize(x, static_cast<int>(axis), static_cast<int>(p)));
});

// --------------------------------------------------- mean-variance normalisation

Expr mean_variance_norm(Expr x, const std::vector<int>& axes) {
  Expr xc = x - mean(x, axes, true);
  return xc / (sqrt(mean(xc * xc, axes, true)) + 1e-9);
}

ONYX_ONNX_IMPORT(kOnnxMvn, "MeanVarianceNormalization", 9).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  std::vector<int64_t> a = c.attrInts("axes", {0, 2, 3});
  const int r = x->shape().rank();
  std::vector<int> axes;
  for(auto v : a) {
    c.check(v >= -r && v < r, "axis ", v, " is out of range for rank ", r);
    axes.push_back(static_cast<int>(v));
  }
  c.setOutput(0, mean_variance_norm(x, axes));
});

// ----------------------------------------------------------------------- lrn

Expr lrn(Expr x, int64_t size, double alpha, double beta, double bias) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() >= 2, "lrn: x must have shape [N, C, ...], got ", s);
  ONYX_CHECK(size >= 1, "lrn: size must be >= 1, got ", size);
  const int64_t C = s.dims()[1];
  // Window [c - (size-1)/2, c + size/2]: zero-pad the squares along the
  // channels and add `size` shifted slices.
  std::vector<int64_t> pads(static_cast<size_t>(2 * s.rank()), 0);
  pads[1] = (size - 1) / 2;
  pads[static_cast<size_t>(s.rank()) + 1] = size / 2;
  Expr sq = pad(x * x, pads);
  Expr acc;
  for(int64_t k = 0; k < size; ++k) {
    Expr part = slice(sq, 1, k, k + C);
    acc = acc ? acc + part : part;
  }
  return x * pow(acc * (alpha / double(size)) + bias, -beta);
}

ONYX_ONNX_IMPORT(kOnnxLrn, "LRN", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 2, "X must have shape [N, C, ...], got ", x->shape());
  int64_t size = c.attrInt("size");
  c.check(size >= 1, "size must be >= 1, got ", size);
  c.setOutput(0, lrn(x, size, c.attrFloat("alpha", 1e-4), c.attrFloat("beta", 0.75), c.attrFloat("bias", 1.0)));
});

}  // namespace onyx
