// More shape ops: trilu (a registry op) and the composites built from the
// ops of shape.cpp (tile, squeeze, unsqueeze, depth_to_space, space_to_depth,
// reverse_sequence), plus the ONNX imports of the shape family that need no
// op of their own: Shape, Size, Squeeze, Unsqueeze, Split, Tile, Constant,
// ConstantOfShape, Range, DepthToSpace, SpaceToDepth, EyeLike,
// ReverseSequence, CenterCropPad.
#include <onyx/ops/shape.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

namespace {

int normAxis2(int64_t axis, int rank, const char* what) {
  ONYX_CHECK(axis >= -rank && axis < rank, what, " ", axis, " is out of range for rank ", rank, " (valid: ", -rank,
             "..", rank - 1, ")");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// The columns [lo, hi) of row i that trilu sets to zero, for rows of m
// elements. k is clamped so that i + k cannot overflow.
void triluZeroRange(bool upper, int64_t k, int64_t i, int64_t m, int64_t& lo, int64_t& hi) {
  if(upper) {  // keep j >= i + k
    lo = 0;
    hi = std::clamp<int64_t>(i + k, 0, m);
  } else {  // keep j <= i + k
    lo = std::clamp<int64_t>(i + k + 1, 0, m);
    hi = m;
  }
}

}  // namespace

int64_t ops::triluK(int64_t k, const Shape& s) {
  int64_t lim = s[-1] + s[-2] + 1;
  return std::clamp<int64_t>(k, -lim, lim);
}

namespace {

using ops::triluK;

// ONNX Trilu (and Where) take the 16 types up to bfloat16, no float8.
void checkTriluType(OnnxExportCtx& c) {
  Type t = c.inputType(0);
  c.check(!isSmallFloat(t), "ONNX Trilu takes no element type ", t, " at any opset");
}

}  // namespace

// ---------------------------------------------------------------- trilu

// y = x where j - i >= k (upper) or j - i <= k (lower), else 0
ONYX_OP(kTrilu, "trilu")
    .doc("y[.., i, j] = x[.., i, j] if (upper ? j - i >= k : j - i <= k) else 0 (ONNX Trilu)")
    .inputs(1)
    .attr("upper", int64_t(1))
    .attr("k", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      c.check(s.rank() >= 2, "needs a tensor of rank 2 or more (matrices in the last two dims)");
      int bits = typeBits(c.typeOf(0));
      c.check(bits > 0 && bits % 8 == 0, "element type ", c.typeOf(0),
              " is not supported (needs a type with whole bytes per element)");
      c.shape = s;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      size_t e = static_cast<size_t>(typeBits(x.type()) / 8);
      const Shape& s = x.shape();
      int64_t n = s[-2], m = s[-1];
      int64_t rows = n > 0 ? x.size() / m : 0;
      if(m == 0 || rows == 0) return;
      bool upper = c.attrs.i("upper") != 0;
      int64_t k = triluK(c.attrs.i("k"), s);
      const char* src = static_cast<const char*>(x.raw());
      char* dst = static_cast<char*>(c.out.raw());
      host::parallelFor(rows, x.size(), [&](int64_t r0, int64_t r1) {
        for(int64_t r = r0; r < r1; ++r) {
          int64_t lo, hi;
          triluZeroRange(upper, k, r % n, m, lo, hi);
          size_t row = static_cast<size_t>(r * m) * e;
          std::memcpy(dst + row, src + row, static_cast<size_t>(m) * e);
          if(hi > lo) std::memset(dst + row + static_cast<size_t>(lo) * e, 0, static_cast<size_t>(hi - lo) * e);
        }
      });
    })
    .backward([](GradCtx& g) { g.add(0, trilu(g.dy, g.attrs.i("upper") != 0, g.attrs.i("k"))); })
    .onnx("Trilu", 14)
    .importer([](OnnxImportCtx& c) {
      int64_t k = 0;
      if(c.numInputs() > 1 && c.hasInput(1)) {
        std::vector<int64_t> kv = c.ints(1);
        c.check(kv.size() == 1, "k must hold one value, got ", kv.size());
        k = kv[0];
      }
      c.setOutput(0, trilu(c.input(0), c.attrInt("upper", 1) != 0, k));
    })
    // The mirror: k as input 1 (a 0-D int64), left out when it is 0.
    .exporter([](OnnxExportCtx& c) {
      checkTriluType(c);
      Attrs a = c.attrs();
      std::vector<std::string> in{c.input(0)};
      if(a.i("k") != 0)
        in.push_back(c.constant(TensorBase::fromVector(Shape{}, std::vector<int64_t>{a.i("k")}), "k"));
      c.emit("Trilu", in, {c.output()}, {{"upper", int64_t(a.i("upper") != 0 ? 1 : 0)}});
    })
    // Opsets 9-13 (no Trilu): Where(mask, x, 0) with the kept positions of
    // one matrix as a constant bool mask (broadcast over the leading dims);
    // the zeros are all-zero bytes as the kernel's.
    .onnxExport(
        9,
        [](OnnxExportCtx& c) {
          checkTriluType(c);
          // Where takes bfloat16 from opset 16 only, Trilu (14) does.
          if(c.inputType(0) == Type::bfloat16) c.requireOpset(14, "element type bfloat16");
          Attrs a = c.attrs();
          const Shape& s = c.inputShape(0);
          int64_t n = s[-2], m = s[-1], k = triluK(a.i("k"), s);
          std::vector<char> keep(static_cast<size_t>(n * m), 1);
          for(int64_t i = 0; i < n; ++i) {
            int64_t lo, hi;
            triluZeroRange(a.i("upper") != 0, k, i, m, lo, hi);
            for(int64_t j = lo; j < hi; ++j) keep[static_cast<size_t>(i * m + j)] = 0;
          }
          Tensor mask = TensorBase::create(Shape{n, m}, Type::boolean);
          if(mask->bytes() > 0) std::memcpy(mask->raw(), keep.data(), keep.size());
          c.emit("Where", {c.constant(mask, "mask"), c.input(0), c.scalarConst(0, c.inputType(0), "zero")},
                 {c.output()});
        },
        13);

Expr trilu(Expr x, bool upper, int64_t k) {
  return x->graph()->make(kTrilu, {x}, {{"upper", attr(int64_t(upper ? 1 : 0))}, {"k", attr(k)}});
}

// ---------------------------------------------------------------- composites

Expr tile(Expr x, const std::vector<int64_t>& repeats) {
  const Shape& s = x->shape();
  ONYX_CHECK(static_cast<int>(repeats.size()) == s.rank(), "tile: repeats ", attrToString(attr(repeats)),
             " must have one entry per dim of ", s);
  bool trivial = true;
  for(auto r : repeats) {
    ONYX_CHECK(r >= 0, "tile: negative repeat ", r, " in ", attrToString(attr(repeats)));
    trivial = trivial && r == 1;
  }
  if(trivial) return x;
  // [d0, d1, ..] -> [1, d0, 1, d1, ..] -> broadcast to [r0, d0, r1, d1, ..]
  // -> [r0*d0, r1*d1, ..]: the repeat index is the outer one of each pair.
  std::vector<int64_t> pairs, wide, out;
  for(int k = 0; k < s.rank(); ++k) {
    int64_t d = s.dims()[k], r = repeats[static_cast<size_t>(k)];
    pairs.insert(pairs.end(), {1, d});
    wide.insert(wide.end(), {r, d});
    out.push_back(r * d);
  }
  return reshape(expand(reshape(x, Shape(pairs)), Shape(wide)), Shape(out));
}

Expr squeeze(Expr x, const std::vector<int64_t>& axes) {
  const Shape& s = x->shape();
  int r = s.rank();
  std::vector<char> drop(static_cast<size_t>(r), 0);
  if(axes.empty()) {
    for(int k = 0; k < r; ++k) drop[k] = s.dims()[k] == 1;
  } else {
    for(auto a0 : axes) {
      int a = normAxis2(a0, r, "squeeze: axis");
      ONYX_CHECK(s.dims()[a] == 1, "squeeze: axis ", a0, " of ", s, " has size ", s.dims()[a], ", not 1");
      drop[a] = 1;
    }
  }
  std::vector<int64_t> d;
  for(int k = 0; k < r; ++k)
    if(!drop[k]) d.push_back(s.dims()[k]);
  return reshape(x, Shape(d));
}

Expr unsqueeze(Expr x, const std::vector<int64_t>& axes) {
  const Shape& s = x->shape();
  int r = s.rank() + static_cast<int>(axes.size());
  std::vector<char> ins(static_cast<size_t>(r), 0);
  for(auto a0 : axes) {
    int a = normAxis2(a0, r, "unsqueeze: axis");
    ONYX_CHECK(!ins[a], "unsqueeze: axis ", a0, " appears twice in ", attrToString(attr(axes)));
    ins[a] = 1;
  }
  std::vector<int64_t> d;
  size_t j = 0;
  for(int k = 0; k < r; ++k) d.push_back(ins[k] ? 1 : s.dims()[j++]);
  return reshape(x, Shape(d));
}

Expr depth_to_space(Expr x, int64_t b, const std::string& mode) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() == 4, "depth_to_space: needs an NCHW input of rank 4, got ", s);
  ONYX_CHECK(b > 0 && s[1] % (b * b) == 0, "depth_to_space: channels ", s[1], " are not divisible by blocksize^2 (",
             b, "^2)");
  ONYX_CHECK(mode == "DCR" || mode == "CRD", "depth_to_space: mode '", mode, "' is not DCR or CRD");
  int64_t n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];
  Expr y;
  if(mode == "DCR")
    y = transpose(reshape(x, Shape{n, b, b, c, h, w}), {0, 3, 4, 1, 5, 2});
  else
    y = transpose(reshape(x, Shape{n, c, b, b, h, w}), {0, 1, 4, 2, 5, 3});
  return reshape(y, Shape{n, c, h * b, w * b});
}

Expr space_to_depth(Expr x, int64_t b, const std::string& mode) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() == 4, "space_to_depth: needs an NCHW input of rank 4, got ", s);
  ONYX_CHECK(b > 0 && s[2] % b == 0 && s[3] % b == 0, "space_to_depth: height and width of ", s,
             " are not divisible by blocksize ", b);
  ONYX_CHECK(mode == "DCR" || mode == "CRD", "space_to_depth: mode '", mode, "' is not DCR or CRD");
  int64_t n = s[0], c = s[1], h = s[2] / b, w = s[3] / b;
  Expr y = transpose(reshape(x, Shape{n, c, h, b, w, b}),
                     mode == "DCR" ? std::vector<int>{0, 3, 5, 1, 2, 4} : std::vector<int>{0, 1, 3, 5, 2, 4});
  return reshape(y, Shape{n, c * b * b, h, w});
}

Expr reverse_sequence(Expr x, const std::vector<int64_t>& lens, int batchAxis, int timeAxis) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() >= 2, "reverse_sequence: needs rank 2 or more, got ", s);
  ONYX_CHECK((batchAxis == 0 && timeAxis == 1) || (batchAxis == 1 && timeAxis == 0),
             "reverse_sequence: batch_axis and time_axis must be 0 and 1 (got ", batchAxis, " and ", timeAxis, ")");
  int64_t d0 = s[0], d1 = s[1], batch = s[batchAxis], steps = s[timeAxis];
  ONYX_CHECK(static_cast<int64_t>(lens.size()) == batch, "reverse_sequence: ", lens.size(),
             " sequence lengths for a batch of ", batch);
  for(auto l : lens)
    ONYX_CHECK(l >= 0 && l <= steps, "reverse_sequence: sequence length ", l, " is out of range 0..", steps);
  // Merge the two leading dims and gather the merged rows in the new order.
  std::vector<int64_t> idx;
  for(int64_t i = 0; i < d0; ++i)
    for(int64_t j = 0; j < d1; ++j) {
      int64_t b = batchAxis == 0 ? i : j, t = batchAxis == 0 ? j : i, l = lens[static_cast<size_t>(b)];
      int64_t src = t < l ? l - 1 - t : t;
      idx.push_back(batchAxis == 0 ? b * d1 + src : src * d1 + b);
    }
  std::vector<int64_t> merged{d0 * d1};
  for(int k = 2; k < s.rank(); ++k) merged.push_back(s.dims()[k]);
  Expr y = gather(reshape(x, Shape(merged)), 0, x->graph()->indices(idx));
  return reshape(y, s);
}

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
  c.check(axis0 >= -r && axis0 < r, "axis ", axis0, " is out of range for rank ", r);
  int axis = static_cast<int>(axis0 < 0 ? axis0 + r : axis0);
  int64_t n = x->shape()[axis];
  size_t outs = c.numOutputs();
  std::vector<int64_t> sizes = optionalInts(c, 1);
  if(sizes.empty() && c.hasAttr("split")) sizes = c.attrInts("split");
  if(sizes.empty()) {
    if(c.hasAttr("num_outputs")) {
      int64_t parts = c.attrInt("num_outputs");
      c.check(parts >= 1, "num_outputs ", parts, " must be positive");
      c.check(static_cast<size_t>(parts) == outs, "num_outputs is ", parts, " but the node has ", outs, " outputs");
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
    int64_t tiles = static_cast<int64_t>(c.scalar(1)), axis = static_cast<int64_t>(c.scalar(2));
    c.check(axis >= -r && axis < r, "axis ", axis, " is out of range for rank ", r);
    reps.assign(static_cast<size_t>(r), 1);
    reps[static_cast<size_t>(axis < 0 ? axis + r : axis)] = tiles;
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
  if(isInt(type)) {
    int64_t s = ts->get<int64_t>(0), l = tl->get<int64_t>(0), d = td->get<int64_t>(0);
    c.check(d != 0, "delta must not be 0");
    int64_t n = 0;
    if(d > 0 && l > s) n = (l - s + d - 1) / d;
    if(d < 0 && l < s) n = (s - l - d - 1) / -d;
    std::vector<int64_t> v;
    for(int64_t i = 0; i < n; ++i) v.push_back(s + i * d);
    t = TensorBase::create(Shape{n}, type);
    t->set(v);
  } else {
    double s = ts->getAsDouble(0), l = tl->getAsDouble(0), d = td->getAsDouble(0);
    c.check(d != 0 && std::isfinite(s) && std::isfinite(l) && std::isfinite(d),
            "start, limit and delta must be finite and delta nonzero");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - s) / d)));
    std::vector<double> v;
    for(int64_t i = 0; i < n; ++i) v.push_back(s + static_cast<double>(i) * d);
    t = TensorBase::create(Shape{n}, type);
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
    c.check(axes[i] >= -r && axes[i] < r, "axis ", axes[i], " is out of range for rank ", r);
    int a = static_cast<int>(axes[i] < 0 ? axes[i] + r : axes[i]);
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
