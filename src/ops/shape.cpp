// Shape manipulation: reshape, expand, flatten, transpose, slice (and its
// adjoint slice_scatter), concat, split, gather (and its adjoint scatter_add),
// pad. Kernels that only move elements work on bytes, so one instantiation per
// element size serves every type.
#include <onyx/ops/shape.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include <onyx/backend/cpu/strided.h>
#include <onyx/core/device_backend.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

using namespace functional;

// Shared with the GPU kernels (shape.h).
size_t ops::elementBytes(Type t, const char* op) {
  int bits = typeBits(t);
  ONYX_CHECK(bits > 0 && bits % 8 == 0, op, ": element type ", t,
             " is not supported (this op needs a type with whole bytes per element)");
  return static_cast<size_t>(bits / 8);
}

namespace {

using ops::elementBytes;

// The element movers below (and ops::copyInput0) work on the tensors' own
// device, so kernels made only of them register for every device
// (OpDef::anyDevice).

void zeroFill(TensorBase& t) {
  if(t.bytes() == 0) return;
  // All-zero bytes are 0 / 0.0 / false in every type.
  if(t.onHost()) std::memset(t.raw(), 0, t.bytes());
  else gpuBackend().fillZero(t.getDeviceId().no, t.raw(), t.bytes());
}

template <size_t E>
void copyRunOf(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  for(int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds * int64_t(E), src + j * ss * int64_t(E), E);
}

// n elements of `esize` bytes, dst and src strides in elements.
void copyRun(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n, size_t esize) {
  if(ds == 1 && ss == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * esize);
    return;
  }
  switch(esize) {
    case 1: copyRunOf<1>(dst, ds, src, ss, n); return;
    case 2: copyRunOf<2>(dst, ds, src, ss, n); return;
    case 4: copyRunOf<4>(dst, ds, src, ss, n); return;
    case 8: copyRunOf<8>(dst, ds, src, ss, n); return;
    default:
      for(int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds * int64_t(esize), src + j * ss * int64_t(esize), esize);
  }
}

template <size_t E>
void copyTileOf(char* dst, int64_t dj, int64_t di, const char* src, int64_t sj, int64_t si, int64_t nj, int64_t ni) {
  for(int64_t j = 0; j < nj; ++j)
    for(int64_t i = 0; i < ni; ++i)
      std::memcpy(dst + (j * dj + i * di) * int64_t(E), src + (j * sj + i * si) * int64_t(E), E);
}

// A transpose-like copy: the innermost dim is contiguous in dst but strided in
// src, while dim j is contiguous in src. Row by row it would read one element
// per cache line; tiles of both dims reuse each line read.
void copyTiled(char* dst, const int64_t* a, const char* src, const int64_t* b, const int64_t* d, int n, int j,
               int64_t total, size_t esize) {
  constexpr int64_t kTile = 32;
  int64_t e = static_cast<int64_t>(esize), inner = d[n - 1], tilesJ = (d[j] + kTile - 1) / kTile;
  int64_t outer = total / (inner * d[j]);
  host::parallelFor(outer * tilesJ, total, [&](int64_t lo, int64_t hi) {
    for(int64_t task = lo; task < hi; ++task) {
      int64_t rem = task / tilesJ, j0 = (task % tilesJ) * kTile, od = 0, os = 0;
      for(int k = n - 2; k >= 0; --k) {
        if(k == j) continue;
        int64_t idx = rem % d[k];
        rem /= d[k];
        od += idx * a[k];
        os += idx * b[k];
      }
      int64_t nj = std::min(kTile, d[j] - j0);
      for(int64_t i0 = 0; i0 < inner; i0 += kTile) {
        int64_t ni = std::min(kTile, inner - i0);
        char* t = dst + (od + j0 * a[j] + i0) * e;
        const char* f = src + (os + j0 + i0 * b[n - 1]) * e;
        switch(esize) {
          case 1: copyTileOf<1>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 2: copyTileOf<2>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 4: copyTileOf<4>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          case 8: copyTileOf<8>(t, a[j], 1, f, 1, b[n - 1], nj, ni); break;
          default:
            for(int64_t jj = 0; jj < nj; ++jj)
              for(int64_t ii = 0; ii < ni; ++ii)
                std::memcpy(t + (jj * a[j] + ii) * e, f + (jj + ii * b[n - 1]) * e, esize);
        }
      }
    }
  });
}

// dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of `dims`
// (strides in elements, possibly negative). Size-1 dims are dropped and dims
// that are contiguous for both sides merged, so a copy that is dense on both
// sides becomes one memcpy per row.
void copyStridedHost(void* dstv, const int64_t* ds, const void* srcv, const int64_t* ss, const int64_t* dims,
                     int rank, size_t esize) {
  host::StridedPlan p(ds, ss, dims, rank);
  if(p.total == 0) return;
  int n = p.n;
  const int64_t *d = p.d, *a = p.a, *b = p.b;
  int64_t total = p.total;
  char* dst = static_cast<char*>(dstv);
  const char* src = static_cast<const char*>(srcv);
  if(a[n - 1] == 1 && b[n - 1] != 1) {
    for(int j = 0; j < n - 1; ++j)
      if(b[j] == 1) return copyTiled(dst, a, src, b, d, n, j, total, esize);
  }
  int64_t inner = d[n - 1], rows = total / inner;
  int64_t e = static_cast<int64_t>(esize);
  host::parallelFor(rows, total, [&](int64_t lo, int64_t hi) {
    for(int64_t row = lo; row < hi; ++row) {
      int64_t od = 0, os = 0, rem = row;
      for(int k = n - 2; k >= 0; --k) {
        int64_t idx = rem % d[k];
        rem /= d[k];
        od += idx * a[k];
        os += idx * b[k];
      }
      copyRun(dst + od * e, a[n - 1], src + os * e, b[n - 1], inner, esize);
    }
  });
}

// The strided copy on `dev`, where both buffers are.
void copyStrided(DeviceId dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims,
                 int rank, size_t esize) {
  if(dev.type == DeviceType::cpu) copyStridedHost(dst, ds, src, ss, dims, rank, esize);
  else gpuBackend().copyStrided(dev.no, dst, ds, src, ss, dims, rank, esize);
}

Shape::Dims denseStrides(const Shape::Dims& dims) { return Shape(dims).strides(); }

}  // namespace

int ops::normAxis(int64_t axis, int rank, const char* what) {
  ONYX_CHECK(axis >= -rank && axis < rank, what, " ", axis, " is out of range for rank ", rank, " (valid: ", -rank,
             "..", rank - 1, ")");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

namespace {

using ops::normAxis;

// Tries f() and turns an onyx::Error into an inference failure (which adds the
// op and input shapes to the message).
template <class F>
auto orFail(InferCtx& c, F f) -> decltype(f()) {
  try {
    return f();
  } catch(const Error& e) {
    c.fail(e.what());
  }
}

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
    int a = normAxis(axes.empty() ? int64_t(k) : axes[k], r, "slice axis");
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
    sd.step[a] = step;
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
  Shape::Dims bigStr, partStr = denseStrides(sd.count);
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

namespace {

using ops::padMap;

// ---------------------------------------------------------------- gather

// Index i as a position in [0, n), or an error naming it.
inline int64_t resolveIndex(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

template <class I>
void checkIndices(const I* idx, int64_t m, int64_t n, int axis, const Node& node) {
  for(int64_t j = 0; j < m; ++j) {
    int64_t i = static_cast<int64_t>(idx[j]);
    ONYX_CHECK(i >= -n && i < n, node.type(), " (node ", node.getId(), "): index ", i, " at position ", j,
               " of the indices is out of range for axis ", axis, " of size ", n, " (valid: ", -n, "..", n - 1, ")");
  }
}

}  // namespace

int64_t ops::prodDims(const Shape::Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for(size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

void ops::checkIndices(const TensorBase& idx, int64_t n, int axis, const Node& node) {
  ONYX_ASSERT(idx.onHost(), "index check of a device tensor");
  dispatchIndex(idx.type(), node.type().c_str(), [&](auto tag) {
    onyx::checkIndices(idx.data<typename decltype(tag)::type>(), idx.size(), n, axis, node);
  });
}

namespace {

using ops::prodDims;

// ---------------------------------------------------------------- ONNX export

// An axis as the target opset takes it: ONNX accepts negative axes from
// opset 11 on, so before that it is written non-negative.
int64_t exportAxis(OnnxExportCtx& c, int64_t axis, int rank) {
  return c.opset() < 11 && axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> toVec(const IntList& l) { return std::vector<int64_t>(l.begin(), l.end()); }

bool isOnnxFloat(Type t) { return t == Type::float16 || t == Type::float32 || t == Type::float64; }

// Types that float64 holds exactly (a Cast there and back is the identity).
bool exactInFloat64(Type t) {
  switch(t) {
    case Type::boolean: case Type::int8: case Type::int16: case Type::int32:
    case Type::uint8: case Type::uint16: case Type::uint32: return true;
    default: return false;
  }
}

// Element types that ONNX added over the opsets. The ops whose type list is
// "every type" (Reshape, Flatten, Transpose, Pad) take bfloat16 from 13,
// float8 from 19, 4-bit integers from 21, float4e2m1 from 23, float8e8m0
// from 24 and 2-bit integers from 25; the other data-movement ops (Slice,
// Concat, Gather, Expand, Trilu, Tile, Where) stop at bfloat16 (13). Raises
// an automatic target opset as needed, else refuses naming the opset.
void requireType(OnnxExportCtx& c, Type t, const char* opType, bool everyType) {
  int need = 0;
  switch(t) {
    case Type::bfloat16: need = 13; break;
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz: need = 19; break;
    case Type::int4: case Type::uint4: need = 21; break;
    case Type::float4e2m1: need = 23; break;
    case Type::float8e8m0: need = 24; break;
    case Type::int2: case Type::uint2: need = 25; break;
    default: return;
  }
  c.check(everyType || need == 13, "ONNX ", opType, " takes no element type ", t, " at any opset");
  c.requireOpset(need, str("element type ", t));
}

// The op's ONNX node(s): emitOp(inputs, output, hint prefix) writes them.
using EmitOnFn = std::function<void(const std::vector<std::string>&, const std::string&, const std::string&)>;

// Old opsets of Reshape (< 5), Concat (< 4), Flatten (< 9) and Pad (< 11,
// and no bool before 13) lack some types: `native` says whether the op takes
// x's type at the target opset. If not, a type that float64 holds exactly is
// cast to float64 for the op and back (moving elements commutes with exact
// casts); otherwise the export needs opset `nativeFrom`. Names under
// "<node>/f64/" are what the float64 node, re-imported, exports its own
// values as.
void emitOnFloat64(OnnxExportCtx& c, bool native, int nativeFrom, const char* opType, const EmitOnFn& emitOp) {
  Type t = c.inputType(0);
  if(native) return emitOp(c.inputs(), c.output(), "");
  if(!exactInFloat64(t) || c.opset() < 6) {
    c.requireOpset(nativeFrom, str("element type ", t, " in ", opType));
    c.fail("element type ", t, " needs opset ", nativeFrom);  // not reached: requireOpset throws
  }
  std::vector<std::string> ins;
  for(size_t i = 0; i < c.numInputs(); ++i) {
    std::string v = c.fresh("f64_in" + std::to_string(i));
    c.emit("Cast", {c.input(i)}, {v}, {{"to", int64_t(Type::float64)}});
    ins.push_back(v);
  }
  std::string y = c.fresh("f64");
  emitOp(ins, y, "f64/");
  c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
}

}  // namespace

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
          known *= d[i];
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
          int64_t ax = axes.empty() ? int64_t(k) : axes[k];
          ax = ax < 0 ? ax + r : ax;
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
  int a = normAxis(axis, x->shape().rank(), "split: axis");
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

// ---------------------------------------------------------------- concat

// y = [x_0, x_1, ...] joined along axis
ONYX_OP(kConcat, "concat")
    .doc("y = inputs joined along axis (other dims must match)")
    .inputs(1, -1)
    .attr("axis", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& s0 = c.shapeOf(0);
      int r = s0.rank();
      c.check(r >= 1, "cannot concatenate rank-0 tensors; reshape them to 1-D first");
      int a = orFail(c, [&] { return normAxis(c.attrs.i("axis"), r, "axis"); });
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
    })
    .anyDevice([](KernelCtx& c) {
      size_t e = elementBytes(c.out.type(), "concat");
      const Shape& os = c.out.shape();
      int a = normAxis(c.attrs.i("axis"), os.rank(), "axis");
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
      int a = normAxis(g.attrs.i("axis"), g.dy->shape().rank(), "axis");
      int64_t off = 0;
      for(size_t i = 0; i < g.n(); ++i) {
        int64_t n = g.x(i)->shape()[a];
        if(g.needs(i)) g.add(i, slice(g.dy, a, off, off + n));
        off += n;
      }
    })
    .onnx("Concat", 4)
    .exporter([](OnnxExportCtx& c) {
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
      int a = orFail(c, [&] { return normAxis(c.attrs.i("axis"), xs.rank(), "axis"); });
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
      int64_t e = static_cast<int64_t>(elementBytes(x.type(), "gather"));
      int a = normAxis(c.attrs.i("axis"), x.shape().rank(), "axis");
      const auto& xd = x.shape().dims();
      int64_t outer = prodDims(xd, 0, a), n = xd[a], inner = prodDims(xd, a + 1, xd.size()) * e;
      int64_t m = ix.size();
      const char* src = static_cast<const char*>(x.raw());
      char* dst = static_cast<char*>(c.out.raw());
      dispatchIndex(ix.type(), "gather", [&](auto tag) {
        using I = typename decltype(tag)::type;
        const I* idx = ix.data<I>();
        checkIndices(idx, m, n, a, c.node);  // before the threads: they cannot throw
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
      int a = normAxis(g.attrs.i("axis"), g.x(0)->shape().rank(), "axis");
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

// y = zeros; y[i.., indices[j..], k..] += u[i.., j.., k..]
ONYX_OP(kScatterAdd, "scatter_add")
    .doc("y = zeros with dim entries on axis; y[i.., indices[j..], k..] += updates[i.., j.., k..] (adjoint of gather)")
    .inputs(2)
    .attr("axis", int64_t(0))
    .attr("dim", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& us = c.shapeOf(0);
      const Shape& is = c.shapeOf(1);
      c.check(c.typeOf(1) == Type::int64 || c.typeOf(1) == Type::int32, "indices have type ", c.typeOf(1),
              " but must be int64 or int32");
      c.check(isFloat(c.typeOf(0)) || isInt(c.typeOf(0)), "updates have type ", c.typeOf(0),
              " but must be a float or integer type");
      int q = is.rank(), r = us.rank() - q + 1;
      c.check(r >= 1, "updates of rank ", us.rank(), " cannot hold indices of rank ", q);
      int a = orFail(c, [&] { return normAxis(c.attrs.i("axis"), r, "axis"); });
      int64_t dim = c.attrs.i("dim");
      c.check(dim >= 0, "dim ", dim, " is negative");
      bool ok = true;
      for(int k = 0; k < q; ++k) ok = ok && us.dims()[a + k] == is.dims()[k];
      c.check(ok, "updates ", us, " must hold the indices' shape ", is, " at axis ", a);
      Shape::Dims d;
      for(int k = 0; k < a; ++k) d.push_back(us.dims()[k]);
      d.push_back(dim);
      for(int k = a + q; k < us.rank(); ++k) d.push_back(us.dims()[k]);
      c.shape = Shape(d);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& u = *c.in[0];
      const TensorBase& ix = *c.in[1];
      const auto& od = c.out.shape().dims();
      int a = normAxis(c.attrs.i("axis"), c.out.shape().rank(), "axis");
      int64_t outer = prodDims(od, 0, a), n = od[a], inner = prodDims(od, a + 1, od.size()), m = ix.size();
      zeroFill(c.out);
      dispatchIndex(ix.type(), "scatter_add", [&](auto itag) {
        using I = typename decltype(itag)::type;
        const I* idx = ix.data<I>();
        checkIndices(idx, m, n, a, c.node);
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
                for(int64_t k = k0; k < k1; ++k) host::store(yp, dst + k, host::load(yp, dst + k) + host::load(up, src + k));
              }
          };
          if(outer > 1)
            host::parallelFor(outer, u.size(), [&](int64_t lo, int64_t hi) { body(lo, hi, 0, inner); });
          else
            host::parallelFor(inner, u.size(), [&](int64_t lo, int64_t hi) { body(0, outer, lo, hi); });
        });
      });
    })
    .backward([](GradCtx& g) {
      if(g.needs(0)) g.add(0, gather(g.dy, static_cast<int>(g.attrs.i("axis")), g.x(1)));
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
            c.check(axes[i] >= -r && axes[i] < r, "axis ", axes[i], " is out of range for rank ", r);
            size_t a = static_cast<size_t>(axes[i] < 0 ? axes[i] + r : axes[i]);
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

}  // namespace onyx
