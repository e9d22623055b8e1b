// ONNX indexing ops with no registry op of their own, as the functions of
// src/ops/indexing.cpp: Scatter (opsets 9-10), TopK, OneHot, NonZero,
// Compress, Unique and TensorScatter.
#include <cmath>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/shape.h>

namespace onyx {

// ONNX Scatter (deprecated in opset 11 for ScatterElements, which it equals).
ONYX_ONNX_IMPORT(kOnnxScatter, "Scatter", 9).untilOpset(10).importer([](OnnxImportCtx& c) {
  c.setOutput(0, scatter_elements(c.input(0), static_cast<int>(c.attrInt("axis", 0)), c.input(1), c.input(2)));
});

// TopK: k is an attribute up to opset 9 and input 1 from 10; largest and
// sorted come with 11 (the result is always sorted, a valid order for
// sorted=0 too).
ONYX_ONNX_IMPORT(kOnnxTopK, "TopK", 1).importer([](OnnxImportCtx& c) {
  int64_t k;
  if(c.opset() < 10) {
    k = c.attrInt("k");
  } else {
    std::vector<int64_t> kv = c.ints(1);
    c.check(kv.size() == 1, "k (input 1) must hold one value, got ", kv.size());
    k = kv[0];
  }
  bool largest = true;
  if(c.opset() >= 11) {
    largest = c.attrInt("largest", 1) != 0;
    c.attrInt("sorted", 1);
  }
  auto r = topk(c.input(0), k, static_cast<int>(c.attrInt("axis", -1)), largest);
  c.setOutput(0, r.first);
  if(c.numOutputs() > 1) c.setOutput(1, r.second);
});

// OneHot: indices, depth (one value), values [off, on]; axis (default -1).
ONYX_ONNX_IMPORT(kOnnxOneHot, "OneHot", 9).importer([](OnnxImportCtx& c) {
  int64_t depth = c.intScalar(1);
  c.check(depth >= 0, "depth (input 1) is ", depth, " but must be >= 0");
  c.setOutput(0, one_hot(c.input(0), depth, c.input(2), static_cast<int>(c.attrInt("axis", -1))));
});

ONYX_ONNX_IMPORT(kOnnxNonZero, "NonZero", 9).importer([](OnnxImportCtx& c) {
  c.setOutput(0, nonzero(c.graph(), c.value(0)));
});

// Compress: condition (input 1, 1-D bool) is read now; no axis: flattened.
ONYX_ONNX_IMPORT(kOnnxCompress, "Compress", 9).importer([](OnnxImportCtx& c) {
  Tensor cond = c.value(1);
  c.check(cond->shape().rank() == 1, "condition (input 1) must be 1-D, got shape ", cond->shape());
  std::vector<bool> keep;
  for(int64_t i = 0; i < cond->size(); ++i) keep.push_back(cond->getAsDouble(i) != 0);
  if(c.hasAttr("axis"))
    c.setOutput(0, compress(c.input(0), keep, static_cast<int>(c.attrInt("axis", 0))));
  else
    c.setOutput(0, compress(c.input(0), keep));
});

// Unique: x's data is read now; outputs Y, indices, inverse_indices, counts.
ONYX_ONNX_IMPORT(kOnnxUnique, "Unique", 11).importer([](OnnxImportCtx& c) {
  bool sorted = c.attrInt("sorted", 1) != 0;
  bool hasAxis = c.hasAttr("axis");
  int axis = hasAxis ? static_cast<int>(c.attrInt("axis", 0)) : 0;
  UniqueResult r = unique(c.input(0), c.value(0), hasAxis, axis, sorted);
  Expr outs[4] = {r.values, r.indices, r.inverse, r.counts};
  for(size_t i = 0; i < c.numOutputs() && i < 4; ++i) c.setOutput(i, outs[i]);
});

// TensorScatter (opset 24): present = past_cache with update written along
// `axis` (default -2, never the batch axis 0) at positions write_indices[b] +
// s for the s-th update entry of batch b (modulo the axis length in
// circular mode; linear mode needs them in range). write_indices defaults
// to zeros. Built as scatter_elements, so gradients reach past and update.
ONYX_ONNX_IMPORT(kOnnxTensorScatter, "TensorScatter", 24).importer([](OnnxImportCtx& c) {
  Expr past = c.input(0), update = c.input(1);
  std::string mode = c.attrString("mode", "linear");
  int64_t axisAttr = c.attrInt("axis", -2);
  c.check(mode == "linear" || mode == "circular", "mode must be linear or circular, got '", mode, "'");
  const Shape& ps = past->shape();
  const Shape& us = update->shape();
  const int r = ps.rank();
  c.check(r >= 2 && us.rank() == r, "past_cache (", ps, ") and update (", us, ") need the same rank, at least 2");
  const int axis = c.axis(axisAttr, r);
  c.check(axis != 0, "axis is the batch axis 0");
  for(int i = 0; i < r; ++i)
    c.check(i == axis || ps[i] == us[i], "update's shape ", us, " differs from past_cache's ", ps,
            " outside the sequence axis ", axis);
  const int64_t maxSeq = ps[axis], seq = us[axis];
  c.check(seq <= maxSeq, "update has ", seq, " entries on the sequence axis but the cache only ", maxSeq);
  // Positions along the sequence axis: s, shaped to broadcast over the rest.
  std::vector<int64_t> posShape(static_cast<size_t>(r), 1);
  posShape[static_cast<size_t>(axis)] = seq;
  std::vector<int64_t> pos(static_cast<size_t>(seq));
  for(int64_t s = 0; s < seq; ++s) pos[static_cast<size_t>(s)] = s;
  Expr idx = c.constant(TensorBase::fromVector(Shape(posShape), pos));
  if(c.numInputs() > 2 && c.hasInput(2)) {
    Expr wi = c.input(2);
    c.check(wi->shape().rank() == 1 && wi->shape()[0] == ps[0], "write_indices has shape ", wi->shape(),
            "; it must be [batch] = [", ps[0], "]");
    if(wi->value_type() != Type::int64) wi = cast(wi, Type::int64);
    std::vector<int64_t> ws(static_cast<size_t>(r), 1);
    ws[0] = ps[0];
    idx = reshape(wi, ws) + idx;
  }
  if(mode == "circular") idx = mod(idx, c.graph().scalar(static_cast<double>(maxSeq), Type::int64));
  idx = expand(idx, us);
  c.setOutput(0, scatter_elements(past, axis, idx, update));
});

}  // namespace onyx
