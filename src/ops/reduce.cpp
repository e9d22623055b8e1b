// Reductions over any set of axes, with keepdims.
//
// ONNX: the Reduce* ops take `axes` as an attribute up to opset 12 (ReduceSum)
// or 17 (the others) and as an input (with noop_with_empty_axes) from then
// on: each op has one mapping per form. ReduceL1, ReduceSumSquare and
// ReduceLogSum are composites (sum of abs(x), of x*x, log of sum).
#include <onyx/ops/reduce.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/shape.h>
#ifndef ONYX_GPU_PLUGIN
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#endif

namespace onyx {

namespace {

// Normalised, sorted, unique axes (empty attr = all axes).
std::vector<int> reduceAxes(const Shape& s, const IntList& axes) {
  std::vector<int> r;
  if(axes.empty())
    for(int i = 0; i < s.rank(); ++i) r.push_back(i);
  for(auto a : axes) r.push_back(s.axis(a));
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

// Input shape with reduced axes set to 1.
Shape keptShape(const Shape& s, const std::vector<int>& axes) {
  Shape k = s;
  for(int a : axes) k.set(a, 1);
  return k;
}

// Output shape and type (x's) of a reduction.
void inferReduceShape(InferCtx& c) {
  std::vector<int> axes;
  try {
    axes = reduceAxes(c.shapeOf(0), c.attrs.ints("axes"));
  } catch(const Error& e) {
    c.fail(e.what());
  }
  Shape k = keptShape(c.shapeOf(0), axes);
  if(c.attrs.i("keepdims")) {
    c.shape = k;
  } else {
    Shape::Dims d;
    for(int i = 0; i < k.rank(); ++i)
      if(!std::binary_search(axes.begin(), axes.end(), i)) d.push_back(k.dims()[i]);
    c.shape = Shape(d);
  }
  c.type = c.typeOf(0);
}

void inferReduce(InferCtx& c) {
  inferReduceShape(c);
  c.check(isComputeType(c.type) && c.type != Type::boolean, "element type ", c.type,
          " is not numeric; cast x to a float or integer type");
}

// max/min also order bools (false < true).
void inferReduceOrdered(InferCtx& c) {
  inferReduceShape(c);
  c.check(isComputeType(c.type), "element type ", c.type, " cannot be ordered; cast x to a float or integer type");
}

void inferReduceFloat(InferCtx& c) {
  c.requireFloat(0);
  inferReduce(c);
}

// Tensor view of `out` with the input's rank (reduced axes as 1).
Tensor keptView(KernelCtx& c) {
  auto axes = reduceAxes(c.in[0]->shape(), c.attrs.ints("axes"));
  return c.out.reshaped(keptShape(c.in[0]->shape(), axes));
}

// ---- Reducers: the CPU kernel and the GPU kernel (backend/cuda/reduce.cuh)
// of each reduction come from one reducer: `init` (made on the host),
// fold(acc, element), merge(acc, acc) (associative, for partial results on
// the GPU) and finish(acc, count).

// Integer sums and products wrap around (two's complement), as the
// element-wise Add and Mul do: signed overflow would be undefined.
struct Plus {
  template <class A> ONYX_HD A operator()(A a, A b) const { return functional::wrapAdd(a, b); }
};
struct Times {
  template <class A> ONYX_HD A operator()(A a, A b) const { return functional::wrapMul(a, b); }
};
template <class A>
ONYX_HD bool isNan(A v) {
  if constexpr(std::is_floating_point<A>::value) return v != v;
  else return false;
}
// max and min with NaN propagating (the first NaN stays).
struct MaxOf {
  template <class A> ONYX_HD A operator()(A a, A b) const { return (b > a || isNan(b)) && !isNan(a) ? b : a; }
};
struct MinOf {
  template <class A> ONYX_HD A operator()(A a, A b) const { return (b < a || isNan(b)) && !isNan(a) ? b : a; }
};
struct Keep {
  template <class A> ONYX_HD A operator()(A a, int64_t) const { return a; }
};
// Integer mean: the exact sum's quotient truncated toward 0 (numpy's mean
// with an integer dtype); an empty set gives 0.
struct IntMean {
  template <class A> ONYX_HD A operator()(A a, int64_t n) const { return n == 0 ? A(0) : static_cast<A>(a / static_cast<A>(n)); }
};
struct FloatMean {
  ONYX_HD double operator()(double a, int64_t n) const { return a / static_cast<double>(n); }
};

// A reduction whose elements fold in with the op that merges partial results.
template <class A, class Op, class Fin = Keep>
struct Folding {
  A init;
  ONYX_HD A fold(A a, A v) const { return Op()(a, v); }
  ONYX_HD A merge(A a, A b) const { return Op()(a, b); }
  ONYX_HD auto finish(A a, int64_t n) const { return Fin()(a, n); }
};

// sqrt(sum of squares).
struct L2Reducer {
  double init = 0;
  ONYX_HD double fold(double a, double v) const { return a + v * v; }
  ONYX_HD double merge(double a, double b) const { return a + b; }
  ONYX_HD double finish(double a, int64_t) const { return ::sqrt(a); }
};

#ifndef ONYX_GPU_PLUGIN
// ---- float32 max and min over contiguous rows (the reduced axes last, a
// full reduction included: DynamicQuantizeLinear's range, 48 per BERT-base
// run). Max and min are exact in float32, so the elements are compared in 16
// float lanes instead of folded one by one in double (BERT-base's 96: 18.9 ->
// 4.4 ms on one core); a NaN anywhere gives the row's first NaN, as the fold
// (MaxOf/MinOf) propagates it.
// Eight float lanes as a GCC/clang vector (AVX registers in the AVX2 build,
// pairs of SSE ones in the baseline build).
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

template <bool IsMax>
__attribute__((always_inline)) inline float extremumBody(const float* x, int64_t n, float init) {
  F8 a0, a1;
  for(int l = 0; l < 8; ++l) a0[l] = a1[l] = init;
  I8 nan = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for(; i + 16 <= n; i += 16) {
    F8 v0, v1;
    std::memcpy(&v0, x + i, sizeof v0);
    std::memcpy(&v1, x + i + 8, sizeof v1);
    nan |= I8(v0 != v0) | I8(v1 != v1);
    // v > a ? v : a is exactly maxps (minps for <): one instruction on the
    // accumulator's chain, twice the speed of a compare and a bitwise select
    // (no vector-typed helper: its ABI would depend on the build's AVX
    // flags). A NaN lane is only flagged here; the row's NaN comes below.
    if(IsMax) {
      a0 = v0 > a0 ? v0 : a0;
      a1 = v1 > a1 ? v1 : a1;
    } else {
      a0 = v0 < a0 ? v0 : a0;
      a1 = v1 < a1 ? v1 : a1;
    }
  }
  float r = init;
  bool anyNan = false;
  for(; i < n; ++i) {
    const float v = x[i];
    anyNan = anyNan || v != v;
    r = IsMax ? (v > r ? v : r) : (v < r ? v : r);
  }
  for(int l = 0; l < 8; ++l) {
    anyNan = anyNan || nan[l] != 0;
    r = IsMax ? (a0[l] > r ? a0[l] : r) : (a0[l] < r ? a0[l] : r);
    r = IsMax ? (a1[l] > r ? a1[l] : r) : (a1[l] < r ? a1[l] : r);
  }
  if(anyNan)
    for(i = 0; i < n; ++i)
      if(x[i] != x[i]) return x[i];
  return r;
}
template <bool IsMax>
ONYX_TARGET_AVX2 float extremumAvx2(const float* x, int64_t n, float init) {
  return extremumBody<IsMax>(x, n, init);
}
template <bool IsMax>
float extremumBase(const float* x, int64_t n, float init) {
  return extremumBody<IsMax>(x, n, init);
}
template <bool IsMax>
float extremum(const float* x, int64_t n, float init) {
  return host::vec::bestIsa() != host::vec::Isa::scalar ? extremumAvx2<IsMax>(x, n, init)
                                                         : extremumBase<IsMax>(x, n, init);
}

// out (x's rank, 1s on the reduced axes) = max or min of x's rows when the
// reduced axes are a contiguous suffix of x's (or x holds one row); false,
// nothing written, otherwise.
template <bool IsMax>
bool extremumRows(const TensorBase& x, TensorBase& out) {
  const Shape& xs = x.shape();
  const Shape& os = out.shape();
  if(x.type() != Type::float32 || xs.rank() != os.rank() || out.size() == 0 || x.size() == 0) return false;
  int k = xs.rank();
  while(k > 0 && os[k - 1] == 1) --k;
  for(int j = 0; j < k; ++j)
    if(os[j] != xs[j]) return false;
  const int64_t rows = out.size(), n = x.size() / rows;
  const float init = IsMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  auto pick = [](float a, float b) { return IsMax ? MaxOf()(a, b) : MinOf()(a, b); };
  if(rows == 1) {
    // One row: chunks in parallel, their results folded in chunk order
    // (chunks of 16K floats: BERT-base's 128 x 768 activations split across
    // two threads).
    constexpr int64_t kChunk = int64_t(1) << 14;
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(host::numThreads(), n / kChunk));
    std::vector<float> part(size_t(chunks), init);
    host::parallelFor(chunks, n, [&](int64_t b, int64_t e) {
      for(int64_t ch = b; ch < e; ++ch) {
        const int64_t lo = n * ch / chunks, hi = n * (ch + 1) / chunks;
        part[size_t(ch)] = extremum<IsMax>(xp + lo, hi - lo, init);
      }
    });
    float r = init;
    for(float v : part) r = pick(r, v);
    op[0] = r;
    return true;
  }
  host::parallelFor(rows, x.size(), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) op[r] = extremum<IsMax>(xp + r * n, n, init);
  });
  return true;
}
#endif

// Where a reduction runs: on the CPU, or (in the CUDA plugin's nvcc build) on the GPU.
// out is the node's output viewed at x's rank.
struct ReduceOnHost {
  template <class T, class R>
  static void run(const TensorBase& x, TensorBase& out, R r) {
    using Acc = decltype(r.init);
    host::reduceInto<T, Acc>(x, out, r.init, [r](Acc a, Acc v) { return r.fold(a, v); },
                             [r](Acc a, Acc b) { return r.merge(a, b); },
                             [r](Acc a, int64_t n) { return r.finish(a, n); });
  }
};
#ifdef ONYX_GPU_PLUGIN
// cuda::reduceInto: backend/cuda/reduce.cuh, included by the plugin's
// generated wrapper of this file (ops/kernel_helpers.h).
struct ReduceOnGpu {
  template <class T, class R>
  static void run(const TensorBase& x, TensorBase& out, R r) { cuda::reduceInto<T>(x, out, r); }
};
#endif

// The kernels of a reduction: kernel<On>(c, out) dispatches the element type
// and runs On::run<T>(x, out, reducer).
template <class Body>
Kernels reduceKernels(Body body) {
  auto on = [body](auto where) {
    return [body, where](KernelCtx& c) {
      Tensor out = keptView(c);
      body(where, *c.in[0], *out);
    };
  };
#ifdef ONYX_GPU_PLUGIN
  return {on(ReduceOnHost()), on(ReduceOnGpu())};
#else
  return {on(ReduceOnHost()), KernelFn()};
#endif
}

// Reduced axes of the node (normalised), for backward rules.
std::vector<int> gradAxes(GradCtx& g) { return reduceAxes(g.x(0)->shape(), g.attrs.ints("axes")); }

// An output-shaped expression (dy, y) reshaped to x's rank with 1s on the
// reduced axes, so that it broadcasts against x.
Expr kept(GradCtx& g, Expr e) {
  auto axes = reduceAxes(g.x(0)->shape(), g.attrs.ints("axes"));
  return reshape(e, keptShape(g.x(0)->shape(), axes));
}

// The incoming gradient broadcast back to the input's shape.
Expr expandGrad(GradCtx& g) { return expand(kept(g, g.dy), g.x(0)->shape()); }

Expr makeReduce(const OpDef& op, Expr x, const std::vector<int>& axes, bool keepdims) {
  return x->graph()->make(op, {x}, {{"axes", attr(axes)}, {"keepdims", attr(keepdims)}});
}

// Identity of max: -inf for floats (so an empty reduction gives -inf), the
// lowest value for integers; and of min the other way round.
template <class A>
A lowestOf() {
  if constexpr(std::is_floating_point<A>::value) return -std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::lowest();
}
template <class A>
A highestOf() {
  if constexpr(std::is_floating_point<A>::value) return std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::max();
}

// Gradient of max/min: dy goes to the positions equal to the result; tied
// positions share it equally (between two tied values central differences
// see that split too; any other choice would be as valid a subgradient).
void extremumGrad(GradCtx& g) {
  Expr x = g.x(0);
  Expr mask = cast(eq(x, kept(g, g.y())), x->value_type());
  g.add(0, kept(g, g.dy) * (mask / sum(mask, gradAxes(g), true)));
}

// Running (max, scaled sum) state of a stable log-sum-exp: the value is
// m + log(s) with s = sum exp(x - m), and only one exp per element.
struct LogSumExpAcc {
  double m = -HUGE_VAL;
  double s = 0;
  LogSumExpAcc() = default;
  ONYX_HD explicit LogSumExpAcc(double v) : m(v), s(1) {}
};

struct LseReducer {
  LogSumExpAcc init;
  ONYX_HD LogSumExpAcc fold(LogSumExpAcc a, LogSumExpAcc v) const { return merge(a, v); }
  ONYX_HD LogSumExpAcc merge(LogSumExpAcc a, LogSumExpAcc b) const {
    if(a.s == 0) return b;
    // Equal maxima (including two infinities) add without exp(inf - inf).
    if(b.m == a.m) { a.s += b.s; return a; }
    if(b.m < a.m) { a.s += b.s * ::exp(b.m - a.m); return a; }
    // b.m larger, or NaN, which then propagates through m and s.
    b.s += a.s * ::exp(a.m - b.m);
    return b;
  }
  ONYX_HD double finish(LogSumExpAcc a, int64_t) const {
    if(a.s != a.s) return a.s;                          // a NaN input
    if(a.s == 0 || a.m == HUGE_VAL || a.m == -HUGE_VAL) return a.m;  // empty, or an infinite input
    return a.m + ::log(a.s);
  }
};

}  // namespace

// ---- ONNX import

// One ONNX reduction. `full` builds it over `axes` (empty: all axes). With
// axes as an input (ReduceSum 13+, the others 18+) an empty or absent axes
// input and noop_with_empty_axes = 1 reduce nothing: the result is then
// `none(x)`, the element-wise part of the reduction (abs for ReduceL1, x*x
// for ReduceSumSquare; x itself for the plain ones), as the ONNX reference
// computes it.
OnnxImportFn reduceImport(bool axesInput, ReduceBuild full, NoopBuild none) {
  return [axesInput, full, none](OnnxImportCtx& c) {
    Expr x = c.input(0);
    bool keepdims = c.attrInt("keepdims", 1) != 0;
    std::vector<int> axes;
    bool noop = false;
    if(axesInput) {
      noop = c.attrInt("noop_with_empty_axes", 0) != 0;
      if(c.numInputs() > 1 && c.hasInput(1))
        for(int64_t a : c.ints(1)) axes.push_back(static_cast<int>(a));
    } else {
      for(int64_t a : c.attrInts("axes")) axes.push_back(static_cast<int>(a));
    }
    if(axes.empty() && noop) {
      c.setOutput(0, none ? none(x) : x);
      return;
    }
    c.setOutput(0, full(x, axes, keepdims));
  };
}

namespace {

// ---- ONNX export

// The element type a Reduce* op computes x of type `t` in at the target
// opset: t itself when ONNX takes it, else a wider type in which the result
// is the same (undefined: none). ReduceSum/Mean/Prod never take 8- and
// 16-bit integers: int64 holds their sum, product and mean, and a sum or
// product is wrapped back into t as Onyx's kernel does (exportReduce);
// ReduceMax/Min take int8/uint8 from opset 12 and bool from 20, and select
// a value, so any wider type is exact; bfloat16 comes with opset 13 (only
// max/min can go through float32 before: a sum or mean would round twice).
Type reduceComputeType(const std::string& opType, Type t, int opset) {
  bool select = opType == "ReduceMax" || opType == "ReduceMin";
  switch(t) {
    case Type::float16: case Type::float32: case Type::float64:
    case Type::int32: case Type::int64: case Type::uint32: case Type::uint64: return t;
    case Type::bfloat16: return opset >= 13 ? t : select ? Type::float32 : Type::undefined;
    case Type::int8: case Type::uint8:
      if(select) return opset >= 12 ? t : Type::int32;
      return Type::int64;
    case Type::int16: case Type::uint16: return select ? Type::int32 : Type::int64;
    case Type::boolean:
      if(!select) return Type::undefined;
      return opset >= 20 ? t : opset >= 12 ? Type::uint8 : Type::int32;
    default: return Type::undefined;
  }
}

// A reduction as ONNX `opType`: axes as an attribute (axesInput false) or,
// from ReduceSum 13 / the others 18, as an int64 input. Empty axes (all)
// leave the attribute or input out, which reduces everything
// (noop_with_empty_axes stays 0). keepdims is written only when 0.
void exportReduce(OnnxExportCtx& c, const std::string& opType, bool axesInput) {
  Attrs a = c.attrs();
  Type t = c.inputType(0);
  IntList axes = a.ints("axes");
  // Negative axes come with opset 11; a repeated axis is normalised away
  // (ONNX rejects it), as is one spelled both ways (-1 and rank-1).
  std::vector<int> norm = reduceAxes(c.inputShape(0), axes);
  bool plain = norm.size() == axes.size() && (c.opset() >= 11 || std::all_of(axes.begin(), axes.end(), [](int64_t v) {
                 return v >= 0;
               }));
  if(!plain) axes = IntList(norm.begin(), norm.end());
  Type ct = reduceComputeType(opType, t, c.opset());
  c.check(ct != Type::undefined, opType, " does not take element type ", t, " at opset ", c.opset(),
          t == Type::bfloat16 ? " (bfloat16 comes with opset 13)" : "");
  c.check(ct == t || c.opset() >= 6, opType, " on ", t, " needs a Cast, which this exporter writes from opset 6 on");
  std::string x = c.input(0);
  if(ct != t) {
    std::string xc = c.fresh("x_" + std::string(typeName(ct)));
    c.emit("Cast", {x}, {xc}, {{"to", int64_t(ct)}});
    x = xc;
  }
  std::string y = ct == t ? c.output() : c.fresh("reduced");
  // A sum or product of 8/16-bit integers keeps the low bits of its int64
  // result, as the kernel does (a Cast would saturate): Python's mod by
  // 2^bits (Mod, opset 10), shifted by half the range for signed types.
  // Its constants stay inputs when imported again, unlike axes: written
  // first, they keep their place in the initializer list on a second trip.
  bool narrow = t == Type::int8 || t == Type::uint8 || t == Type::int16 || t == Type::uint16;
  bool wrap = ct != t && narrow && (opType == "ReduceSum" || opType == "ReduceProd");
  if(wrap) c.requireOpset(10, str(opType, " on ", t, " (computed in int64, wrapped back with Mod)"));
  bool isSigned = t == Type::int8 || t == Type::int16;
  std::string range, half;
  if(wrap) {
    int64_t m = int64_t(1) << typeBits(t);
    range = c.scalarConst(double(m), Type::int64, "range");
    if(isSigned) half = c.scalarConst(double(m / 2), Type::int64, "half_range");
  }
  // The axes initializer is named after the value it reduces into, as the
  // node that imports as that value names it when exported again.
  std::string prefix = c.output() + "/";
  std::string hint = y.rfind(prefix, 0) == 0 ? y.substr(prefix.size()) + "/axes" : "axes";
  std::vector<std::string> ins{x};
  OnnxAttrs attrs;
  if(!axes.empty()) {
    if(axesInput) ins.push_back(c.intsConst(std::vector<int64_t>(axes.begin(), axes.end()), hint));
    else attrs.emplace_back("axes", AttrValue(axes));
  }
  if(a.i("keepdims") == 0) attrs.emplace_back("keepdims", AttrValue(int64_t(0)));
  c.emit(opType, ins, {y}, attrs);
  if(ct == t) return;
  if(wrap) {
    if(isSigned) {
      std::string sh = c.fresh("shifted");
      c.emit("Add", {y, half}, {sh});
      y = sh;
    }
    std::string w = c.fresh("wrapped");
    c.emit("Mod", {y, range}, {w});
    y = w;
    if(isSigned) {
      std::string u = c.fresh("unshifted");
      c.emit("Sub", {y, half}, {u});
      y = u;
    }
  }
  c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
}

std::function<void(OnnxExportCtx&)> reduceExport(const char* opType, bool axesInput) {
  std::string op = opType;
  return [op, axesInput](OnnxExportCtx& c) { exportReduce(c, op, axesInput); };
}

}  // namespace

// y = sum of x over `axes`
ONYX_OP(kSum, "sum")
    .doc("y = sum of x over axes (all if empty)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduce)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
      dispatchNumeric(x.type(), "sum", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;
        decltype(on)::template run<T>(x, out, Folding<A, Plus>{A(0)});
      });
    }))
    .backward([](GradCtx& g) { g.add(0, expandGrad(g)); })
    .onnx("ReduceSum", 1, 12)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return sum(x, a, k); }))
    .exporter(reduceExport("ReduceSum", false))
    .onnx("ReduceSum", 13)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return sum(x, a, k); }))
    .exporter(reduceExport("ReduceSum", true));

Expr sum(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kSum, x, axes, keepdims); }
Expr sum(Expr x, int axis) { return sum(x, std::vector<int>{axis}, true); }
Expr sum(Expr x) { return sum(x, std::vector<int>{}, false); }

// y = sum of x over `axes` / number of elements reduced
ONYX_OP(kMean, "mean")
    .doc("y = mean of x over axes (all if empty); integer means truncate toward 0")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduce)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
      dispatchNumeric(x.type(), "mean", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;
        if constexpr(std::is_integral<T>::value) decltype(on)::template run<T>(x, out, Folding<A, Plus, IntMean>{A(0)});
        else decltype(on)::template run<T>(x, out, Folding<double, Plus, FloatMean>{0.0});
      });
    }))
    .backward([](GradCtx& g) {
      double n = static_cast<double>(g.x(0)->shape().elements()) / static_cast<double>(g.y()->shape().elements());
      g.add(0, expand(kept(g, g.dy) * (1.0 / n), g.x(0)->shape()));
    })
    .onnx("ReduceMean", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return mean(x, a, k); }))
    .exporter(reduceExport("ReduceMean", false))
    .onnx("ReduceMean", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return mean(x, a, k); }))
    .exporter(reduceExport("ReduceMean", true));

Expr mean(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kMean, x, axes, keepdims); }
Expr mean(Expr x, int axis) { return mean(x, std::vector<int>{axis}, true); }
Expr mean(Expr x) { return mean(x, std::vector<int>{}, false); }

// y = max of x over `axes`
ONYX_OP(kMax, "max")
    .doc("y = max of x over axes (all if empty); NaN propagates; bool: any (empty: false)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduceOrdered)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
#ifndef ONYX_GPU_PLUGIN
      if constexpr(std::is_same<decltype(on), ReduceOnHost>::value)
        if(extremumRows<true>(x, out)) return;
#endif
      dispatchAll(x.type(), "max", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;  // uint64 for bool: false 0, true 1
        decltype(on)::template run<T>(x, out, Folding<A, MaxOf>{lowestOf<A>()});
      });
    }))
    .backward(extremumGrad)
    .onnx("ReduceMax", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return max(x, a, k); }))
    .exporter(reduceExport("ReduceMax", false))
    .onnx("ReduceMax", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return max(x, a, k); }))
    .exporter(reduceExport("ReduceMax", true));

Expr max(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kMax, x, axes, keepdims); }
Expr max(Expr x, int axis) { return max(x, std::vector<int>{axis}, true); }
Expr max(Expr x) { return max(x, std::vector<int>{}, false); }

// y = min of x over `axes`
ONYX_OP(kMin, "min")
    .doc("y = min of x over axes (all if empty); NaN propagates; bool: all (empty: true)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduceOrdered)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
#ifndef ONYX_GPU_PLUGIN
      if constexpr(std::is_same<decltype(on), ReduceOnHost>::value)
        if(extremumRows<false>(x, out)) return;
#endif
      dispatchAll(x.type(), "min", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;  // uint64 for bool: false 0, true 1
        decltype(on)::template run<T>(x, out, Folding<A, MinOf>{highestOf<A>()});
      });
    }))
    .backward(extremumGrad)
    .onnx("ReduceMin", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return min(x, a, k); }))
    .exporter(reduceExport("ReduceMin", false))
    .onnx("ReduceMin", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return min(x, a, k); }))
    .exporter(reduceExport("ReduceMin", true));

Expr min(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kMin, x, axes, keepdims); }
Expr min(Expr x, int axis) { return min(x, std::vector<int>{axis}, true); }
Expr min(Expr x) { return min(x, std::vector<int>{}, false); }

// y = product of x over `axes`
ONYX_OP(kProd, "prod")
    .doc("y = product of x over axes (all if empty)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduce)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
      dispatchNumeric(x.type(), "prod", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = host::AccOf<T>;
        decltype(on)::template run<T>(x, out, Folding<A, Times>{A(1)});
      });
    }))
    .backward([](GradCtx& g) {
      // dy/dx_i is the product of the other elements. y / x_i fails at zeros,
      // so: p = product of the nonzero elements (zeros replaced by 1), and
      // the product of the others is p / x_i when x_i != 0, else p, times
      // [no zero among the others].
      Expr x = g.x(0);
      Type t = x->value_type();
      std::vector<int> axes = gradAxes(g);
      Expr zero = cast(eq(x, 0.0), t);
      Expr nonzero = x + zero;
      Expr p = prod(nonzero, axes, true);
      Expr zerosElsewhere = sum(zero, axes, true) - zero;
      Expr others = (p / nonzero) * cast(eq(zerosElsewhere, 0.0), t);
      g.add(0, kept(g, g.dy) * others);
    })
    .onnx("ReduceProd", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return prod(x, a, k); }))
    .exporter(reduceExport("ReduceProd", false))
    .onnx("ReduceProd", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return prod(x, a, k); }))
    .exporter(reduceExport("ReduceProd", true));

Expr prod(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kProd, x, axes, keepdims); }
Expr prod(Expr x, int axis) { return prod(x, std::vector<int>{axis}, true); }
Expr prod(Expr x) { return prod(x, std::vector<int>{}, false); }

// y = log(sum(exp(x))) over `axes`, computed as m + log(sum(exp(x - m))), m = max
ONYX_OP(kLogSumExp, "logsumexp")
    .doc("y = log(sum(exp(x))) over axes (all if empty), stable for large |x|")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduceFloat)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
      dispatchFloat(x.type(), "logsumexp", [&](auto tag) {
        decltype(on)::template run<typename decltype(tag)::type>(x, out, LseReducer());
      });
    }))
    // dy/dx = exp(x - y), the softmax of x over the axes.
    .backward([](GradCtx& g) { g.add(0, kept(g, g.dy) * exp(g.x(0) - kept(g, g.y()))); })
    .onnx("ReduceLogSumExp", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return logsumexp(x, a, k); }))
    .exporter(reduceExport("ReduceLogSumExp", false))
    .onnx("ReduceLogSumExp", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return logsumexp(x, a, k); }))
    .exporter(reduceExport("ReduceLogSumExp", true));

Expr logsumexp(Expr x, const std::vector<int>& axes, bool keepdims) {
  return makeReduce(kLogSumExp, x, axes, keepdims);
}
Expr logsumexp(Expr x, int axis) { return logsumexp(x, std::vector<int>{axis}, true); }
Expr logsumexp(Expr x) { return logsumexp(x, std::vector<int>{}, false); }

// y = sqrt(sum(x^2)) over `axes`
ONYX_OP(kL2Norm, "l2_norm")
    .doc("y = sqrt(sum(x^2)) over axes (all if empty)")
    .inputs(1)
    .attr("axes", IntList{})
    .attr("keepdims", int64_t(1))
    .infer(inferReduceFloat)
    .kernel(reduceKernels([](auto on, const TensorBase& x, TensorBase& out) {
      dispatchFloat(x.type(), "l2_norm", [&](auto tag) {
        decltype(on)::template run<typename decltype(tag)::type>(x, out, L2Reducer());
      });
    }))
    .backward([](GradCtx& g) {
      // dy/dx = x / y. Where y = 0 every x is 0 and the subgradient 0 is
      // taken: the denominator becomes 1 there instead of giving 0/0.
      Expr y = kept(g, g.y());
      Expr safe = y + cast(eq(y, 0.0), y->value_type());
      g.add(0, kept(g, g.dy) * (g.x(0) / safe));
    })
    .onnx("ReduceL2", 1, 17)
    .importer(reduceImport(false, [](Expr x, const std::vector<int>& a, bool k) { return l2_norm(x, a, k); }))
    .exporter(reduceExport("ReduceL2", false))
    .onnx("ReduceL2", 18)
    .importer(reduceImport(true, [](Expr x, const std::vector<int>& a, bool k) { return l2_norm(x, a, k); }, [](Expr x) { return abs(x); }))
    .exporter(reduceExport("ReduceL2", true));

Expr l2_norm(Expr x, const std::vector<int>& axes, bool keepdims) { return makeReduce(kL2Norm, x, axes, keepdims); }
Expr l2_norm(Expr x, int axis) { return l2_norm(x, std::vector<int>{axis}, true); }
Expr l2_norm(Expr x) { return l2_norm(x, std::vector<int>{}, false); }

}  // namespace onyx
