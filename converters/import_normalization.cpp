// ONNX normalisation ops as composites of the normalisation layers of
// src/ops/norm.cpp (BatchNormalization, InstanceNormalization,
// GroupNormalization, RMSNormalization, LpNormalization,
// MeanVarianceNormalization, LRN).
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/norm.h>
#include <onyx/ops/shape.h>

namespace onyx {

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
  auto pc = [&](Expr p) { return norm::perChannel(p, s, spatial); };
  if(!training && !c.training()) {
    c.setOutput(0, spatial ? norm::channelNorm(x, scale, bias, rmean, rvar, eps)
                           : norm::affineNorm(x, pc(scale), pc(bias), pc(rmean), pc(rvar), eps));
    for(size_t i = 1; i < c.numOutputs(); ++i) c.check(!c.wantsOutput(i), "output ", i, " needs training mode");
    return;
  }
  std::vector<int> axes = spatial ? norm::axesExcept1(s.rank()) : std::vector<int>{0};
  int64_t count = 1;
  for(int a : axes) count *= s.dims()[static_cast<size_t>(a)];
  BatchNormResult b = norm::normalizeByBatch(x, axes, pc(scale), pc(bias), eps);
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

ONYX_ONNX_IMPORT(kOnnxInstanceNorm, "InstanceNormalization", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 3, "input must have shape [N, C, d1, ...], got ", x->shape());
  c.setOutput(0, instance_norm(x, c.input(1), c.input(2), c.attrFloat("epsilon", 1e-5)));
});

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

ONYX_ONNX_IMPORT(kOnnxRmsNorm, "RMSNormalization", 23).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t axis = c.attrInt("axis", -1);
  double eps = c.attrFloat("epsilon", 1e-5);
  c.attrInt("stash_type", 1);
  const int r = x->shape().rank();
  c.check(axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
  c.setOutput(0, rms_norm(x, c.input(1), static_cast<int>(axis), eps));
});

ONYX_ONNX_IMPORT(kOnnxLpNorm, "LpNormalization", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t axis = c.attrInt("axis", -1), p = c.attrInt("p", 2);
  const int r = x->shape().rank();
  c.check(p == 1 || p == 2, "p must be 1 or 2, got ", p);
  c.check(r >= 1 && axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
  c.setOutput(0, lp_normalize(x, static_cast<int>(axis), static_cast<int>(p)));
});

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

ONYX_ONNX_IMPORT(kOnnxLrn, "LRN", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 2, "X must have shape [N, C, ...], got ", x->shape());
  int64_t size = c.attrInt("size");
  c.check(size >= 1, "size must be >= 1, got ", size);
  c.setOutput(0, lrn(x, size, c.attrFloat("alpha", 1e-4), c.attrFloat("beta", 0.75), c.attrFloat("bias", 1.0)));
});

}  // namespace onyx
