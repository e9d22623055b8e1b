// Slicing (src/ops/slicing.cpp): part of a tensor read or written. Every op
// here moves elements without arithmetic, so all element types work (bool
// and integers included), except scatter_add, which adds. Negative axes
// count from the end.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <onyx/core/shape.h>
#include <onyx/graph/node.h>

namespace onyx {

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
// Consecutive pieces of x along `axis` with the given sizes (summing to the
// dim); concat (layout.h) is its inverse.
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

// ONNX ReverseSequence: along time_axis, the first lens[b] entries of batch
// entry b (along batch_axis) are reversed; the axes are 0 and 1.
Expr reverse_sequence(Expr x, const std::vector<int64_t>& lens, int batchAxis = 1, int timeAxis = 0);

namespace detail {
Expr sliceAxis(Expr x, int axis, int64_t start, int64_t end, int64_t step);
}  // namespace detail

// ---- For kernels: pad's host-side helper, which its GPU kernel
// (backend/cuda/ops_slicing.cpp) shares.
namespace ops {
// pad: for each output position along an axis of n elements padded by
// `begin` and `end`, the input position it reads (-1: the constant).
std::vector<int64_t> padMap(int64_t n, int64_t begin, int64_t end, const std::string& mode);
}  // namespace ops

template <class A, class S, class E, class>
Expr slice(Expr x, A axis, S start, E end, int64_t step) {
  return detail::sliceAxis(x, static_cast<int>(axis), static_cast<int64_t>(start), static_cast<int64_t>(end), step);
}

}  // namespace onyx
