// Slicing: the ops that read or write part of x (slice and its adjoint
// slice_scatter, gather and its adjoint scatter_add, pad, which also crops)
// and the composites made of them (split, index_select, reverse_sequence).
// Kernels that only move elements work on bytes (movers.h), so every element
// type works, except scatter_add, which adds.
#include <onyx/ops/slicing.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/shape.h>

namespace onyx {

using ops::copyStrided;
using ops::elementBytes;
using ops::emitOnFloat64;
using ops::exportAxis;
using ops::isOnnxFloat;
using ops::orFail;
using ops::prodDims;
using ops::requireType;
using ops::toVec;
using ops::zeroFill;

namespace {

// ---------------------------------------------------------------- slice

// The slice of one input, per input axis: first element, step, count.
struct SliceDims {
  Shape::Dims start, step, count;
};

SliceDims sliceDims(const Shape& s, const IntList& starts, const IntList& ends, const IntList& axes,
                    const IntList& steps) {
  int r = s.rank();
  ONYX_CHECK(starts.size() == ends.size(), "starts ", attrToString(starts), " and ends ", attrToString(ends),
             " must have the same length");
  ONYX_CHECK(axes.empty() || axes.size() == starts.size(), "axes ", attrToString(axes),
             " must be empty or as long as starts ", attrToString(starts));
  ONYX_CHECK(steps.empty() || steps.size() == starts.size(), "steps ", attrToString(steps),
             " must be empty or as long as starts ", attrToString(starts));
  SliceDims sd;
  for(int i = 0; i < r; ++i) {
    sd.start.push_back(0);
    sd.step.push_back(1);
    sd.count.push_back(s.dims()[i]);
  }
  std::vector<char> seen(static_cast<size_t>(r), 0);
  for(size_t k = 0; k < starts.size(); ++k) {
    int a = normalizeAxis(axes.empty() ? int64_t(k) : axes[k], r, "slice axis");
    ONYX_CHECK(!seen[a], "axis ", a, " appears twice in axes ", attrToString(axes));
    seen[a] = 1;
    int64_t step = steps.empty() ? 1 : steps[k];
    ONYX_CHECK(step != 0 && step != std::numeric_limits<int64_t>::min(), "step ", step, " on axis ", a,
               " is not allowed (use a nonzero step)");
    int64_t n = s.dims()[a], st = starts[k], en = ends[k];
    if(st < 0) st += n;
    if(en < 0) en += n;
    int64_t count = 0;
    if(step > 0) {
      st = std::clamp<int64_t>(st, 0, n);
      en = std::clamp<int64_t>(en, 0, n);
      if(en > st) count = (en - st - 1) / step + 1;
    } else if(n > 0) {
      st = std::clamp<int64_t>(st, 0, n - 1);
      en = std::clamp<int64_t>(en, -1, n - 1);
      if(st > en) count = (st - en - 1) / -step + 1;
    }
    sd.start[a] = count > 0 ? st : 0;
    // The step matters only between two taken elements: with one or none
    // it is 1, so that step * stride stays inside the tensor (a step of
    // 2^63 - 1 taking one element would otherwise overflow the copy's
    // strides). With two or more, |step| < n and no product can overflow.
    sd.step[a] = count > 1 ? step : 1;
    sd.count[a] = count;
  }
  return sd;
}

// Copies between a whole tensor `big` and the dense tensor `part` holding its
// slice: part = big[slice] or, with toBig, big[slice] = part.
void sliceCopy(TensorBase& big, TensorBase& part, const SliceDims& sd, bool toBig, const char* op) {
  size_t e = elementBytes(big.type(), op);
  auto bs = big.shape().strides();
  int r = big.shape().rank();
  int64_t base = 0;
  Shape::Dims bigStr, partStr = Shape(sd.count).strides();
  for(int k = 0; k < r; ++k) {
    base += sd.start[k] * bs[k];
    bigStr.push_back(sd.step[k] * bs[k]);
  }
  char* bigp = static_cast<char*>(big.raw()) + base * int64_t(e);
  if(toBig)
    copyStrided(big.getDeviceId(), bigp, bigStr.data(), part.raw(), partStr.data(), sd.count.data(), r, e);
  else
    copyStrided(big.getDeviceId(), part.raw(), partStr.data(), bigp, bigStr.data(), sd.count.data(), r, e);
}

SliceDims sliceDimsOf(const Shape& s, const Attrs& at) {
  return sliceDims(s, at.ints("starts"), at.ints("ends"), at.ints("axes"), at.ints("steps"));
}

// Attributes of slice and slice_scatter, copied from one to the other.
std::vector<std::pair<std::string, AttrValue>> sliceAttrs(const Attrs& at) {
  return {{"starts", at.ints("starts")}, {"ends", at.ints("ends")}, {"axes", at.ints("axes")}, {"steps", at.ints("steps")}};
}

// ---------------------------------------------------------------- pad

bool isPadMode(const std::string& m) { return m == "constant" || m == "reflect" || m == "edge" || m == "wrap"; }

// ---------------------------------------------------------------- gather

// Index i (checked to lie in [-n, n)) as a position in [0, n).
inline int64_t resolveIndex(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

// Negative pads crop first; the other modes then extend the cropped range.
std::vector<int64_t> ops::padMap(int64_t n, int64_t begin, int64_t end, const std::string& mode) {
  int64_t lo = std::max<int64_t>(0, -begin), hi = n - std::max<int64_t>(0, -end);
  int64_t m = hi - lo, pb = std::max<int64_t>(0, begin), pe = std::max<int64_t>(0, end);
  std::vector<int64_t> map(static_cast<size_t>(std::max<int64_t>(0, pb + m + pe)));
  for(size_t o = 0; o < map.size(); ++o) {
    int64_t t = static_cast<int64_t>(o) - pb;
    if(t >= 0 && t < m) {
      map[o] = lo + t;
    } else if(mode == "constant") {
      map[o] = -1;
    } else {
      if(mode == "edge") {
        t = std::clamp<int64_t>(t, 0, m - 1);
      } else if(mode == "wrap") {
        t = ((t % m) + m) % m;
      } else if(m == 1) {  // reflect of one element repeats it
        t = 0;
      } else {  // reflect: the sequence is periodic with period 2(m-1)
        int64_t p = 2 * (m - 1);
        t = ((t % p) + p) % p;
        if(t >= m) t = p - t;
      }
      map[o] = lo + t;
    }
  }
  return map;
}

using ops::padMap;

// ---------------------------------------------------------------- slice

// y = x[start:end:step] on the given axes (ONNX Slice)
ONYX_OP(kSlice, "slice")
    .doc("y = x[starts:ends:steps] on axes (ONNX Slice: negative indices, clamping, negative steps)")
    .inputs(1)
    .attr("starts", IntList{})
    .attr("ends", IntList{})
    .attr("axes", IntList{})
    .attr("steps", IntList{})
    .infer([](InferCtx& c) {
      SliceDims sd = orFail(c, [&] { return sliceDimsOf(c.shapeOf(0), c.attrs); });
      c.shape = Shape(sd.count);
      c.type = c.typeOf(0);
    })
    .anyDevice([](KernelCtx& c) { sliceCopy(*c.in[0], c.out, sliceDimsOf(c.in[0]->shape(), c.attrs), false, "slice"); })
    .backward([](GradCtx& g) {
      auto at = sliceAttrs(g.attrs);
      at.push_back({"shape", attr(g.x(0)->shape().vec())});
      g.add(0, g.graph.make(Registry::instance().get("slice_scatter"), std::vector<Expr>{g.dy}, at));
    })
    .onnx("Slice", 1)
    .importer([](OnnxImportCtx& c) {
      // Attributes up to opset 9, inputs (starts, ends, [axes], [steps]) from 10.
      std::vector<int64_t> starts, ends, axes, steps;
      if(c.opset() < 10) {
        starts = c.attrInts("starts");
        ends = c.attrInts("ends");
        axes = c.attrInts("axes");
      } else {
        starts = c.ints(1);
        ends = c.ints(2);
        if(c.numInputs() > 3 && c.hasInput(3)) axes = c.ints(3);
        if(c.numInputs() > 4 && c.hasInput(4)) steps = c.ints(4);
      }
      c.setOutput(0, slice(c.input(0), starts, ends, axes, steps));
    })
    // The mirror: attributes before opset 10 (which have no steps), inputs
    // from 10; absent axes with steps are an empty optional input.
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Slice", false);
      Attrs a = c.attrs();
      std::vector<int64_t> starts = toVec(a.ints("starts")), ends = toVec(a.ints("ends")), axes = toVec(a.ints("axes")),
                           steps = toVec(a.ints("steps"));
      int r = c.inputShape(0).rank();
      for(auto& ax : axes) ax = exportAxis(c, ax, r);
      if(c.opset() < 10) {
        // Slice before 10 has no steps: the axes with a step other than 1
        // become Gathers of the positions the slice reads.
        SliceDims sd = sliceDimsOf(c.inputShape(0), a);
        std::vector<int64_t> s1, e1, a1, gatherAxes;
        for(size_t k = 0; k < starts.size(); ++k) {
          int64_t ax = normalizeAxis(axes.empty() ? int64_t(k) : axes[k], r);
          if(steps.empty() || steps[k] == 1) {
            s1.push_back(starts[k]);
            e1.push_back(ends[k]);
            a1.push_back(ax);
          } else {
            gatherAxes.push_back(ax);
          }
        }
        std::string x = c.input(0);
        bool plain = !s1.empty() || gatherAxes.empty();
        size_t ops = gatherAxes.size() + (plain ? 1 : 0), done = 0;
        auto next = [&](const std::string& hint) { return ++done == ops ? c.output() : c.fresh(hint); };
        if(plain) {
          OnnxAttrs at{{"starts", attr(s1)}, {"ends", attr(e1)}};
          if(!axes.empty() || !gatherAxes.empty()) at.push_back({"axes", attr(a1)});
          std::string y = next("unit_steps");
          c.emit("Slice", {x}, {y}, at);
          x = y;
        }
        for(int64_t ax : gatherAxes) {
          size_t u = static_cast<size_t>(ax);
          std::vector<int64_t> pos;
          for(int64_t j = 0; j < sd.count[u]; ++j) pos.push_back(sd.start[u] + j * sd.step[u]);
          std::string y = next("steps_axis" + std::to_string(ax));
          c.emit("Gather", {x, c.intsConst(pos, "positions_axis" + std::to_string(ax))}, {y}, {{"axis", ax}});
          x = y;
        }
        return;
      }
      std::vector<std::string> in{c.input(0), c.intsConst(starts, "starts"), c.intsConst(ends, "ends")};
      if(!axes.empty() || !steps.empty()) in.push_back(axes.empty() ? std::string() : c.intsConst(axes, "axes"));
      if(!steps.empty()) in.push_back(c.intsConst(steps, "steps"));
      c.emit("Slice", in, {c.output()});
    });

Expr slice(Expr x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
           const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  return x->graph()->make(kSlice, {x},
                          {{"starts", attr(starts)}, {"ends", attr(ends)}, {"axes", attr(axes)}, {"steps", attr(steps)}});
}

namespace detail {
Expr sliceAxis(Expr x, int axis, int64_t start, int64_t end, int64_t step) {
  const Shape& s = x->shape();
  if(axis >= -s.rank() && axis < s.rank() && step == 1 && start == 0 && end >= s[axis]) return x;
  return slice(x, std::vector<int64_t>{start}, std::vector<int64_t>{end}, std::vector<int64_t>{axis},
               std::vector<int64_t>{step});
}
}  // namespace detail

std::vector<Expr> split(Expr x, int axis, const std::vector<int64_t>& sizes) {
  int a = normalizeAxis(axis, x->shape().rank(), "split: axis");
  int64_t total = 0;
  for(auto n : sizes) {
    ONYX_CHECK(n >= 0, "split: negative size ", n, " in sizes ", attrToString(attr(sizes)));
    total += n;
  }
  ONYX_CHECK(total == x->shape()[a], "split: sizes ", attrToString(attr(sizes)), " add up to ", total,
             " but axis ", a, " of ", x->shape(), " has ", x->shape()[a]);
  std::vector<Expr> parts;
  int64_t off = 0;
  for(auto n : sizes) {
    parts.push_back(slice(x, a, off, off + n));
    off += n;
  }
  return parts;
}

// y = zeros(shape); y[starts:ends:steps on axes] = x
ONYX_OP(kSliceScatter, "slice_scatter")
    .doc("y = zeros(shape) with y[starts:ends:steps on axes] = x (the gradient of slice)")
    .inputs(1)
    .attr("shape", IntList{})
    .attr("starts", IntList{})
    .attr("ends", IntList{})
    .attr("axes", IntList{})
    .attr("steps", IntList{})
    .infer([](InferCtx& c) {
      const IntList& s = c.attrs.ints("shape");
      Shape full = orFail(c, [&] { return Shape(Shape::Dims(s.begin(), s.end())); });
      SliceDims sd = orFail(c, [&] { return sliceDimsOf(full, c.attrs); });
      c.check(Shape(sd.count) == c.shapeOf(0), "the slice of ", full, " has shape ", Shape(sd.count),
              " but the input has shape ", c.shapeOf(0));
      c.shape = full;
      c.type = c.typeOf(0);
    })
    .anyDevice([](KernelCtx& c) {
      zeroFill(c.out);
      sliceCopy(c.out, *c.in[0], sliceDimsOf(c.out.shape(), c.attrs), true, "slice_scatter");
    })
    .backward([](GradCtx& g) {
      auto at = sliceAttrs(g.attrs);
      g.add(0, g.graph.make(kSlice, std::vector<Expr>{g.dy}, at));
    })
    .noOnnx("internal: only gradient graphs use it (the gradient of slice)");

Expr slice_scatter(Expr x, const Shape& shape, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                   const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  return x->graph()->make(kSliceScatter, {x},
                          {{"shape", attr(shape.vec())}, {"starts", attr(starts)}, {"ends", attr(ends)},
                           {"axes", attr(axes)}, {"steps", attr(steps)}});
}

// ---------------------------------------------------------------- gather, scatter_add

// y[i.., j.., k..] = x[i.., indices[j..], k..]
ONYX_OP(kGather, "gather")
    .doc("y[i.., j.., k..] = x[i.., indices[j..], k..] along axis (ONNX Gather; negative indices count from the end)")
    .inputs(2)
    .attr("axis", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      const Shape& is = c.shapeOf(1);
      c.check(xs.rank() >= 1, "cannot gather from a rank-0 tensor");
      c.check(c.typeOf(1) == Type::int64 || c.typeOf(1) == Type::int32, "indices have type ", c.typeOf(1),
              " but must be int64 or int32");
      int a = c.axis(c.attrs.i("axis"), xs.rank());
      Shape::Dims d;
      for(int k = 0; k < a; ++k) d.push_back(xs.dims()[k]);
      for(auto n : is.dims()) d.push_back(n);
      for(int k = a + 1; k < xs.rank(); ++k) d.push_back(xs.dims()[k]);
      c.shape = Shape(d);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& ix = *c.in[1];
      if(x.type() == Type::string) {  // element by element (strings own their bytes)
        int a = x.shape().axis(c.attrs.i("axis"));
        const auto& xd = x.shape().dims();
        int64_t outer = prodDims(xd, 0, a), n = xd[a], inner = prodDims(xd, a + 1, xd.size()), m = ix.size();
        ops::checkIndices(ix, n, a, c.node);
        auto& src = const_cast<TensorBase&>(x).strings();
        auto& dst = c.out.strings();
        for(int64_t r = 0; r < outer * m; ++r) {
          int64_t o = r / m, i = resolveIndex(static_cast<int64_t>(ix.getAsDouble(r % m)), n);
          for(int64_t k = 0; k < inner; ++k)
            dst[static_cast<size_t>(r * inner + k)] = src[static_cast<size_t>((o * n + i) * inner + k)];
        }
        return;
      }
      int64_t e = static_cast<int64_t>(elementBytes(x.type(), "gather"));
      int a = x.shape().axis(c.attrs.i("axis"));
      const auto& xd = x.shape().dims();
      int64_t outer = prodDims(xd, 0, a), n = xd[a], inner = prodDims(xd, a + 1, xd.size()) * e;
      int64_t m = ix.size();
      const char* src = static_cast<const char*>(x.raw());
      char* dst = static_cast<char*>(c.out.raw());
      ops::checkIndices(ix, n, a, c.node);  // before the threads: they cannot throw
      dispatchIndex(ix.type(), "gather", [&](auto tag) {
        using I = typename decltype(tag)::type;
        const I* idx = ix.data<I>();
        host::parallelFor(outer * m, c.out.size(), [&](int64_t lo, int64_t hi) {
          for(int64_t r = lo; r < hi; ++r) {
            int64_t o = r / m, i = resolveIndex(static_cast<int64_t>(idx[r % m]), n);
            std::memcpy(dst + r * inner, src + (o * n + i) * inner, static_cast<size_t>(inner));
          }
        });
      });
    })
    .backward([](GradCtx& g) {
      if(!g.needs(0)) return;
      int a = g.x(0)->shape().axis(g.attrs.i("axis"));
      g.add(0, scatter_add(g.dy, a, g.x(1), g.x(0)->shape()[a]));
    })
    .onnx("Gather", 1)
    .exporter([](OnnxExportCtx& c) {
      requireType(c, c.inputType(0), "Gather", false);
      c.emit("Gather", c.inputs(), {c.output()}, {{"axis", exportAxis(c, c.attrs().i("axis"), c.inputShape(0).rank())}});
    });

Expr gather(Expr x, int axis, Expr indices) { return x->graph()->make(kGather, {x, indices}, {{"axis", attr(axis)}}); }
Expr index_select(Expr x, int axis, Expr indices) { return gather(x, axis, indices); }
Expr index_select(Expr x, int axis, const std::vector<int64_t>& indices) {
  return gather(x, axis, x->graph()->indices(indices));
}

// y = zeros; y[i.., indices[j..], k..] += u[i.., j.., k..], for each pair
// (u, indices) of the inputs in turn. More than one pair: the gradients of
// several gathers from one tensor, summed into one output (GradCtx::add
// merges them) instead of one zero-filled tensor each and adds.
ONYX_OP(kScatterAdd, "scatter_add")
    .doc("y = zeros with dim entries on axis; y[i.., indices[j..], k..] += updates[i.., j.., k..] for each pair "
         "(updates, indices) of the inputs in turn (adjoint of gather)")
    .inputs(2, -1)
    .attr("axis", int64_t(0))
    .attr("dim", int64_t(0))
    .infer([](InferCtx& c) {
      c.check(c.n() % 2 == 0, c.n(), " inputs; scatter_add takes pairs (updates, indices)");
      Shape out;
      for(size_t p = 0; p < c.n(); p += 2) {
        const Shape& us = c.shapeOf(p);
        const Shape& is = c.shapeOf(p + 1);
        c.check(c.typeOf(p + 1) == Type::int64 || c.typeOf(p + 1) == Type::int32, "indices have type ",
                c.typeOf(p + 1), " but must be int64 or int32");
        c.check(isFloat(c.typeOf(p)) || isInt(c.typeOf(p)), "updates have type ", c.typeOf(p),
                " but must be a float or integer type");
        c.check(c.typeOf(p) == c.typeOf(0), "updates ", p / 2, " have type ", c.typeOf(p), ", the first ",
                c.typeOf(0));
        int q = is.rank(), r = us.rank() - q + 1;
        c.check(r >= 1, "updates of rank ", us.rank(), " cannot hold indices of rank ", q);
        int a = c.axis(c.attrs.i("axis"), r);
        int64_t dim = c.attrs.i("dim");
        c.check(dim >= 0, "dim ", dim, " is negative");
        bool ok = true;
        for(int k = 0; k < q; ++k) ok = ok && us.dims()[a + k] == is.dims()[k];
        c.check(ok, "updates ", us, " must hold the indices' shape ", is, " at axis ", a);
        Shape::Dims d;
        for(int k = 0; k < a; ++k) d.push_back(us.dims()[k]);
        d.push_back(dim);
        for(int k = a + q; k < us.rank(); ++k) d.push_back(us.dims()[k]);
        c.check(p == 0 || Shape(d) == out, "pair ", p / 2, " scatters into ", Shape(d), ", the first into ", out);
        out = Shape(d);
      }
      c.shape = out;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const auto& od = c.out.shape().dims();
      int a = c.out.shape().axis(c.attrs.i("axis"));
      int64_t outer = prodDims(od, 0, a), n = od[a], inner = prodDims(od, a + 1, od.size());
      zeroFill(c.out);
      for(size_t p = 0; p < c.in.size(); p += 2)  // before the threads: they cannot throw
        ops::checkIndices(*c.in[p + 1], n, a, c.node);
      for(size_t p = 0; p < c.in.size(); p += 2) {
        const TensorBase& u = *c.in[p];
        const TensorBase& ix = *c.in[p + 1];
        const int64_t m = ix.size();
        dispatchIndex(ix.type(), "scatter_add", [&](auto itag) {
          using I = typename decltype(itag)::type;
          const I* idx = ix.data<I>();
          dispatchNumeric(u.type(), "scatter_add", [&](auto tag) {
            using T = typename decltype(tag)::type;
            const T* up = u.data<T>();
            T* yp = c.out.data<T>();
            // Threads split rows of y (outer) or, with one row, the inner
            // elements, so repeated indices never race.
            auto body = [&](int64_t o0, int64_t o1, int64_t k0, int64_t k1) {
              for(int64_t o = o0; o < o1; ++o)
                for(int64_t j = 0; j < m; ++j) {
                  int64_t dst = (o * n + resolveIndex(static_cast<int64_t>(idx[j]), n)) * inner;
                  int64_t src = (o * m + j) * inner;
                  for(int64_t k = k0; k < k1; ++k)
                    host::store(yp, dst + k, host::load(yp, dst + k) + host::load(up, src + k));
                }
            };
            if(outer > 1)
              host::parallelFor(outer, u.size(), [&](int64_t lo, int64_t hi) { body(lo, hi, 0, inner); });
            else
              host::parallelFor(inner, u.size(), [&](int64_t lo, int64_t hi) { body(0, outer, lo, hi); });
          });
        });
      }
    })
    .backward([](GradCtx& g) {
      for(size_t p = 0; p < g.n(); p += 2)
        if(g.needs(p)) g.add(p, gather(g.dy, static_cast<int>(g.attrs.i("axis")), g.x(p + 1)));
    })
    .noOnnx("internal: only gradient graphs use it (the gradient of gather)");

Expr scatter_add(Expr updates, int axis, Expr indices, int64_t dim) {
  return updates->graph()->make(kScatterAdd, {updates, indices}, {{"axis", attr(axis)}, {"dim", attr(dim)}});
}

// ---------------------------------------------------------------- pad

// y = x padded by pads[k] before and pads[k+rank] after axis k
ONYX_OP(kPad, "pad")
    .doc("y = x padded (ONNX Pad: pads = [begins.., ends..], negative crops; mode constant/reflect/edge/wrap)")
    .inputs(1)
    .attr("pads", IntList{})
    .attr("mode", std::string("constant"))
    .attr("value", 0.0)
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      const IntList& p = c.attrs.ints("pads");
      const std::string& mode = c.attrs.s("mode");
      int r = s.rank();
      c.check(isPadMode(mode), "mode '", mode, "' is not one of constant, reflect, edge, wrap");
      c.check(static_cast<int>(p.size()) == 2 * r, "pads ", attrToString(p), " must have 2 * rank = ", 2 * r,
              " entries: [x1_begin, x2_begin, ..., x1_end, x2_end, ...]");
      Shape::Dims d;
      for(int k = 0; k < r; ++k) {
        int64_t n = s.dims()[k], b = p[k], e = p[k + r], kept = n - std::max<int64_t>(0, -b) - std::max<int64_t>(0, -e);
        c.check(kept >= 0, "pads ", attrToString(p), " remove more than the ", n, " elements of axis ", k);
        c.check(mode == "constant" || kept > 0 || (b <= 0 && e <= 0), "mode '", mode,
                "' cannot extend axis ", k, " that has no elements left");
        d.push_back(kept + std::max<int64_t>(0, b) + std::max<int64_t>(0, e));
      }
      c.shape = Shape(d);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const Shape& os = c.out.shape();
      int r = os.rank();
      if(r == 0) return ops::copyInput0(c);
      const IntList& p = c.attrs.ints("pads");
      const std::string& mode = c.attrs.s("mode");
      std::vector<std::vector<int64_t>> maps;
      for(int k = 0; k < r; ++k) maps.push_back(padMap(x.shape().dims()[k], p[k], p[k + r], mode));
      auto xs = x.shape().strides();
      int64_t inner = os.dims()[r - 1], rows = inner > 0 ? os.elements() / inner : 0;
      const auto& last = maps[r - 1];
      dispatchAll(x.type(), "pad", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T v = castFromDouble<T>(c.attrs.f("value"));
        const T* xp = x.data<T>();
        T* yp = c.out.data<T>();
        host::parallelFor(rows, c.out.size(), [&](int64_t lo, int64_t hi) {
          for(int64_t row = lo; row < hi; ++row) {
            int64_t off = 0, rem = row;
            bool fill = false;
            for(int k = r - 2; k >= 0; --k) {
              int64_t mk = maps[k][rem % os.dims()[k]];
              rem /= os.dims()[k];
              fill = fill || mk < 0;
              off += mk * xs[k];
            }
            T* y = yp + row * inner;
            if(fill) {
              std::fill(y, y + inner, v);
              continue;
            }
            for(int64_t j = 0; j < inner; ++j) y[j] = last[j] < 0 ? v : xp[off + last[j]];
          }
        });
      });
    })
    .backward([](GradCtx& g) {
      const IntList& p = g.attrs.ints("pads");
      const std::string& mode = g.attrs.s("mode");
      const Shape& xs = g.x(0)->shape();
      if(mode == "constant") {
        // Padding and cropping are each other's adjoints.
        std::vector<int64_t> neg;
        for(auto v : p) neg.push_back(-v);
        g.add(0, pad(g.dy, neg));
        return;
      }
      // The other modes copy along each axis independently through an index
      // map; the adjoint of each axis's copy is a scatter_add of that map.
      Expr d = g.dy;
      int r = xs.rank();
      for(int k = 0; k < r; ++k) {
        if(p[k] == 0 && p[k + r] == 0) continue;
        d = scatter_add(d, k, g.graph.indices(padMap(xs.dims()[k], p[k], p[k + r], mode)), xs.dims()[k]);
      }
      g.add(0, d);
    })
    .onnx("Pad", 1)
    .importer([](OnnxImportCtx& c) {
      // Opset 1: attribute paddings; 2-10: attributes pads and value; 11+:
      // inputs pads, [constant_value], and from 18 [axes] (pads then hold
      // begins and ends for those axes only).
      Expr x = c.input(0);
      int r = x->shape().rank();
      std::string mode = c.attrString("mode", "constant");
      std::vector<int64_t> pads;
      double value = 0;
      if(c.opset() < 11) {
        pads = c.attrInts(c.opset() < 2 ? "paddings" : "pads");
        value = c.attrFloat("value", 0.0);
      } else {
        pads = c.ints(1);
        if(c.numInputs() > 2 && c.hasInput(2)) {
          Tensor v = c.value(2);
          c.check(v->size() <= 1, "constant_value must hold one value, got shape ", v->shape());
          if(v->size() == 1) value = v->getAsDouble(0);
        }
        if(c.numInputs() > 3 && c.hasInput(3)) {
          std::vector<int64_t> axes = c.ints(3);
          size_t m = axes.size();
          c.check(pads.size() == 2 * m, "pads ", attrToString(attr(pads)), " must have 2 * ", m,
                  " entries for axes ", attrToString(attr(axes)));
          std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
          for(size_t i = 0; i < m; ++i) {
            size_t a = static_cast<size_t>(c.axis(axes[i], r));
            full[a] = pads[i];
            full[a + static_cast<size_t>(r)] = pads[i + m];
          }
          pads = full;
        }
      }
      c.setOutput(0, pad(x, pads, mode, value));
    })
    // The mirror: attributes paddings (1) / pads (2-10) and a float value;
    // from 11 inputs pads and constant_value (x's type, only when it is not
    // 0). Mode wrap is ONNX's from opset 19.
    .exporter([](OnnxExportCtx& c) {
      Attrs a = c.attrs();
      std::vector<int64_t> pads = toVec(a.ints("pads"));
      std::string mode = a.s("mode");
      double value = a.f("value");
      Type t = c.inputType(0);
      requireType(c, t, "Pad", true);
      if(mode == "wrap") c.requireOpset(19, "mode 'wrap'");
      bool hasValue = mode == "constant" && (value != 0 || std::signbit(value));
      bool native = c.opset() >= 13 || isOnnxFloat(t) ||
                    (c.opset() >= 11 && t != Type::boolean && t != Type::bfloat16);
      if(c.opset() >= 11) {
        emitOnFloat64(c, native, 13, "Pad",
                      [&](const std::vector<std::string>& in, const std::string& y, const std::string& p) {
                        std::vector<std::string> ins{in[0], c.intsConst(pads, p + "pads")};
                        if(hasValue) ins.push_back(c.scalarConst(value, native ? t : Type::float64, p + "constant_value"));
                        c.emit("Pad", ins, {y}, {{"mode", mode}});
                      });
        return;
      }
      // Before 11 the value is a float32 attribute (which is what the kernel
      // rounds it through for the 16-bit floats too).
      if(hasValue && t != Type::float32 && t != Type::float16 && t != Type::bfloat16 && std::isfinite(value) &&
         static_cast<double>(static_cast<float>(value)) != value)
        c.requireOpset(11, str("value ", value, " (not a float32 value, as Pad's attribute before 11 holds)"));
      emitOnFloat64(c, native, 11, "Pad",
                    [&](const std::vector<std::string>& in, const std::string& y, const std::string&) {
                      OnnxAttrs at{{c.opset() < 2 ? "paddings" : "pads", attr(pads)}, {"mode", mode}};
                      if(hasValue) at.push_back({"value", value});
                      c.emit("Pad", {in[0]}, {y}, at);
                    });
    });

Expr pad(Expr x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  if(std::all_of(pads.begin(), pads.end(), [](int64_t v) { return v == 0; }) &&
     static_cast<int>(pads.size()) == 2 * x->shape().rank())
    return x;
  return x->graph()->make(kPad, {x}, {{"pads", attr(pads)}, {"mode", attr(mode)}, {"value", attr(value)}});
}

// ---------------------------------------------------------------- composites

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
