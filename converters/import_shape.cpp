// ONNX shape, layout and constant ops with no registry op of their own
// (Concat-1, Shape, Size, Squeeze, Unsqueeze, Split, Tile, Constant,
// ConstantOfShape, Range, DepthToSpace, SpaceToDepth, EyeLike,
// ReverseSequence, CenterCropPad), as the functions of src/ops/shape.h.
// Inputs that set the output's shape are read now (c.ints, c.value).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

// Opsets 1-3: the axis is optional and defaults to 1.
ONYX_ONNX_IMPORT(kConcatV1, "Concat", 1).untilOpset(3).importer([](OnnxImportCtx& c) {
  std::vector<Expr> xs;
  for(size_t i = 0; i < c.numInputs(); ++i) xs.push_back(c.input(i));
  c.check(!xs.empty(), "needs at least one input");
  c.setOutput(0, concat(xs, static_cast<int>(c.attrInt("axis", 1))));
});

// ---------------------------------------------------------------- ONNX imports

namespace {

std::vector<int64_t> optionalInts(OnnxImportCtx& c, size_t i) {
  if(c.numInputs() > i && c.hasInput(i)) return c.ints(i);
  return {};
}

// A 1-D int64 tensor with the given values.
Tensor int64Vector(const std::vector<int64_t>& v) {
  return TensorBase::fromVector(Shape{static_cast<int64_t>(v.size())}, v);
}

}  // namespace

// The input's static shape (dims start..end-1 from opset 15) as a constant:
// it does not depend on the input's values.
ONYX_ONNX_IMPORT(kOnnxShape, "Shape", 1).importer([](OnnxImportCtx& c) {
  const Shape& s = c.input(0)->shape();
  int64_t r = s.rank();
  auto clampAxis = [r](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r); };
  int64_t start = clampAxis(c.attrInt("start", 0)), end = clampAxis(c.attrInt("end", r));
  std::vector<int64_t> d;
  for(int64_t k = start; k < end; ++k) d.push_back(s.dims()[static_cast<size_t>(k)]);
  c.setOutput(0, c.constant(int64Vector(d)));
});

ONYX_ONNX_IMPORT(kOnnxSize, "Size", 1).importer([](OnnxImportCtx& c) {
  int64_t n = c.input(0)->shape().elements();
  c.setOutput(0, c.constant(TensorBase::fromVector(Shape{}, std::vector<int64_t>{n})));
});

// Axes: an attribute up to opset 12, input 1 from 13.
ONYX_ONNX_IMPORT(kOnnxSqueeze, "Squeeze", 1).importer([](OnnxImportCtx& c) {
  std::vector<int64_t> axes = c.hasAttr("axes") ? c.attrInts("axes") : optionalInts(c, 1);
  c.setOutput(0, squeeze(c.input(0), axes));
});

ONYX_ONNX_IMPORT(kOnnxUnsqueeze, "Unsqueeze", 1).importer([](OnnxImportCtx& c) {
  std::vector<int64_t> axes = c.hasAttr("axes") ? c.attrInts("axes") : optionalInts(c, 1);
  c.check(!axes.empty(), "axes are required");
  c.setOutput(0, unsqueeze(c.input(0), axes));
});

// Sizes: attribute split (1-12) or input 1 (1, 13+); without them, equal
// parts, one per output, or from opset 18 num_outputs parts of
// ceil(dim / num_outputs) with a smaller last one.
ONYX_ONNX_IMPORT(kOnnxSplit, "Split", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int r = x->shape().rank();
  int64_t axis0 = c.attrInt("axis", 0);
  int axis = c.axis(axis0, r);
  int64_t n = x->shape()[axis];
  size_t outs = c.numOutputs();
  std::vector<int64_t> sizes = optionalInts(c, 1);
  if(sizes.empty() && c.hasAttr("split")) sizes = c.attrInts("split");
  if(sizes.empty()) {
    if(c.hasAttr("num_outputs")) {
      int64_t parts = c.attrInt("num_outputs");
      c.check(parts >= 1, "num_outputs ", parts, " must be positive");
      c.check(static_cast<size_t>(parts) == outs, "num_outputs is ", parts, " but the node has ", outs, " outputs");
      c.check(parts <= n, "num_outputs ", parts, " is more than the ", n, " elements of axis ", axis,
              " (onnxruntime rejects it too; the parts would be empty)");
      int64_t chunk = (n + parts - 1) / parts, left = n;
      for(int64_t i = 0; i < parts; ++i) {
        sizes.push_back(std::min(chunk, left));
        left -= sizes.back();
      }
    } else {
      int64_t parts = static_cast<int64_t>(outs);
      c.check(parts >= 1 && n % parts == 0, "axis ", axis, " of size ", n, " does not split into ", parts,
              " equal parts");
      sizes.assign(outs, n / parts);
    }
  }
  c.check(sizes.size() == outs, "split ", attrToString(attr(sizes)), " has ", sizes.size(), " entries but the node has ",
          outs, " outputs");
  std::vector<Expr> parts = split(x, axis, sizes);
  for(size_t i = 0; i < outs; ++i)
    if(c.wantsOutput(i)) c.setOutput(i, parts[i]);
});

// Repeats from input 1 (opset 6+); opsets 1-5 take a count and an axis.
ONYX_ONNX_IMPORT(kOnnxTile, "Tile", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  std::vector<int64_t> reps;
  if(c.opset() < 6) {
    int r = x->shape().rank();
    int64_t tiles = c.intScalar(1), axis = c.intScalar(2);
    reps.assign(static_cast<size_t>(r), 1);
    reps[static_cast<size_t>(c.axis(axis, r))] = tiles;
  } else {
    reps = c.ints(1);
  }
  c.setOutput(0, tile(x, reps));
});

ONYX_ONNX_IMPORT(kOnnxConstant, "Constant", 1).importer([](OnnxImportCtx& c) {
  Tensor t;
  if(c.hasAttr("value")) {
    t = c.attrTensor("value");
  } else if(c.hasAttr("value_float")) {
    t = TensorBase::fromVector(Shape{}, std::vector<float>{static_cast<float>(c.attrFloat("value_float"))});
  } else if(c.hasAttr("value_floats")) {
    std::vector<double> v = c.attrFloats("value_floats");
    t = TensorBase::fromVector(Shape{static_cast<int64_t>(v.size())}, std::vector<float>(v.begin(), v.end()));
  } else if(c.hasAttr("value_int")) {
    t = TensorBase::fromVector(Shape{}, std::vector<int64_t>{c.attrInt("value_int")});
  } else if(c.hasAttr("value_ints")) {
    t = int64Vector(c.attrInts("value_ints"));
  } else if(c.hasAttr("value_string") || c.hasAttr("value_strings")) {
    std::vector<std::string> v;
    Shape s;
    if(c.hasAttr("value_string")) {
      v.push_back(c.attrString("value_string"));
    } else {
      v = c.attrStrings("value_strings");
      s = Shape{static_cast<int64_t>(v.size())};
    }
    t = TensorBase::create(s, Type::string);
    t->strings() = v;
  } else if(c.hasAttr("sparse_value")) {
    c.fail("sparse_value is not supported (store the constant densely in 'value')");
  } else {
    c.fail("has none of the value attributes");
  }
  c.setOutput(0, c.constant(t));
});

// Input 0 is the shape; attribute value a one-element tensor (default float 0).
ONYX_ONNX_IMPORT(kOnnxConstantOfShape, "ConstantOfShape", 9).importer([](OnnxImportCtx& c) {
  std::vector<int64_t> s = c.ints(0);
  for(auto d : s) c.check(d >= 0, "shape ", attrToString(attr(s)), " has a negative dimension");
  Tensor v = c.hasAttr("value") ? c.attrTensor("value") : TensorBase::fromVector(Shape{1}, std::vector<float>{0.f});
  c.check(v->size() == 1, "value must hold one element, got shape ", v->shape());
  int bits = typeBits(v->type());
  c.check(bits > 0 && bits % 8 == 0, "value of type ", v->type(), " is not supported");
  Tensor t = TensorBase::create(Shape(s), v->type());
  size_t e = static_cast<size_t>(bits / 8);
  char* dst = static_cast<char*>(t->raw());
  for(int64_t i = 0; i < t->size(); ++i) std::memcpy(dst + static_cast<size_t>(i) * e, v->raw(), e);
  c.setOutput(0, c.constant(t));
});

// start, start + delta, ... up to (not including) limit, in the inputs' type.
ONYX_ONNX_IMPORT(kOnnxRange, "Range", 11).importer([](OnnxImportCtx& c) {
  Tensor ts = c.value(0), tl = c.value(1), td = c.value(2);
  Type type = ts->type();
  c.check(tl->type() == type && td->type() == type, "start, limit and delta must have one type, got ", type, ", ",
          tl->type(), ", ", td->type());
  c.check(ts->size() == 1 && tl->size() == 1 && td->size() == 1, "start, limit and delta must be scalars");
  Tensor t;
  // The element count must fit an int64 along with the bytes it takes (the
  // allocation's limits are the allocator's).
  const double maxElements = static_cast<double>(INT64_MAX) / static_cast<double>(std::max<size_t>(1, typeBytes(type, 1)));
  if(isInt(type)) {
    // Read exactly (ints()): through double, INT64_MAX became INT64_MIN.
    int64_t s = c.ints(0).at(0), l = c.ints(1).at(0), d = c.ints(2).at(0);
    c.check(d != 0, "delta must not be 0");
    // In 128 bits: limit - start spans up to 2^64 (it overflowed int64, and
    // the full int64 range came out empty).
    using Wide = __int128;
    Wide span = static_cast<Wide>(l) - static_cast<Wide>(s), wd = d;
    Wide wn = 0;
    if(d > 0 && span > 0) wn = (span + wd - 1) / wd;
    if(d < 0 && span < 0) wn = (-span - wd - 1) / -wd;
    c.check(static_cast<double>(wn) <= maxElements, "Range(", s, ", ", l, ", ", d, ") would have ",
            static_cast<double>(wn), " elements: too many for one tensor");
    int64_t n = static_cast<int64_t>(wn);
    t = TensorBase::create(Shape{n}, type);  // first: the shape and memory limits apply before the fill
    std::vector<int64_t> v(static_cast<size_t>(n));
    for(int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int64_t>(s + static_cast<Wide>(i) * wd);
    t->set(v);
  } else {
    double s = ts->getAsDouble(0), l = tl->getAsDouble(0), d = td->getAsDouble(0);
    c.check(d != 0 && std::isfinite(s) && std::isfinite(l) && std::isfinite(d),
            "start, limit and delta must be finite and delta nonzero");
    // Checked before the conversion: a delta of 1e-30 made the count's
    // conversion to int64 undefined (it came out empty).
    double q = std::ceil((l - s) / d);
    c.check(q <= maxElements, "Range(", s, ", ", l, ", ", d, ") would have ", q, " elements: too many for one tensor");
    // Not converted below 0 either: a count of -1e25 (or -inf, when
    // limit - start overflows) is no int64.
    int64_t n = q > 0 ? static_cast<int64_t>(q) : 0;
    t = TensorBase::create(Shape{n}, type);  // first: the shape and memory limits apply before the fill
    std::vector<double> v(static_cast<size_t>(n));
    for(int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = s + static_cast<double>(i) * d;
    t->set(v);
  }
  c.setOutput(0, c.constant(t));
});

ONYX_ONNX_IMPORT(kOnnxDepthToSpace, "DepthToSpace", 1).importer([](OnnxImportCtx& c) {
  c.setOutput(0, depth_to_space(c.input(0), c.attrInt("blocksize"), c.attrString("mode", "DCR")));
});

ONYX_ONNX_IMPORT(kOnnxSpaceToDepth, "SpaceToDepth", 1).importer([](OnnxImportCtx& c) {
  c.setOutput(0, space_to_depth(c.input(0), c.attrInt("blocksize"), c.attrString("mode", "DCR")));
});

// Ones on diagonal k of a 2-D shape like the input's (the input's values are
// not used), in dtype or the input's type.
ONYX_ONNX_IMPORT(kOnnxEyeLike, "EyeLike", 9).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  const Shape& s = x->shape();
  c.check(s.rank() == 2, "needs a 2-D input, got ", s);
  Type type = x->value_type();
  if(c.hasAttr("dtype")) type = static_cast<Type>(c.attrInt("dtype"));
  int bits = typeBits(type);
  c.check(bits > 0 && bits % 8 == 0 && isComputeType(type), "dtype ", type, " is not supported");
  int64_t k = c.attrInt("k", 0), n = s[0], m = s[1];
  Tensor t = TensorBase::create(s, type);
  if(t->bytes() > 0) std::memset(t->raw(), 0, t->bytes());
  if(k < m && k > -n)  // else the diagonal misses the matrix (k may be INT64_MAX)
    for(int64_t i = 0; i < n; ++i)
      if(i + k >= 0 && i + k < m) t->setFromDouble(i * m + i + k, 1.0);
  c.setOutput(0, c.constant(t));
});

ONYX_ONNX_IMPORT(kOnnxReverseSequence, "ReverseSequence", 10).importer([](OnnxImportCtx& c) {
  c.setOutput(0, reverse_sequence(c.input(0), c.ints(1), static_cast<int>(c.attrInt("batch_axis", 1)),
                                  static_cast<int>(c.attrInt("time_axis", 0))));
});

// Per axis: crop a centred window (start rounded down) or pad with zeros
// (the smaller half before).
ONYX_ONNX_IMPORT(kOnnxCenterCropPad, "CenterCropPad", 18).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int r = x->shape().rank();
  std::vector<int64_t> target = c.ints(1), axes = c.attrInts("axes");
  if(axes.empty())
    for(int k = 0; k < r; ++k) axes.push_back(k);
  c.check(target.size() == axes.size(), "shape ", attrToString(attr(target)), " must have one entry per axis (",
          axes.size(), ")");
  std::vector<int64_t> starts, ends, sliceAxes, pads(static_cast<size_t>(2 * r), 0);
  bool padded = false;
  for(size_t i = 0; i < axes.size(); ++i) {
    int a = c.axis(axes[i], r);
    int64_t d = x->shape()[a], t = target[i];
    c.check(t >= 0, "shape ", attrToString(attr(target)), " has a negative dimension");
    if(t < d) {
      sliceAxes.push_back(a);
      starts.push_back((d - t) / 2);
      ends.push_back((d - t) / 2 + t);
    } else if(t > d) {
      pads[static_cast<size_t>(a)] = (t - d) / 2;
      pads[static_cast<size_t>(a + r)] = t - d - (t - d) / 2;
      padded = true;
    }
  }
  Expr y = x;
  if(!starts.empty()) y = slice(y, starts, ends, sliceAxes);
  if(padded) y = pad(y, pads);
  c.setOutput(0, y);
});

}  // namespace onyx
