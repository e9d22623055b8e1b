// Indexing: gather_elements / scatter_elements, gather_nd / scatter_nd,
// argmax / argmin, topk_indices; and the functions built on them
// (topk, one_hot, nonzero, compress, unique), which ONNX's TopK, OneHot,
// NonZero, Compress and Unique import as (converters/import_indexing.cpp).
//
// Kernels that only move elements work on unsigned integers of the element's
// size, so one instantiation per size serves every type. Indices are checked
// in one pass before any parallel loop (threads cannot throw), and a bad one
// is an onyx::Error naming the op, the node, the index and where it is.
#include <onyx/ops/indexing.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <type_traits>

#include <onyx/backend/cpu/combine.h>
#include <onyx/core/allocation_limit.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

using ops::exportAxis;
using ops::prodDims;

namespace {

// ---------------------------------------------------------------- helpers

bool isIndexType(Type t) { return t == Type::int64 || t == Type::int32; }

// Element-moving kernels: an unsigned type of the element's size.
template <class Fn>
void dispatchBytes(Type t, const char* op, Fn&& fn) {
  ONYX_CHECK(isComputeType(t), op, ": element type ", t, " is not supported");
  switch(typeBits(t)) {
    case 8: fn(TypeTag<uint8_t>{}); return;
    case 16: fn(TypeTag<uint16_t>{}); return;
    case 32: fn(TypeTag<uint32_t>{}); return;
    case 64: fn(TypeTag<uint64_t>{}); return;
    default: fail(op, ": element type ", t, " is not supported");
  }
}

std::string coordsOf(int64_t flat, const Shape::Dims& dims) {
  std::vector<int64_t> c(dims.size());
  for(size_t i = dims.size(); i-- > 0;) {
    c[i] = dims[i] > 0 ? flat % dims[i] : 0;
    if(dims[i] > 0) flat /= dims[i];
  }
  std::string s = "[";
  for(size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

[[noreturn]] void badIndex(const Node& node, int64_t i, int64_t flat, const Shape::Dims& idxDims, int axis,
                           int64_t n) {
  fail(node.type(), " (node ", node.getId(), "): index ", i, " at position ", coordsOf(flat, idxDims),
       " of the indices is out of range for axis ", axis, " of size ", n, " (valid: ", -n, "..", n - 1, ")");
}

// Every index in [-n, n) for one axis.
template <class I>
void checkIndices(const TensorBase& ix, int64_t n, int axis, const Node& node) {
  const I* p = ix.data<I>();
  for(int64_t j = 0, m = ix.size(); j < m; ++j) {
    int64_t i = static_cast<int64_t>(p[j]);
    if(i < -n || i >= n) badIndex(node, i, j, ix.shape().dims(), axis, n);
  }
}

inline int64_t resolve(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

// Calls f(i, off) for i in [lo, hi) of the row-major index space `dims`, with
// off = sum_k coord_k(i) * str[k].
template <class F>
void walkOffsets(const Shape::Dims& dims, const Shape::Dims& str, int64_t lo, int64_t hi, F&& f) {
  if(lo >= hi) return;
  size_t r = dims.size();
  std::vector<int64_t> c(r);
  int64_t rem = lo, off = 0;
  for(size_t k = r; k-- > 0;) {
    c[k] = rem % dims[k];
    rem /= dims[k];
    off += c[k] * str[k];
  }
  for(int64_t i = lo; i < hi; ++i) {
    f(i, off);
    for(size_t k = r; k-- > 0;) {
      off += str[k];
      if(++c[k] < dims[k]) break;
      off -= c[k] * str[k];
      c[k] = 0;
    }
  }
}

bool isReduction(const std::string& r) {
  return r == "none" || r == "add" || r == "mul" || r == "max" || r == "min";
}

template <class A>
bool isNan(A v) {
  if constexpr(std::is_floating_point<A>::value) return std::isnan(v);
  else return false;
}

using host::combine;  // backend/cpu/combine.h, shared with the GPU kernels

}  // namespace

int ops::reductionCode(const std::string& r) {
  return r == "add" ? 1 : r == "mul" ? 2 : r == "max" ? 3 : r == "min" ? 4 : 0;
}

namespace {

using ops::copyInput0;
using ops::reductionCode;

}  // namespace

// The GPU forms of the index ops (backend/cuda/ops_indexing.cpp) read and
// check the indices on a host copy, which gives every element's or row's
// offset as the CPU computes it.
std::vector<int64_t> ops::elementOffsets(KernelCtx& c, const char* op) {
  const TensorBase& x = *c.in[0];
  Tensor ix = c.in[1]->hostCopy();
  int a = x.shape().axis(c.attrs.i("axis"));
  int64_t n = x.shape().dims()[a];
  auto xs = x.shape().strides();
  int64_t sa = xs[a];
  xs[a] = 0;
  std::vector<int64_t> offs(static_cast<size_t>(ix->size()));
  dispatchIndex(ix->type(), op, [&](auto itag) {
    using I = typename decltype(itag)::type;
    onyx::checkIndices<I>(*ix, n, a, c.node);  // the anonymous namespace's, not ops::
    const I* idx = ix->data<I>();
    walkOffsets(ix->shape().dims(), xs, 0, ix->size(), [&](int64_t i, int64_t off) {
      offs[size_t(i)] = off + resolve(static_cast<int64_t>(idx[i]), n) * sa;
    });
  });
  return offs;
}

namespace {

// ---------------------------------------------------------------- scatter backward

// How one scatter op addresses data from updates: gatherU reads a data-shaped
// tensor at the updates' positions; scatter writes an updates-shaped tensor
// into a data-shaped one with a reduction.
struct ScatterFns {
  std::function<Expr(Expr)> gatherU;
  std::function<Expr(Expr, Expr, const std::string&)> scatter;
};

// Inputs: 0 data, 1 indices, 2 updates.
void scatterBackward(GradCtx& g, const ScatterFns& f) {
  const std::string& red = g.attrs.s("reduction");
  Expr x = g.x(0), u = g.x(2), dy = g.dy;
  Type t = x->value_type();
  ExpressionGraph& G = g.graph;
  const Shape& xs = x->shape();
  const Shape& us = u->shape();
  if(red == "add") {
    g.add(0, dy);
    if(g.needs(2)) g.add(2, f.gatherU(dy));
  } else if(red == "none") {
    // The element of y each update lands in is overwritten by the last update
    // aimed at it: scatter the updates' positions to find the winners.
    std::vector<int64_t> iota(static_cast<size_t>(us.elements()));
    std::iota(iota.begin(), iota.end(), int64_t(0));
    Expr pos = G.constant(us, inits::fromVector(iota), Type::int64);
    Expr winner = f.scatter(G.constant(xs, inits::fromValue(-1), Type::int64), pos, "none");
    if(g.needs(0)) g.add(0, where(eq(winner, -1.0), dy, 0.0));
    if(g.needs(2)) g.add(2, where(eq(f.gatherU(winner), pos), f.gatherU(dy), 0.0));
  } else if(red == "mul") {
    // y = x * prod(updates aimed at the element); the product of the others
    // is computed without dividing by zeros (as prod's gradient).
    if(g.needs(0)) g.add(0, dy * f.scatter(G.ones(xs, t), u, "mul"));
    if(g.needs(2)) {
      Expr z = cast(eq(u, 0.0), t);
      Expr nz = u + z;
      Expr p = f.scatter(G.ones(xs, t), nz, "mul");
      Expr zeros = f.scatter(G.zeros(xs, t), z, "add");
      Expr others = (f.gatherU(p) / nz) * cast(eq(f.gatherU(zeros) - z, 0.0), t);
      g.add(2, f.gatherU(dy * x) * others);
    }
  } else {
    // max / min: dy goes to the candidates equal to the result, tied ones
    // sharing it equally (as the max/min reductions).
    Expr y = g.y();
    Expr ex = cast(eq(x, y), t);
    Expr eu = cast(eq(u, f.gatherU(y)), t);
    Expr share = dy / (ex + f.scatter(G.zeros(xs, t), eu, "add"));
    g.add(0, share * ex);
    if(g.needs(2)) g.add(2, f.gatherU(share) * eu);
  }
}

// ---------------------------------------------------------------- gather_nd / scatter_nd geometry

struct NdDims {
  int b = 0;           // batch dims
  int64_t k = 0;       // index tuple length
  int64_t batches = 1, tuples = 1, slice = 1, dataBatch = 1;
};

NdDims ndDims(const Shape& data, const Shape& idx, int64_t batchDims) {
  NdDims d;
  const auto& dd = data.dims();
  const auto& id = idx.dims();
  d.b = static_cast<int>(batchDims);
  d.k = id[id.size() - 1];
  d.batches = prodDims(dd, 0, d.b);
  d.tuples = prodDims(id, d.b, id.size() - 1);
  d.slice = prodDims(dd, d.b + d.k, dd.size());
  d.dataBatch = prodDims(dd, d.b, dd.size());
  return d;
}

// Checks the shapes of data and indices; returns the gathered shape
// indices.shape[:-1] + data.shape[b + k:].
Shape inferNd(InferCtx& c, const Shape& data, const Shape& idx, Type idxType, int64_t b) {
  c.check(isIndexType(idxType), "indices have type ", idxType, " but must be int64 or int32");
  int r = data.rank(), q = idx.rank();
  c.check(q >= 1, "indices must have rank >= 1 (the last dim holds the index tuples)");
  c.check(b >= 0 && b < q && b <= r, "batch_dims ", b, " must be in [0, ", std::min(q - 1, r), "] for data of rank ",
          r, " and indices of rank ", q);
  for(int i = 0; i < b; ++i)
    c.check(data.dims()[i] == idx.dims()[i], "batch dim ", i, " is ", data.dims()[i], " in data but ",
            idx.dims()[i], " in indices; the first batch_dims dims must match");
  int64_t k = idx.dims()[q - 1];
  c.check(k >= 1 && k <= r - b, "index tuples have length ", k, " (the last dim of the indices) but must be in [1, ",
          r - b, "] for data of rank ", r, " and batch_dims ", b);
  Shape::Dims d;
  for(int i = 0; i < q - 1; ++i) d.push_back(idx.dims()[i]);
  for(int i = static_cast<int>(b + k); i < r; ++i) d.push_back(data.dims()[i]);
  return Shape(d);
}

// Element offsets (within a batch of data) of every index tuple, checked.
template <class I>
std::vector<int64_t> ndOffsets(const TensorBase& data, const TensorBase& ix, const NdDims& d, const Node& node) {
  const auto& dd = data.shape().dims();
  auto str = data.shape().strides();
  const I* p = ix.data<I>();
  std::vector<int64_t> offs(static_cast<size_t>(d.batches * d.tuples));
  for(int64_t t = 0; t < d.batches * d.tuples; ++t) {
    int64_t off = 0;
    for(int64_t j = 0; j < d.k; ++j) {
      int64_t flat = t * d.k + j;
      int a = d.b + static_cast<int>(j);
      int64_t i = static_cast<int64_t>(p[flat]), n = dd[a];
      if(i < -n || i >= n) badIndex(node, i, flat, ix.shape().dims(), a, n);
      off += resolve(i, n) * str[a];
    }
    offs[static_cast<size_t>(t)] = off + (t / d.tuples) * d.dataBatch;
  }
  return offs;
}
}  // namespace

std::vector<int64_t> ops::ndOffsets(KernelCtx& c, const char* op, int64_t& slice) {
  const TensorBase& x = *c.in[0];
  Tensor ix = c.in[1]->hostCopy();
  NdDims d = ndDims(x.shape(), ix->shape(), c.attrs.i("batch_dims"));
  slice = d.slice;
  std::vector<int64_t> offs;
  dispatchIndex(ix->type(), op,
                [&](auto itag) { offs = onyx::ndOffsets<typename decltype(itag)::type>(x, *ix, d, c.node); });
  return offs;
}

namespace {

// ---------------------------------------------------------------- arg extrema, top-k

// a ranks above b: larger, with NaN above every number.
template <class A>
bool above(A a, A b) {
  if(isNan(a)) return !isNan(b);
  if(isNan(b)) return false;
  return a > b;
}

void inferArg(InferCtx& c) {
  const Shape& s = c.shapeOf(0);
  c.check(s.rank() >= 1, "x must have rank >= 1");
  c.check(isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean, "element type ", c.typeOf(0),
          " is not numeric; cast x to a float or integer type");
  int a = c.axis(c.attrs.i("axis"), s.rank());
  c.check(s.dims()[a] > 0, "axis ", a, " of ", s, " is empty: there is no extremum");
  Shape::Dims d;
  for(int k = 0; k < s.rank(); ++k)
    if(k != a) d.push_back(s.dims()[k]);
    else if(c.attrs.i("keepdims")) d.push_back(1);
  c.shape = Shape(d);
  c.type = Type::int64;
}

template <bool Max>
void argKernel(KernelCtx& c) {
  const TensorBase& x = *c.in[0];
  const auto& xd = x.shape().dims();
  int a = x.shape().axis(c.attrs.i("axis"));
  bool last = c.attrs.i("select_last_index") != 0;
  int64_t outer = prodDims(xd, 0, a), n = xd[a], inner = prodDims(xd, a + 1, xd.size());
  int64_t* y = c.out.data<int64_t>();
  dispatchNumeric(x.type(), c.node.type().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    host::parallelFor(outer * inner, x.size(), [&](int64_t lo, int64_t hi) {
      for(int64_t r = lo; r < hi; ++r) {
        int64_t base = (r / inner) * n * inner + r % inner;
        auto best = host::load(xp, base);
        int64_t at = 0;
        for(int64_t j = 1; j < n; ++j) {
          auto v = host::load(xp, base + j * inner);
          bool better = Max ? above(v, best) : above(best, v);
          // Ties (NaN with NaN too) go to the last with select_last_index,
          // as ONNX's reference (argmax of x reversed) has it.
          if(better || (last && (v == best || (isNan(v) && isNan(best))))) {
            best = v;
            at = j;
          }
        }
        y[r] = at;
      }
    });
  });
}

// ---------------------------------------------------------------- ONNX export

// bfloat16 comes to these ops with opset 13.
void requireBf16(OnnxExportCtx& c) {
  if(c.inputType(0) == Type::bfloat16) c.requireOpset(13, "element type bfloat16");
}

// ScatterElements / ScatterND (and Scatter, opsets 9-10): reduction add and
// mul come with opset 16, max and min with 18.
void emitScatter(OnnxExportCtx& c, const char* opType, const std::vector<std::string>& inputs, bool hasAxis) {
  Attrs a = c.attrs();
  std::string red = a.s("reduction");
  int need = red == "none" ? 0 : red == "add" || red == "mul" ? 16 : 18;
  c.requireOpset(need, "reduction '" + red + "'");
  requireBf16(c);
  OnnxAttrs at;
  if(hasAxis) at.push_back({"axis", exportAxis(c, a.i("axis"), c.inputShape(0).rank())});
  if(red != "none") at.push_back({"reduction", red});
  c.emit(opType, inputs, {c.output()}, at);
}

// ArgMax / ArgMin: select_last_index comes with opset 12. Before it the
// last extremum is found as n - 1 - (the first one of x reversed along the
// axis by a Gather).
void emitArg(OnnxExportCtx& c, const char* opType) {
  requireBf16(c);
  Attrs a = c.attrs();
  const Shape& xs = c.inputShape(0);
  int64_t axis = exportAxis(c, a.i("axis"), xs.rank());
  OnnxAttrs at{{"axis", axis}, {"keepdims", a.i("keepdims")}};
  if(a.i("select_last_index") == 0) return c.emit(opType, {c.input(0)}, {c.output()}, at);
  if(c.opset() >= 12) {
    at.push_back({"select_last_index", int64_t(1)});
    return c.emit(opType, {c.input(0)}, {c.output()}, at);
  }
  if(c.opset() < 7) c.requireOpset(12, "select_last_index=1");
  int64_t n = xs[xs.axis(axis)];
  std::vector<int64_t> rev;
  for(int64_t j = n - 1; j >= 0; --j) rev.push_back(j);
  std::string xr = c.fresh("reversed"), r = c.fresh("reversed_index");
  c.emit("Gather", {c.input(0), c.intsConst(rev, "reverse")}, {xr}, {{"axis", axis}});
  c.emit(opType, {xr}, {r}, at);
  c.emit("Sub", {c.constant(TensorBase::fromVector(Shape{}, std::vector<int64_t>{n - 1}), "last"), r}, {c.output()});
}

// The b batch coordinates of every index tuple put in front of it (as int64):
// indices that address the same elements with batch_dims 0.
std::string unbatchedIndices(OnnxExportCtx& c, int64_t b) {
  const Shape& is = c.inputShape(1);
  Shape::Dims cd;
  for(int k = 0; k < is.rank() - 1; ++k) cd.push_back(is.dims()[k]);
  cd.push_back(b);
  int64_t tuples = 1;
  for(int k = static_cast<int>(b); k < is.rank() - 1; ++k) tuples *= is.dims()[k];
  int64_t n = Shape(cd).elements() / b;
  std::vector<int64_t> coords(static_cast<size_t>(n * b));
  for(int64_t t = 0; t < n; ++t) {
    int64_t rem = t / tuples;
    for(int64_t k = b - 1; k >= 0; --k) {
      int64_t d = is.dims()[static_cast<size_t>(k)];
      coords[static_cast<size_t>(t * b + k)] = rem % d;
      rem /= d;
    }
  }
  std::string idx = c.input(1);
  if(c.inputType(1) != Type::int64) idx = c.emitCast(idx, Type::int64, "indices_i64");
  std::string full = c.fresh("indices");
  c.emit("Concat", {c.constant(TensorBase::fromVector(Shape(cd), coords), "batch_coords"), idx}, {full},
         {{"axis", int64_t(is.rank() - 1)}});
  return full;
}

}  // namespace

// ---------------------------------------------------------------- gather_elements

// y[i.., j, ..] = x[i.., indices[i.., j, ..], ..]
ONYX_OP(kGatherElements, "gather_elements")
    .doc("y[i.., j, ..] = x[i.., indices[i.., j, ..], ..] on axis; y has the indices' shape (ONNX GatherElements)")
    .inputs(2)
    .attr("axis", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      const Shape& is = c.shapeOf(1);
      c.check(isIndexType(c.typeOf(1)), "indices have type ", c.typeOf(1), " but must be int64 or int32");
      c.check(xs.rank() >= 1, "cannot gather from a rank-0 tensor");
      c.check(is.rank() == xs.rank(), "indices have rank ", is.rank(), " but must have x's rank ", xs.rank());
      int a = c.axis(c.attrs.i("axis"), xs.rank());
      for(int k = 0; k < xs.rank(); ++k)
        c.check(k == a || is.dims()[k] <= xs.dims()[k], "indices dim ", k, " is ", is.dims()[k],
                " but x's is only ", xs.dims()[k], " (off the axis, indices may not be larger than x)");
      c.check(xs.dims()[a] > 0 || is.elements() == 0, "cannot gather from the empty axis ", a, " of ", xs);
      c.shape = is;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& ix = *c.in[1];
      int a = x.shape().axis(c.attrs.i("axis"));
      int64_t n = x.shape().dims()[a];
      auto xs = x.shape().strides();
      int64_t sa = xs[a];
      xs[a] = 0;
      dispatchIndex(ix.type(), "gather_elements", [&](auto itag) {
        using I = typename decltype(itag)::type;
        checkIndices<I>(ix, n, a, c.node);
        const I* idx = ix.data<I>();
        dispatchBytes(x.type(), "gather_elements", [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* xp = static_cast<const T*>(x.raw());
          T* yp = static_cast<T*>(c.out.raw());
          host::parallelFor(c.out.size(), c.out.size(), [&](int64_t lo, int64_t hi) {
            walkOffsets(ix.shape().dims(), xs, lo, hi, [&](int64_t i, int64_t off) {
              yp[i] = xp[off + resolve(static_cast<int64_t>(idx[i]), n) * sa];
            });
          });
        });
      });
    })
    .backward([](GradCtx& g) {
      if(!g.needs(0)) return;
      Expr x = g.x(0);
      int a = x->shape().axis(g.attrs.i("axis"));
      g.add(0, scatter_elements(g.graph.zeros(x->shape(), x->value_type()), a, g.x(1), g.dy, "add"));
    })
    .onnx("GatherElements", 11)
    .exporter([](OnnxExportCtx& c) {
      requireBf16(c);
      c.emitDefault("GatherElements");
    });

Expr gather_elements(Expr x, int axis, Expr indices) {
  return x->graph()->make(kGatherElements, {x, indices}, {{"axis", attr(axis)}});
}

// ---------------------------------------------------------------- scatter_elements

// y = data; y[i.., indices[i.., j, ..], ..] (op)= updates[i.., j, ..]
ONYX_OP(kScatterElements, "scatter_elements")
    .doc("y = data; y[i.., indices[i.., j, ..], ..] = updates[i.., j, ..] on axis, combined by reduction "
         "none/add/mul/max/min (ONNX ScatterElements)")
    .inputs(3)
    .attr("axis", int64_t(0))
    .attr("reduction", std::string("none"))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      const Shape& is = c.shapeOf(1);
      const std::string& red = c.attrs.s("reduction");
      c.check(isReduction(red), "reduction '", red, "' is not one of none, add, mul, max, min");
      c.check(isIndexType(c.typeOf(1)), "indices have type ", c.typeOf(1), " but must be int64 or int32");
      c.check(c.typeOf(2) == c.typeOf(0), "updates have type ", c.typeOf(2), " but data has ", c.typeOf(0));
      c.check(red == "none" || (isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean), "reduction '", red,
              "' needs numbers, but data has type ", c.typeOf(0));
      c.check(c.shapeOf(2) == is, "updates have shape ", c.shapeOf(2), " but must have the indices' shape ", is);
      c.check(xs.rank() >= 1, "cannot scatter into a rank-0 tensor");
      c.check(is.rank() == xs.rank(), "indices have rank ", is.rank(), " but must have data's rank ", xs.rank());
      int a = c.axis(c.attrs.i("axis"), xs.rank());
      for(int k = 0; k < xs.rank(); ++k)
        c.check(k == a || is.dims()[k] <= xs.dims()[k], "indices dim ", k, " is ", is.dims()[k],
                " but data's is only ", xs.dims()[k], " (off the axis, indices may not be larger than data)");
      c.shape = xs;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& ix = *c.in[1];
      const TensorBase& u = *c.in[2];
      int a = x.shape().axis(c.attrs.i("axis"));
      int red = reductionCode(c.attrs.s("reduction"));
      int64_t n = x.shape().dims()[a];
      auto xs = x.shape().strides();
      int64_t sa = xs[a];
      xs[a] = 0;
      copyInput0(c);
      dispatchIndex(ix.type(), "scatter_elements", [&](auto itag) {
        using I = typename decltype(itag)::type;
        checkIndices<I>(ix, n, a, c.node);
        const I* idx = ix.data<I>();
        // In index order on one thread: repeated indices combine (or the
        // last one wins) deterministically.
        if(red == 0) {
          dispatchBytes(x.type(), "scatter_elements", [&](auto tag) {
            using T = typename decltype(tag)::type;
            const T* up = static_cast<const T*>(u.raw());
            T* yp = static_cast<T*>(c.out.raw());
            walkOffsets(ix.shape().dims(), xs, 0, ix.size(), [&](int64_t i, int64_t off) {
              yp[off + resolve(static_cast<int64_t>(idx[i]), n) * sa] = up[i];
            });
          });
          return;
        }
        dispatchNumeric(x.type(), "scatter_elements", [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* up = u.data<T>();
          T* yp = c.out.data<T>();
          walkOffsets(ix.shape().dims(), xs, 0, ix.size(), [&](int64_t i, int64_t off) {
            int64_t t = off + resolve(static_cast<int64_t>(idx[i]), n) * sa;
            host::store(yp, t, combine(red, host::load(yp, t), host::load(up, i)));
          });
        });
      });
    })
    .backward([](GradCtx& g) {
      int a = g.x(0)->shape().axis(g.attrs.i("axis"));
      Expr idx = g.x(1);
      scatterBackward(g, {[=](Expr e) { return gather_elements(e, a, idx); },
                          [=](Expr d, Expr u, const std::string& r) { return scatter_elements(d, a, idx, u, r); }});
    })
    .onnx("ScatterElements", 11)
    .exporter([](OnnxExportCtx& c) { emitScatter(c, "ScatterElements", c.inputs(), true); })
    // Opsets 9-10: ONNX Scatter, which ScatterElements renamed.
    .onnxExport(9, [](OnnxExportCtx& c) { emitScatter(c, "Scatter", c.inputs(), true); }, 10);

Expr scatter_elements(Expr data, int axis, Expr indices, Expr updates, const std::string& reduction) {
  return data->graph()->make(kScatterElements, {data, indices, updates},
                             {{"axis", attr(axis)}, {"reduction", attr(reduction)}});
}

// ---------------------------------------------------------------- gather_nd

// y[b.., t.., s..] = x[b.., indices[b.., t.., :], s..]
ONYX_OP(kGatherNd, "gather_nd")
    .doc("y[b.., t.., s..] = x[b.., indices[b.., t.., 0..k-1], s..] with batch_dims leading batch dims "
         "(ONNX GatherND)")
    .inputs(2)
    .attr("batch_dims", int64_t(0))
    .infer([](InferCtx& c) {
      c.shape = inferNd(c, c.shapeOf(0), c.shapeOf(1), c.typeOf(1), c.attrs.i("batch_dims"));
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& ix = *c.in[1];
      NdDims d = ndDims(x.shape(), ix.shape(), c.attrs.i("batch_dims"));
      std::vector<int64_t> offs;
      dispatchIndex(ix.type(), "gather_nd", [&](auto itag) {
        using I = typename decltype(itag)::type;
        offs = ndOffsets<I>(x, ix, d, c.node);
      });
      size_t e = static_cast<size_t>(typeBits(x.type()) / 8);
      ONYX_CHECK(isComputeType(x.type()) && e > 0, "gather_nd: element type ", x.type(), " is not supported");
      const char* src = static_cast<const char*>(x.raw());
      char* dst = static_cast<char*>(c.out.raw());
      size_t row = static_cast<size_t>(d.slice) * e;
      host::parallelFor(static_cast<int64_t>(offs.size()), c.out.size(), [&](int64_t lo, int64_t hi) {
        for(int64_t t = lo; t < hi; ++t)
          std::memcpy(dst + static_cast<size_t>(t) * row, src + static_cast<size_t>(offs[static_cast<size_t>(t)]) * e,
                      row);
      });
    })
    .backward([](GradCtx& g) {
      if(!g.needs(0)) return;
      Expr x = g.x(0);
      g.add(0, scatter_nd(g.graph.zeros(x->shape(), x->value_type()), g.x(1), g.dy, "add",
                          static_cast<int>(g.attrs.i("batch_dims"))));
    })
    .onnx("GatherND", 11)
    // batch_dims is ONNX's from opset 12; at 11 the batch coordinates go into
    // the indices instead.
    .exporter([](OnnxExportCtx& c) {
      requireBf16(c);
      int64_t b = c.attrs().i("batch_dims");
      if(b == 0) return c.emit("GatherND", c.inputs(), {c.output()});
      if(c.opset() >= 12) return c.emit("GatherND", c.inputs(), {c.output()}, {{"batch_dims", b}});
      c.emit("GatherND", {c.input(0), unbatchedIndices(c, b)}, {c.output()});
    });

Expr gather_nd(Expr x, Expr indices, int batchDims) {
  return x->graph()->make(kGatherNd, {x, indices}, {{"batch_dims", attr(batchDims)}});
}

// ---------------------------------------------------------------- scatter_nd

// y = data; y[b.., indices[b.., t.., :], s..] (op)= updates[b.., t.., s..]
ONYX_OP(kScatterNd, "scatter_nd")
    .doc("y = data; y[b.., indices[b.., t.., 0..k-1], s..] = updates[b.., t.., s..], combined by reduction "
         "none/add/mul/max/min (ONNX ScatterND; batch_dims as gather_nd's)")
    .inputs(3)
    .attr("reduction", std::string("none"))
    .attr("batch_dims", int64_t(0))
    .infer([](InferCtx& c) {
      const std::string& red = c.attrs.s("reduction");
      c.check(isReduction(red), "reduction '", red, "' is not one of none, add, mul, max, min");
      c.check(c.typeOf(2) == c.typeOf(0), "updates have type ", c.typeOf(2), " but data has ", c.typeOf(0));
      c.check(red == "none" || (isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean), "reduction '", red,
              "' needs numbers, but data has type ", c.typeOf(0));
      Shape us = inferNd(c, c.shapeOf(0), c.shapeOf(1), c.typeOf(1), c.attrs.i("batch_dims"));
      c.check(c.shapeOf(2) == us, "updates have shape ", c.shapeOf(2), " but must have shape ", us,
              " (indices.shape[:-1] + data.shape[batch_dims + k:])");
      c.shape = c.shapeOf(0);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const TensorBase& ix = *c.in[1];
      const TensorBase& u = *c.in[2];
      NdDims d = ndDims(x.shape(), ix.shape(), c.attrs.i("batch_dims"));
      int red = reductionCode(c.attrs.s("reduction"));
      std::vector<int64_t> offs;
      dispatchIndex(ix.type(), "scatter_nd", [&](auto itag) {
        using I = typename decltype(itag)::type;
        offs = ndOffsets<I>(x, ix, d, c.node);
      });
      copyInput0(c);
      int64_t s = d.slice;
      if(red == 0) {
        size_t e = static_cast<size_t>(typeBits(x.type()) / 8);
        ONYX_CHECK(isComputeType(x.type()) && e > 0, "scatter_nd: element type ", x.type(), " is not supported");
        const char* src = static_cast<const char*>(u.raw());
        char* dst = static_cast<char*>(c.out.raw());
        for(size_t t = 0; t < offs.size(); ++t)
          std::memcpy(dst + static_cast<size_t>(offs[t]) * e, src + t * static_cast<size_t>(s) * e,
                      static_cast<size_t>(s) * e);
        return;
      }
      dispatchNumeric(x.type(), "scatter_nd", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* up = u.data<T>();
        T* yp = c.out.data<T>();
        for(size_t t = 0; t < offs.size(); ++t)
          for(int64_t j = 0; j < s; ++j) {
            int64_t o = offs[t] + j;
            host::store(yp, o, combine(red, host::load(yp, o), host::load(up, static_cast<int64_t>(t) * s + j)));
          }
      });
    })
    .backward([](GradCtx& g) {
      int b = static_cast<int>(g.attrs.i("batch_dims"));
      Expr idx = g.x(1);
      scatterBackward(g, {[=](Expr e) { return gather_nd(e, idx, b); },
                          [=](Expr d, Expr u, const std::string& r) { return scatter_nd(d, idx, u, r, b); }});
    })
    .onnx("ScatterND", 11)
    // ONNX ScatterND has no batch_dims: with b of them, each index tuple gets
    // its b batch coordinates in front (a constant, concatenated to the
    // indices as int64), which addresses the same elements in the same order.
    .exporter([](OnnxExportCtx& c) {
      int64_t b = c.attrs().i("batch_dims");
      if(b == 0) return emitScatter(c, "ScatterND", c.inputs(), false);
      emitScatter(c, "ScatterND", {c.input(0), unbatchedIndices(c, b), c.input(2)}, false);
    });

Expr scatter_nd(Expr data, Expr indices, Expr updates, const std::string& reduction, int batchDims) {
  return data->graph()->make(kScatterNd, {data, indices, updates},
                             {{"reduction", attr(reduction)}, {"batch_dims", attr(batchDims)}});
}

// ---------------------------------------------------------------- argmax, argmin

// y = index of the largest x along axis
ONYX_OP(kArgMax, "argmax")
    .doc("y = index (int64) of the largest x along axis; ties: first, or last with select_last_index; NaN is largest")
    .inputs(1)
    .attr("axis", int64_t(0))
    .attr("keepdims", int64_t(1))
    .attr("select_last_index", int64_t(0))
    .infer(inferArg)
    .cpu(argKernel<true>)
    .notDifferentiable("integer output (indices)")
    .onnx("ArgMax", 1)
    .exporter([](OnnxExportCtx& c) { emitArg(c, "ArgMax"); });

// y = index of the smallest x along axis
ONYX_OP(kArgMin, "argmin")
    .doc("y = index (int64) of the smallest x along axis; ties: first, or last with select_last_index; NaN is "
         "smallest")
    .inputs(1)
    .attr("axis", int64_t(0))
    .attr("keepdims", int64_t(1))
    .attr("select_last_index", int64_t(0))
    .infer(inferArg)
    .cpu(argKernel<false>)
    .notDifferentiable("integer output (indices)")
    .onnx("ArgMin", 1)
    .exporter([](OnnxExportCtx& c) { emitArg(c, "ArgMin"); });

Expr argmax(Expr x, int axis, bool keepdims, bool selectLastIndex) {
  return x->graph()->make(kArgMax, {x},
                          {{"axis", attr(axis)}, {"keepdims", attr(keepdims)}, {"select_last_index", attr(selectLastIndex)}});
}
Expr argmin(Expr x, int axis, bool keepdims, bool selectLastIndex) {
  return x->graph()->make(kArgMin, {x},
                          {{"axis", attr(axis)}, {"keepdims", attr(keepdims)}, {"select_last_index", attr(selectLastIndex)}});
}

// ---------------------------------------------------------------- topk

// y[.., 0..k-1, ..] = indices of the k largest (smallest) x along axis, in order
ONYX_OP(kTopKIndices, "topk_indices")
    .doc("y = indices (int64) of the k largest (or smallest, largest=0) x along axis, best first; ties keep index "
         "order; NaN is largest")
    .inputs(1)
    .attr("k", int64_t(1))
    .attr("axis", int64_t(-1))
    .attr("largest", int64_t(1))
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      c.check(s.rank() >= 1, "x must have rank >= 1");
      c.check(isComputeType(c.typeOf(0)) && c.typeOf(0) != Type::boolean, "element type ", c.typeOf(0),
              " is not numeric; cast x to a float or integer type");
      int a = c.axis(c.attrs.i("axis"), s.rank());
      int64_t k = c.attrs.i("k");
      c.check(k >= 0 && k <= s.dims()[a], "k ", k, " must be in [0, ", s.dims()[a], "] (the size of axis ", a, ")");
      Shape::Dims d = s.dims();
      d[a] = k;
      c.shape = Shape(d);
      c.type = Type::int64;
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      const auto& xd = x.shape().dims();
      int a = x.shape().axis(c.attrs.i("axis"));
      int64_t k = c.attrs.i("k");
      bool largest = c.attrs.i("largest") != 0;
      int64_t outer = prodDims(xd, 0, a), n = xd[a], inner = prodDims(xd, a + 1, xd.size());
      int64_t* y = c.out.data<int64_t>();
      dispatchNumeric(x.type(), "topk_indices", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* xp = x.data<T>();
        host::parallelFor(outer * inner, x.size() * 4, [&](int64_t lo, int64_t hi) {
          std::vector<int64_t> ord(static_cast<size_t>(n));
          for(int64_t r = lo; r < hi; ++r) {
            int64_t base = (r / inner) * n * inner + r % inner;
            std::iota(ord.begin(), ord.end(), int64_t(0));
            auto at = [&](int64_t j) { return host::load(xp, base + j * inner); };
            auto before = [&](int64_t i, int64_t j) {
              auto vi = at(i), vj = at(j);
              bool first = largest ? above(vi, vj) : above(vj, vi);
              bool second = largest ? above(vj, vi) : above(vi, vj);
              return first || (!second && i < j);
            };
            std::partial_sort(ord.begin(), ord.begin() + k, ord.end(), before);
            int64_t ob = (r / inner) * k * inner + r % inner;
            for(int64_t j = 0; j < k; ++j) y[ob + j * inner] = ord[static_cast<size_t>(j)];
          }
        });
      });
    })
    .notDifferentiable("integer output (indices); topk's values get gradients through gather_elements")
    .noOnnx("ONNX TopK imports as topk_indices plus gather_elements for the values")
    // Exported as ONNX TopK's indices (output 1; the values output is left
    // unused), which imports back as this op alone. k is an attribute before
    // opset 10 and input 1 (a 1-D int64) from 10; largest comes with 11, and
    // before 11 TopK takes float types only (integers of up to 32 bits go
    // through an exact cast to float64: same order, same ties).
    .onnxExport(1, [](OnnxExportCtx& c) {
      Attrs a = c.attrs();
      Type t = c.inputType(0);
      int64_t k = a.i("k"), axis = a.i("axis");
      bool largest = a.i("largest") != 0;
      if(!largest) c.requireOpset(11, "largest=0 (the k smallest)");
      bool floats = t == Type::float16 || t == Type::float32 || t == Type::float64;
      bool native = floats || (c.opset() >= 11 && isInt(t)) || (t == Type::bfloat16 && c.opset() >= 24);
      std::string x = c.input(0);
      if(!native) {
        bool exact = t == Type::int8 || t == Type::int16 || t == Type::int32 || t == Type::uint8 ||
                     t == Type::uint16 || t == Type::uint32 || t == Type::bfloat16;
        // TopK takes float types only before 11, bfloat16 from 24.
        if(!exact || c.opset() < (t == Type::bfloat16 ? 13 : 6))
          c.requireOpset(t == Type::bfloat16 ? 24 : 11, str("element type ", t, " in TopK"));
        x = c.emitCast(x, Type::float64, "f64");
      }
      std::vector<std::string> in{x};
      OnnxAttrs at{{"axis", exportAxis(c, axis, c.inputShape(0).rank())}};
      if(c.opset() < 10)
        at.push_back({"k", k});
      else
        in.push_back(c.intsConst({k}, "k"));
      if(!largest) at.push_back({"largest", int64_t(0)});
      c.emit("TopK", in, {c.fresh("values"), c.output()}, at);
    });

Expr topk_indices(Expr x, int64_t k, int axis, bool largest) {
  return x->graph()->make(kTopKIndices, {x}, {{"k", attr(k)}, {"axis", attr(axis)}, {"largest", attr(largest)}});
}

std::pair<Expr, Expr> topk(Expr x, int64_t k, int axis, bool largest) {
  Expr i = topk_indices(x, k, axis, largest);
  return {gather_elements(x, axis, i), i};
}

// ---------------------------------------------------------------- one_hot

Expr one_hot(Expr indices, int64_t depth, Expr values, int axis) {
  ONYX_CHECK(depth >= 0, "one_hot: depth ", depth, " is negative");
  ONYX_CHECK(values->shape().elements() == 2, "one_hot: values must hold [off, on], got shape ", values->shape());
  int r = indices->shape().rank();
  ONYX_CHECK(axis >= -r - 1 && axis <= r, "one_hot: axis ", axis, " is out of range for a result of rank ", r + 1,
             " (valid: ", -r - 1, "..", r, ")");
  int a = normalizeAxis(axis, r + 1);
  ExpressionGraph& g = *indices->graph();
  Expr idx = cast(indices, Type::int64);
  idx = where(lt(idx, 0.0), idx + static_cast<double>(depth), idx);
  std::vector<int64_t> us = indices->shape().vec(), is(static_cast<size_t>(r + 1), 1);
  us.insert(us.begin() + a, 1);
  is[static_cast<size_t>(a)] = depth;
  const Shape positionsShape(is);  // checked: at most 2^56 elements
  // depth comes from the model's data: the host iota is held to the run's
  // memory limit like every tensor.
  checkHostAllocation(static_cast<size_t>(depth) * sizeof(int64_t), "one_hot's positions (depth)");
  std::vector<int64_t> iota(static_cast<size_t>(depth));
  std::iota(iota.begin(), iota.end(), int64_t(0));
  Expr positions = g.constant(positionsShape, inits::fromVector(iota), Type::int64);
  Expr flat = reshape(values, std::vector<int64_t>{2});
  Expr off = reshape(slice(flat, 0, 0, 1), Shape());
  Expr on = reshape(slice(flat, 0, 1, 2), Shape());
  return where(eq(reshape(idx, us), positions), on, off);
}

// ---------------------------------------------------------------- nonzero

Expr nonzero(ExpressionGraph& graph, const Tensor& x) {
  Shape::Dims dims = x->shape().dims();
  if(dims.empty()) dims.push_back(1);
  int r = static_cast<int>(dims.size());
  std::vector<int64_t> hits;
  for(int64_t i = 0, n = x->size(); i < n; ++i)
    if(x->getAsDouble(i) != 0) hits.push_back(i);  // NaN counts as nonzero
  int64_t m = static_cast<int64_t>(hits.size());
  std::vector<int64_t> v(static_cast<size_t>(r * m));
  for(int64_t j = 0; j < m; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for(int k = r - 1; k >= 0; --k) {
      v[static_cast<size_t>(k * m + j)] = rem % dims[k];
      rem /= dims[k];
    }
  }
  return graph.constant(Shape{r, m}, inits::fromVector(v), Type::int64);
}

Expr nonzero(Expr x) { return nonzero(*x->graph(), x->graph()->value(x)); }

// ---------------------------------------------------------------- compress

Expr compress(Expr x, const std::vector<bool>& condition, int axis) {
  const Shape& s = x->shape();
  int a = normalizeAxis(axis, s.rank(), "compress: axis");
  int64_t n = s.dims()[a];
  std::vector<int64_t> keep;
  for(size_t j = 0; j < condition.size(); ++j) {
    if(!condition[j]) continue;
    ONYX_CHECK(static_cast<int64_t>(j) < n, "compress: condition is true at position ", j, " but axis ", a, " of ",
               s, " has only ", n, " elements");
    keep.push_back(static_cast<int64_t>(j));
  }
  return gather(x, a, x->graph()->indices(keep));
}

Expr compress(Expr x, const std::vector<bool>& condition) {
  return compress(reshape(x, std::vector<int64_t>{-1}), condition, 0);
}

// ---------------------------------------------------------------- unique

UniqueResult unique(Expr x, const Tensor& data, bool hasAxis, int axis, bool sorted) {
  ONYX_CHECK(data->size() == x->shape().elements(), "unique: data of shape ", data->shape(),
             " does not match x of shape ", x->shape());
  Expr src = x;
  int a = 0;
  if(hasAxis) {
    a = normalizeAxis(axis, x->shape().rank(), "unique: axis");
  } else {
    src = reshape(x, std::vector<int64_t>{-1});
  }
  const auto& d = src->shape().dims();
  int64_t outer = prodDims(d, 0, a), n = d[a], inner = prodDims(d, a + 1, d.size());
  std::vector<double> v = data->toVector<double>();
  // Slice j, element e (in row-major order of the other dims).
  auto el = [&](int64_t j, int64_t e) { return v[static_cast<size_t>(((e / inner) * n + j) * inner + e % inner)]; };
  int64_t len = outer * inner;
  auto less = [](double p, double q) { return p < q || (std::isnan(q) && !std::isnan(p)); };  // NaN last
  auto cmp = [&](int64_t i, int64_t j) {
    for(int64_t e = 0; e < len; ++e) {
      double p = el(i, e), q = el(j, e);
      if(less(p, q)) return -1;
      if(less(q, p)) return 1;
    }
    return 0;
  };
  std::vector<int64_t> ord(static_cast<size_t>(n));
  std::iota(ord.begin(), ord.end(), int64_t(0));
  std::stable_sort(ord.begin(), ord.end(), [&](int64_t i, int64_t j) { return cmp(i, j) < 0; });
  // Groups of equal slices; the first of each (stable sort) is its first occurrence.
  std::vector<int64_t> first, counts, group(static_cast<size_t>(n));
  for(size_t p = 0; p < ord.size(); ++p) {
    if(p == 0 || cmp(ord[p - 1], ord[p]) != 0) {
      first.push_back(ord[p]);
      counts.push_back(0);
    }
    group[static_cast<size_t>(ord[p])] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  std::vector<int64_t> rank(first.size());
  std::iota(rank.begin(), rank.end(), int64_t(0));
  if(!sorted) {
    std::vector<int64_t> byFirst(first.size());
    std::iota(byFirst.begin(), byFirst.end(), int64_t(0));
    std::sort(byFirst.begin(), byFirst.end(), [&](int64_t p, int64_t q) {
      return first[static_cast<size_t>(p)] < first[static_cast<size_t>(q)];
    });
    std::vector<int64_t> f2, c2;
    for(size_t p = 0; p < byFirst.size(); ++p) {
      rank[static_cast<size_t>(byFirst[p])] = static_cast<int64_t>(p);
      f2.push_back(first[static_cast<size_t>(byFirst[p])]);
      c2.push_back(counts[static_cast<size_t>(byFirst[p])]);
    }
    first.swap(f2);
    counts.swap(c2);
  }
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  for(size_t j = 0; j < inverse.size(); ++j) inverse[j] = rank[static_cast<size_t>(group[j])];
  ExpressionGraph& g = *x->graph();
  UniqueResult res;
  res.indices = g.indices(first);
  res.values = gather(src, a, res.indices);
  res.inverse = g.indices(inverse);
  res.counts = g.indices(counts);
  return res;
}

UniqueResult unique(Expr x, bool sorted) { return unique(x, x->graph()->value(x), false, 0, sorted); }
UniqueResult unique(Expr x, int axis, bool sorted) { return unique(x, x->graph()->value(x), true, axis, sorted); }

}  // namespace onyx
