// Shape: the ops that give x's elements, in order, a new shape (reshape,
// expand, flatten) and the composites made of them (tile, squeeze,
// unsqueeze). Their kernels are byte copies (or broadcasts), so every element
// type works; the ONNX imports of this family that need no op of their own
// (Shape, Size, Squeeze, Unsqueeze, ...) are in converters/import_shape.cpp.
#include <onyx/ops/shape.h>

#include <onyx/core/checked.h>

#include <algorithm>
#include <string>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>

namespace onyx {

using namespace functional;
using ops::emitOnFloat64;
using ops::exportAxis;
using ops::isOnnxFloat;
using ops::prodDims;
using ops::requireType;
using ops::toVec;

// ---------------------------------------------------------------- reshape, expand, flatten

// y = x with a new shape (one dim may be -1)
ONYX_OP(kReshape, "reshape")
    .doc("y = x viewed with a new shape (one dim may be -1)")
    .inputs(1)
    .attr("shape", IntList{})
    .infer([](InferCtx& c) {
      const IntList& s = c.attrs.ints("shape");
      Shape::Dims d(s.begin(), s.end());
      int64_t known = 1;
      int infer = -1;
      for(size_t i = 0; i < d.size(); ++i) {
        if(d[i] == -1) {
          c.check(infer < 0, "shape ", attrToString(s), " has more than one -1");
          infer = static_cast<int>(i);
        } else {
          c.check(d[i] >= 0, "shape ", attrToString(s), " has a negative dimension");
          c.check(!__builtin_mul_overflow(known, d[i], &known), "shape ", attrToString(s),
                  " has more elements than 64-bit integers count");
        }
      }
      int64_t n = c.shapeOf(0).elements();
      if(infer >= 0) {
        c.check(known > 0 && n % known == 0, "cannot reshape ", c.shapeOf(0), " (", n, " elements) to ",
                attrToString(s));
        d[infer] = n / known;
      }
      c.shape = Shape(d);
      c.check(c.shape.elements() == n, "cannot reshape ", c.shapeOf(0), " (", n, " elements) to ", c.shape, " (",
              c.shape.elements(), " elements)");
      c.type = c.typeOf(0);
    })
    .anyDevice(ops::copyInput0)
    .view()
    .backward([](GradCtx& g) { g.add(0, reshape(g.dy, g.x(0)->shape())); })
    .onnx("Reshape", 1)
    .importer([](OnnxImportCtx& c) {
      // Opsets 1-4 give the shape as an attribute, later ones as input 1. A
      // 0 copies the input's dim at that position unless allowzero (14+).
      Expr x = c.input(0);
      std::vector<int64_t> s;
      if(c.opset() < 5) {
        s = c.attrInts("shape");
      } else {
        s = c.ints(1);
      }
      bool allowZero = c.attrInt("allowzero", 0) != 0;
      const Shape& xs = x->shape();
      for(size_t i = 0; i < s.size(); ++i) {
        if(s[i] != 0 || allowZero) continue;
        c.check(static_cast<int>(i) < xs.rank(), "shape ", attrToString(attr(s)), " has a 0 at position ", i,
                " but the input ", xs, " has no dim there to copy");
        s[i] = xs.dims()[i];
      }
      c.setOutput(0, reshape(x, s));
    })
    // The mirror: an attribute before opset 5, input 1 from 5. The node's -1
    // stays ONNX's "infer"; a 0 in it is a zero-sized dim, which ONNX reads
    // as "copy the input's dim" unless allowzero=1 (opset 14+), so before 14
    // it is only written where the input's dim is 0 too.
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Reshape", true);
      std::vector<int64_t> s = toVec(c.attrs().ints("shape"));
      const Shape& xs = c.inputShape(0);
      bool zero = false, copiesZero = true;
      for(size_t i = 0; i < s.size(); ++i)
        if(s[i] == 0) {
          zero = true;
          copiesZero = copiesZero && static_cast<int>(i) < xs.rank() && xs.dims()[i] == 0;
        }
      OnnxAttrs extra;
      if(zero && c.opset() >= 14) extra.push_back({"allowzero", int64_t(1)});
      if(zero && !copiesZero && c.opset() < 14) {
        // The result is empty: x (no elements) reshaped to ones with -1 at the
        // first 0 (which infers 0) and expanded to the shape.
        if(c.opset() < 8)  // ONNX Reshape before 14 reads a 0 as a copy of the input's dim
          c.requireOpset(14, str("shape ", attrToString(attr(s)), " of input ", xs, " (a zero-sized dim)"));
        std::vector<int64_t> ones(s.size(), 1);
        ones[static_cast<size_t>(std::find(s.begin(), s.end(), 0) - s.begin())] = -1;
        std::string r = c.fresh("empty");
        c.emit("Reshape", {c.input(0), c.intsConst(ones, "empty_shape")}, {r});
        c.emit("Expand", {r, c.intsConst(s, "shape")}, {c.output()});
        return;
      }
      emitOnFloat64(c, c.opset() >= 5 || isOnnxFloat(c.inputType(0)), 5, "Reshape", [&](const std::vector<std::string>& in, const std::string& y, const std::string& p) {
        if(c.opset() < 5)
          c.emit("Reshape", {in[0]}, {y}, {{"shape", attr(s)}});
        else
          c.emit("Reshape", {in[0], c.intsConst(s, p + "shape")}, {y}, extra);
      });
    });

Expr reshape(Expr x, const Shape& shape) {
  if(x->shape() == shape) return x;
  return x->graph()->make(kReshape, {x}, {{"shape", attr(shape.vec())}});
}
Expr reshape(Expr x, const std::vector<int64_t>& shape) {
  return x->graph()->make(kReshape, {x}, {{"shape", attr(shape)}});
}

// y = x broadcast to `shape`
ONYX_OP(kExpand, "expand")
    .doc("y = x broadcast to shape (numpy rules; result is the broadcast of both)")
    .inputs(1)
    .attr("shape", IntList{})
    .infer([](InferCtx& c) {
      const IntList& s = c.attrs.ints("shape");
      Shape target{Shape::Dims(s.begin(), s.end())};
      try {
        c.shape = Shape::broadcast({c.shapeOf(0), target});
      } catch(const Error& e) {
        c.fail(e.what());
      }
      c.type = c.typeOf(0);
    })
    .anyDevice([](KernelCtx& c) {
      if(!c.out.onHost()) return gpuBackend().assign(c.out, *c.in[0]);
      dispatchAll(c.out.type(), "expand", [&](auto tag) {
        using T = typename decltype(tag)::type;
        host::elementwise<T, T>(_2, c.out, *c.in[0]);
      });
    })
    .backward([](GradCtx& g) { g.add(0, g.dy); })
    .onnx("Expand", 8)
    .importer([](OnnxImportCtx& c) {
      std::vector<int64_t> s = c.ints(1);
      for(auto d : s) c.check(d >= 0, "shape ", attrToString(attr(s)), " has a negative dimension");
      c.setOutput(0, expand(c.input(0), Shape(s)));
    })
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Expand", false);
      c.emit("Expand", {c.input(0), c.intsConst(toVec(c.attrs().ints("shape")), "shape")}, {c.output()});
    })
    // Opsets 6-7 (no Expand): x reshaped to the result's rank, then tiled.
    .onnxExport(
        6,
        [](OnnxExportCtx& c) {
          requireType(c, c.inputType(0), "Tile", false);
          const Shape& out = c.node().shape();
          const Shape& xs = c.inputShape(0);
          int r = out.rank(), lead = r - xs.rank();
          std::vector<int64_t> xr(static_cast<size_t>(lead), 1), reps;
          for(auto d : xs.dims()) xr.push_back(d);
          for(int i = 0; i < r; ++i) reps.push_back(xr[static_cast<size_t>(i)] == out[i] ? 1 : out[i]);
          std::string x = c.input(0);
          if(lead > 0) {
            std::string y = c.fresh("ranked");
            c.emit("Reshape", {x, c.intsConst(xr, "ranked_shape")}, {y});
            x = y;
          }
          c.emit("Tile", {x, c.intsConst(reps, "repeats")}, {c.output()});
        },
        7);

Expr expand(Expr x, const Shape& shape) {
  if(x->shape() == shape) return x;
  return x->graph()->make(kExpand, {x}, {{"shape", attr(shape.vec())}});
}

// y = reshape(x, [d0*..*d(axis-1), d(axis)*..*d(n-1)])
ONYX_OP(kFlatten, "flatten")
    .doc("y = x as 2-D: [prod(dims before axis), prod(dims from axis)]")
    .inputs(1)
    .attr("axis", int64_t(1))
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      int64_t a = c.attrs.i("axis");
      c.check(a >= -s.rank() && a <= s.rank(), "axis ", a, " is out of range for rank ", s.rank(), " (valid: ",
              -s.rank(), "..", s.rank(), ")");
      size_t k = static_cast<size_t>(a < 0 ? a + s.rank() : a);
      c.shape = Shape{prodDims(s.dims(), 0, k), prodDims(s.dims(), k, s.size())};
      c.type = c.typeOf(0);
    })
    .anyDevice(ops::copyInput0)
    .view()
    .backward([](GradCtx& g) { g.add(0, reshape(g.dy, g.x(0)->shape())); })
    .onnx("Flatten", 1)
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Flatten", true);
      int64_t axis = exportAxis(c, c.attrs().i("axis"), c.inputShape(0).rank());
      emitOnFloat64(c, c.opset() >= 9 || isOnnxFloat(c.inputType(0)), 9, "Flatten", [&](const std::vector<std::string>& in, const std::string& y, const std::string&) {
        c.emit("Flatten", {in[0]}, {y}, {{"axis", axis}});
      });
    });

Expr flatten(Expr x, int axis) {
  int r = x->shape().rank();
  // Stored non-negative so the node exports to every Flatten opset (negative
  // axes need opset 11) and equal flattens share one node.
  return x->graph()->make(kFlatten, {x}, {{"axis", attr(axis < 0 && axis >= -r ? axis + r : axis)}});
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
    out.push_back(mulChecked(r, d, "tile: repeats x dim"));
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
      int a = normalizeAxis(a0, r, "squeeze: axis");
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
    int a = normalizeAxis(a0, r, "unsqueeze: axis");
    ONYX_CHECK(!ins[a], "unsqueeze: axis ", a0, " appears twice in ", attrToString(attr(axes)));
    ins[a] = 1;
  }
  std::vector<int64_t> d;
  size_t j = 0;
  for(int k = 0; k < r; ++k) d.push_back(ins[k] ? 1 : s.dims()[j++]);
  return reshape(x, Shape(d));
}

}  // namespace onyx
