// What the families that move elements without arithmetic share (shape.cpp,
// layout.cpp, slicing.cpp, and the line-wise kernels of cumulative.cpp,
// indexing.cpp and nn.cpp), with the GPU kernels of their ops in the CUDA
// plugin (backend/cuda/ops_*.cpp): the element movers, which work on the
// tensors' own device (so kernels made only of them register for every
// device, OpDef::anyDevice), host-side index checks, the [outer, n, inner]
// view around an axis, and how the export of these ops handles element types
// that old ONNX opsets lack. Not an op family: it declares no op.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <onyx/core/error.h>
#include <onyx/core/shape.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/op_def.h>

namespace onyx {

class OnnxExportCtx;

namespace ops {

// ---- element movers (on the tensors' own device)

// Bytes per element for the byte-moving kernels; an onyx::Error for types
// without whole bytes per element (packed 4-bit types, strings).
size_t elementBytes(Type t, const char* op);
// t = all-zero bytes (0 / 0.0 / false in every type).
void zeroFill(TensorBase& t);
// dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of `dims`
// (strides in elements, possibly negative), both buffers on `dev`.
void copyStrided(DeviceId dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims,
                 int rank, size_t esize);

// ---- host-side helpers

// d[from] * .. * d[to - 1].
int64_t prodDims(const Shape::Dims& d, size_t from, size_t to);
// An onyx::Error naming the node unless every index of `idx` (int32 or
// int64, on the host) lies in [-n, n) on `axis`; kernels cannot report one.
void checkIndices(const TensorBase& idx, int64_t n, int axis, const Node& node);
// x viewed as [outer, n, inner] around `axis` (the kernels that run along
// lines: cumsum, cumprod, softmax, hardmax); line r (of outer * inner) starts
// at (r / inner) * n * inner + r % inner and steps by inner.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  Lines(const Shape& s, int axis) {
    for(int i = 0; i < s.rank(); ++i) {
      int64_t d = s.dims()[static_cast<size_t>(i)];
      if(i < axis) outer *= d;
      else if(i == axis) n = d;
      else inner *= d;
    }
  }
  int64_t count() const { return outer * inner; }
  int64_t start(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};
// The lines along an op's axis attribute, which its inference has checked (a
// rank-0 x is one line of one element).
inline Lines linesAlong(const Shape& s, int64_t axis) { return Lines(s, s.rank() == 0 ? 0 : s.axis(axis)); }

// ---- inference

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

// ---- ONNX export

// An axis as the target opset takes it: ONNX accepts negative axes from
// opset 11 on, so before that it is written non-negative (an axis the
// inference has checked, or Flatten's split point in [-rank, rank]).
int64_t exportAxis(OnnxExportCtx& c, int64_t axis, int rank);
inline std::vector<int64_t> toVec(const IntList& l) { return std::vector<int64_t>(l.begin(), l.end()); }
inline bool isOnnxFloat(Type t) { return t == Type::float16 || t == Type::float32 || t == Type::float64; }
// Element types that ONNX added over the opsets. The ops whose type list is
// "every type" (Reshape, Flatten, Transpose, Pad) take bfloat16 from 13,
// float8 from 19, 4-bit integers from 21, float4e2m1 from 23, float8e8m0
// from 24 and 2-bit integers from 25; the other data-movement ops (Slice,
// Concat, Gather, Expand, Trilu, Tile, Where) stop at bfloat16 (13). Raises an
// automatic target opset as needed, else refuses naming the opset.
void requireType(OnnxExportCtx& c, Type t, const char* opType, bool everyType);
// The op's ONNX node(s): emitOp(inputs, output, hint prefix) writes them.
using EmitOnFn = std::function<void(const std::vector<std::string>&, const std::string&, const std::string&)>;
// Old opsets of Reshape (< 5), Concat (< 4), Flatten (< 9) and Pad (< 11,
// and no bool before 13) lack some types: `native` says whether the op takes
// x's type at the target opset. If not, a type that float64 holds exactly is
// cast to float64 for the op and back (moving elements commutes with exact
// casts); otherwise the export needs opset `nativeFrom`. Names under
// "<node>/f64/" are what the float64 node, re-imported, exports its own
// values as.
void emitOnFloat64(OnnxExportCtx& c, bool native, int nativeFrom, const char* opType, const EmitOnFn& emitOp);

}  // namespace ops
}  // namespace onyx
