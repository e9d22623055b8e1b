// Shape manipulation (src/ops/shape.cpp). Every op here moves elements without
// arithmetic, so all element types work (bool and integers included), except
// scatter_add, which adds. Negative axes count from the end.
#pragma once
#include <string>
#include <type_traits>
#include <vector>

#include <onyx/core/shape.h>
#include <onyx/graph/node.h>

namespace onyx {

// Same elements, new shape (one dim may be -1: inferred).
Expr reshape(Expr x, const Shape& shape);
Expr reshape(Expr x, const std::vector<int64_t>& shape);
// Numpy broadcast of x to `shape` (ONNX Expand: the result is the broadcast
// of both shapes).
Expr expand(Expr x, const Shape& shape);

// ONNX Flatten: 2-D result [d0*..*d(axis-1), d(axis)*..*d(n-1)]; axis in
// [-rank, rank].
Expr flatten(Expr x, int axis = 1);

// Output dim i is input dim perm[i]; an empty perm reverses the dims (ONNX).
Expr transpose(Expr x, const std::vector<int>& perm = {});

// ONNX Slice: elements start, start+step, ... up to (not including) end along
// `axis`. Negative start/end count from the end and both are clamped to the
// dim, so INT64_MAX means "to the end"; a negative step walks backwards.
// (A template so that braced lists, as in slice(x, {1}, {3}, {0}), always
// pick the multi-axis form below instead of converting to single integers.)
template <class A, class S, class E,
          class = std::enable_if_t<std::is_integral<A>::value && std::is_integral<S>::value && std::is_integral<E>::value>>
Expr slice(Expr x, A axis, S start, E end, int64_t step = 1);
// Several axes at once; empty `axes` means 0, 1, ..., empty `steps` all 1.
Expr slice(Expr x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
           const std::vector<int64_t>& axes = {}, const std::vector<int64_t>& steps = {});
// Zeros of `shape` with `x` written at the positions slice(zeros, ...) would
// read (the gradient of slice).
Expr slice_scatter(Expr x, const Shape& shape, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                   const std::vector<int64_t>& axes = {}, const std::vector<int64_t>& steps = {});

// Joins tensors of one type and rank along `axis` (other dims must match).
Expr concat(const std::vector<Expr>& xs, int axis);
// Consecutive pieces of x along `axis` with the given sizes (summing to the dim).
std::vector<Expr> split(Expr x, int axis, const std::vector<int64_t>& sizes);

// ONNX Gather: y[i.., j.., k..] = x[i.., indices[j..], k..] with `axis`
// selecting where the index dims go. Indices are int32 or int64 of any rank;
// negative ones count from the end; out of range is an error at run time.
Expr gather(Expr x, int axis, Expr indices);
// Marian's name for the same op.
Expr index_select(Expr x, int axis, Expr indices);
Expr index_select(Expr x, int axis, const std::vector<int64_t>& indices);
// Adjoint of gather: zeros with `dim` entries along `axis`, then
// y[i.., indices[j..], k..] += updates[i.., j.., k..]; repeated indices add up.
Expr scatter_add(Expr updates, int axis, Expr indices, int64_t dim);

// ONNX Pad. pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (2 * rank
// entries); a negative pad removes elements. mode: "constant" (fills `value`),
// "reflect" (mirrors without repeating the edge), "edge" (repeats the edge),
// "wrap" (periodic).
Expr pad(Expr x, const std::vector<int64_t>& pads, const std::string& mode = "constant", double value = 0);

// ---- src/ops/shape2.cpp

// ONNX Trilu on the last two dims: upper keeps x[.., i, j] where j - i >= k,
// lower where j - i <= k; everything else becomes 0.
Expr trilu(Expr x, bool upper = true, int64_t k = 0);
// ONNX Tile: x repeated repeats[k] times along axis k (one entry per dim).
Expr tile(Expr x, const std::vector<int64_t>& repeats);
// ONNX Squeeze (empty axes: every size-1 dim) and Unsqueeze (axes index the
// result).
Expr squeeze(Expr x, const std::vector<int64_t>& axes = {});
Expr unsqueeze(Expr x, const std::vector<int64_t>& axes);
// ONNX DepthToSpace on NCHW: mode "DCR" (depth-column-row) or "CRD"; and
// its inverse SpaceToDepth (mode from opset 28).
Expr depth_to_space(Expr x, int64_t blocksize, const std::string& mode = "DCR");
Expr space_to_depth(Expr x, int64_t blocksize, const std::string& mode = "DCR");
// ONNX ReverseSequence: along time_axis, the first lens[b] entries of batch
// entry b (along batch_axis) are reversed; the axes are 0 and 1.
Expr reverse_sequence(Expr x, const std::vector<int64_t>& lens, int batchAxis = 1, int timeAxis = 0);

namespace detail {
Expr sliceAxis(Expr x, int axis, int64_t start, int64_t end, int64_t step);
}  // namespace detail

// ---- For kernels: host-side helpers of shape.cpp that the GPU kernels
// (backend/cuda/ops_shape.cpp) share.
namespace ops {
// Bytes per element for the byte-moving kernels; an onyx::Error for types
// without whole bytes per element (packed 4-bit types, strings).
size_t elementBytes(Type t, const char* op);
// An axis in [-rank, rank) normalised, or an onyx::Error naming `what`.
int normAxis(int64_t axis, int rank, const char* what);
// d[from] * .. * d[to - 1].
int64_t prodDims(const Shape::Dims& d, size_t from, size_t to);
// An onyx::Error naming the node unless every index of `idx` (int32 or
// int64, on the host) lies in [-n, n) on `axis`; kernels cannot report one.
void checkIndices(const TensorBase& idx, int64_t n, int axis, const Node& node);
// pad: for each output position along an axis of n elements padded by
// `begin` and `end`, the input position it reads (-1: the constant).
std::vector<int64_t> padMap(int64_t n, int64_t begin, int64_t end, const std::string& mode);
// trilu's k for x of shape s, clamped so that i + k cannot overflow
// (shape2.cpp).
int64_t triluK(int64_t k, const Shape& s);
// x viewed as [outer, n, inner] around `axis` (the kernels that run along
// lines: cumsum, cumprod, hardmax, topk); line r (of outer * inner) starts
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
}  // namespace ops
template <class A, class S, class E, class>
Expr slice(Expr x, A axis, S start, E end, int64_t step) {
  return detail::sliceAxis(x, static_cast<int>(axis), static_cast<int64_t>(start), static_cast<int64_t>(end), step);
}

}  // namespace onyx
