// More shape ops: trilu (a registry op) and the composites built from the
// ops of shape.cpp (tile, squeeze, unsqueeze, depth_to_space, space_to_depth,
// reverse_sequence); the ONNX imports of the shape family that need no op of
// their own are in converters/import_shape.cpp.
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

}  // namespace onyx
