// Layout: the ops that move x's elements to new positions, whole: transpose,
// concat (with split, its inverse, in slicing.cpp), and the composites
// made of them (depth_to_space, space_to_depth). Their kernels are strided
// copies on the tensors' own device (movers.h), one instantiation per element
// size for every type.
#include <onyx/ops/layout.h>

#include <onyx/core/checked.h>

#include <string>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

using ops::copyStrided;
using ops::elementBytes;
using ops::emitOnFloat64;
using ops::exportAxis;
using ops::isOnnxFloat;
using ops::orFail;
using ops::requireType;

// ---------------------------------------------------------------- transpose

namespace {
// The permutation, with empty meaning reversed dims; throws if not one.
std::vector<int> permOf(const IntList& perm, int rank) {
  std::vector<int> p;
  if(perm.empty()) {
    for(int i = rank - 1; i >= 0; --i) p.push_back(i);
    return p;
  }
  bool ok = static_cast<int>(perm.size()) == rank;
  std::vector<char> seen(static_cast<size_t>(rank), 0);
  for(size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if(ok) seen[perm[i]] = 1;
    p.push_back(static_cast<int>(perm[i]));
  }
  ONYX_CHECK(ok, "perm ", attrToString(perm), " is not a permutation of 0..", rank - 1, " for an input of rank ",
             rank, " (it needs each axis exactly once)");
  return p;
}
}  // namespace

// y[i_0, .., i_n-1] = x[j] with j[perm[k]] = i_k
ONYX_OP(kTranspose, "transpose")
    .doc("y = x with dims permuted: y.dim(k) = x.dim(perm[k]); empty perm reverses")
    .inputs(1)
    .attr("perm", IntList{})
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      auto p = orFail(c, [&] { return permOf(c.attrs.ints("perm"), s.rank()); });
      Shape::Dims d;
      for(int k : p) d.push_back(s.dims()[k]);
      c.shape = Shape(d);
      c.type = c.typeOf(0);
    })
    .anyDevice([](KernelCtx& c) {
      const Shape& is = c.in[0]->shape();
      auto p = permOf(c.attrs.ints("perm"), is.rank());
      auto istr = is.strides();
      Shape::Dims srcStr;
      for(int k : p) srcStr.push_back(istr[k]);
      auto dstStr = c.out.shape().strides();
      copyStrided(c.out.getDeviceId(), c.out.raw(), dstStr.data(), c.in[0]->raw(), srcStr.data(), c.out.shape().dims().data(),
                  c.out.shape().rank(), elementBytes(c.out.type(), "transpose"));
    })
    .backward([](GradCtx& g) {
      auto p = permOf(g.attrs.ints("perm"), g.x(0)->shape().rank());
      std::vector<int> inv(p.size());
      for(size_t k = 0; k < p.size(); ++k) inv[p[k]] = static_cast<int>(k);
      g.add(0, transpose(g.dy, inv));
    })
    .onnx("Transpose", 1)
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Transpose", true);
      c.emitDefault("Transpose");
    });

Expr transpose(Expr x, const std::vector<int>& perm) {
  bool identity = perm.empty() ? x->shape().rank() <= 1 : perm.size() == x->shape().size();
  for(size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int>(k);
  if(identity) return x;
  return x->graph()->make(kTranspose, {x}, {{"perm", attr(perm)}});
}

// ---------------------------------------------------------------- concat

// y = [x_0, x_1, ...] joined along axis
ONYX_OP(kConcat, "concat")
    .doc("y = inputs joined along axis (other dims must match); block 8 or 16: the inputs and y are stored "
         "channel-blocked (oneDNN's nChw8c/16c; axis 1 of 4-D float32 tensors, set by the blocked_layout pass)")
    .inputs(1, -1)
    .attr("axis", int64_t(0))
    .attr("block", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& s0 = c.shapeOf(0);
      int r = s0.rank();
      c.check(r >= 1, "cannot concatenate rank-0 tensors; reshape them to 1-D first");
      int a = c.axis(c.attrs.i("axis"), r);
      c.type = c.commonType();
      Shape::Dims d = s0.dims();
      for(size_t i = 1; i < c.n(); ++i) {
        const Shape& si = c.shapeOf(i);
        bool ok = si.rank() == r;
        for(int k = 0; ok && k < r; ++k) ok = k == a || si.dims()[k] == s0.dims()[k];
        c.check(ok, "input ", i, " has shape ", si, " but input 0 has shape ", s0,
                "; all dims but the concatenation axis ", a, " must match");
        d[a] += si.dims()[a];
      }
      c.shape = Shape(d);
      const int64_t b = c.attrs.i("block");
      c.check(b == 0 || b == 8 || b == 16, "block must be 0 (plain) or 8 or 16 (channel-blocked), got ", b);
      if(b != 0) {
        c.check(r == 4 && a == 1 && c.type == Type::float32, "block (a channel-blocked layout) needs float32 4-D "
                "tensors joined along axis 1, got ", c.type, " ", s0, " along axis ", a);
        for(size_t i = 0; i < c.n(); ++i)
          c.check(c.shapeOf(i)[1] % b == 0, "input ", i, " of shape ", c.shapeOf(i), " has channels that are not a "
                  "multiple of block ", b);
      }
    })
    // Channel-blocked inputs ([N, C/b, H, W, b] in memory, block set) join
    // as plain ones: along axis 1 each sample's input is one contiguous run
    // of C_i * H * W values in either layout.
    .anyDevice([](KernelCtx& c) {
      size_t e = elementBytes(c.out.type(), "concat");
      const Shape& os = c.out.shape();
      int a = os.axis(c.attrs.i("axis"));
      auto ostr = os.strides();
      int64_t off = 0;
      for(TensorBase* x : c.in) {
        char* dst = static_cast<char*>(c.out.raw()) + off * ostr[a] * int64_t(e);
        auto istr = x->shape().strides();
        copyStrided(c.out.getDeviceId(), dst, ostr.data(), x->raw(), istr.data(), x->shape().dims().data(), os.rank(), e);
        off += x->shape().dims()[a];
      }
    })
    .backward([](GradCtx& g) {
      ONYX_ASSERT(g.attrs.i("block") == 0, "concat: a gradient through channel-blocked tensors (the blocked_layout "
                  "pass runs on inference graphs only)");
      int a = g.dy->shape().axis(g.attrs.i("axis"));
      int64_t off = 0;
      for(size_t i = 0; i < g.n(); ++i) {
        int64_t n = g.x(i)->shape()[a];
        if(g.needs(i)) g.add(i, slice(g.dy, a, off, off + n));
        off += n;
      }
    })
    .onnx("Concat", 4)
    .exporter([](OnnxExportCtx& c) {
      ONYX_ASSERT(c.attrs().i("block") == 0, "concat: channel-blocked tensors in a graph being exported (the "
                  "blocked_layout pass runs for the CPU kernels only)");
      requireType(c, c.inputType(0), "Concat", false);
      c.emit("Concat", c.inputs(), {c.output()}, {{"axis", exportAxis(c, c.attrs().i("axis"), c.inputShape(0).rank())}});
    })
    // Opsets 1-3: the same Concat on float types (axis given explicitly: its
    // default there is 1).
    .onnxExport(
        1,
        [](OnnxExportCtx& c) {
          int64_t axis = exportAxis(c, c.attrs().i("axis"), c.inputShape(0).rank());
          emitOnFloat64(c, isOnnxFloat(c.inputType(0)), 4, "Concat", [&](const std::vector<std::string>& in, const std::string& y, const std::string&) {
            c.emit("Concat", in, {y}, {{"axis", axis}});
          });
        },
        3);

Expr concat(const std::vector<Expr>& xs, int axis) {
  ONYX_CHECK(!xs.empty(), "concat: needs at least one input");
  if(xs.size() == 1) return xs[0];
  return xs[0]->graph()->make(kConcat, xs, {{"axis", attr(axis)}});
}

// ---------------------------------------------------------------- composites

Expr depth_to_space(Expr x, int64_t b, const std::string& mode) {
  const Shape& s = x->shape();
  ONYX_CHECK(s.rank() == 4, "depth_to_space: needs an NCHW input of rank 4, got ", s);
  ONYX_CHECK(b > 0 && s[1] % mulChecked(b, b, "depth_to_space: blocksize^2") == 0, "depth_to_space: channels ", s[1],
             " are not divisible by blocksize^2 (", b, "^2)");
  ONYX_CHECK(mode == "DCR" || mode == "CRD", "depth_to_space: mode '", mode, "' is not DCR or CRD");
  int64_t n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];  // b * b checked above
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

}  // namespace onyx
