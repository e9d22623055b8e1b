// Indexing (src/ops/indexing.cpp): element-wise and N-d gather/scatter,
// arg-extrema, top-k, one-hot, and the data-dependent ONNX selections
// (NonZero, Compress, Unique) that are computed while the graph is built.
//
// Indices are int32 or int64; negative ones count from the end of their axis
// and an index out of range is an onyx::Error naming the op and the index
// when the kernel runs. Negative axes count from the end.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <onyx/core/tensor.h>
#include <onyx/graph/node.h>

namespace onyx {

struct KernelCtx;

// ONNX GatherElements: y has the indices' shape and
// y[i0.., j, ..] = x[i0.., indices[i0.., j, ..], ..] on `axis` (indices have
// x's rank; their other dims may be smaller than x's).
Expr gather_elements(Expr x, int axis, Expr indices);

// ONNX GatherND: the last dim of `indices` (k) indexes the first k dims of x
// after `batchDims` leading batch dims shared by x and indices; the result has
// shape indices.shape[:-1] + x.shape[batchDims + k:].
Expr gather_nd(Expr x, Expr indices, int batchDims = 0);

// ONNX ScatterElements: y = data, then y[.., indices[j..], ..] (on `axis`)
// combined with updates[j..]. reduction: "none" (write; with repeated indices
// the last one in row-major order wins), "add", "mul", "max", "min".
Expr scatter_elements(Expr data, int axis, Expr indices, Expr updates, const std::string& reduction = "none");

// ONNX ScatterND, the adjoint pattern of gather_nd: y = data, then the slices
// of data addressed by the index tuples of `indices` combined with `updates`
// (shape indices.shape[:-1] + data.shape[batchDims + k:]); reductions as in
// scatter_elements. batchDims > 0 (an Onyx extension) mirrors gather_nd's.
Expr scatter_nd(Expr data, Expr indices, Expr updates, const std::string& reduction = "none", int batchDims = 0);

// Index (int64) of the largest / smallest element along `axis`; ties give the
// first index, or the last with selectLastIndex. NaN counts as the extreme.
Expr argmax(Expr x, int axis = 0, bool keepdims = true, bool selectLastIndex = false);
Expr argmin(Expr x, int axis = 0, bool keepdims = true, bool selectLastIndex = false);

// Indices (int64) of the k largest (or smallest) elements along `axis`, in
// order of value; equal values keep their index order. NaN counts as larger
// than every number.
Expr topk_indices(Expr x, int64_t k, int axis = -1, bool largest = true);
// ONNX TopK: {values, indices}; the values are gather_elements of the indices,
// so gradients reach x.
std::pair<Expr, Expr> topk(Expr x, int64_t k, int axis = -1, bool largest = true);

// ONNX OneHot: y[.., j, ..] (j on `axis`, which is new) = values[1] where
// j == indices (negative indices count from depth) and values[0] elsewhere;
// values = [off, on] of the output's type. Indices outside [-depth, depth)
// give a row of `off`. Non-integer indices are truncated to integers.
Expr one_hot(Expr indices, int64_t depth, Expr values, int axis = -1);

// The following depend on the data of x, which is computed now
// (graph->value(x)): the graph built is valid for that data only.

// ONNX NonZero: int64 [rank, n] positions of the n nonzero elements in
// row-major order (a rank-0 x counts as 1-D).
Expr nonzero(Expr x);
Expr nonzero(ExpressionGraph& graph, const Tensor& x);

// ONNX Compress: the slices of x along `axis` where `condition` (1-D) is
// true (condition may be shorter than the axis). Differentiable in x.
Expr compress(Expr x, const std::vector<bool>& condition, int axis);
// Without an axis: the elements of x flattened.
Expr compress(Expr x, const std::vector<bool>& condition);

// ONNX Unique: the distinct elements of x flattened (no axis) or the
// distinct slices along `axis`; sorted ascending (lexicographically for
// slices) or in order of first occurrence. Values are differentiable in x;
// indices: first occurrence of each, inverse: for each element (slice) of x
// its position in values, counts: occurrences (all int64 1-D).
struct UniqueResult {
  Expr values, indices, inverse, counts;
};
UniqueResult unique(Expr x, bool sorted = true);
UniqueResult unique(Expr x, int axis, bool sorted = true);
// The same from x's data, given (for importers that read it with value()).
UniqueResult unique(Expr x, const Tensor& data, bool hasAxis, int axis, bool sorted);

// ---- For kernels: host-side helpers of indexing.cpp that the GPU kernels
// (backend/cuda/ops_indexing.cpp) share. Indices are read on a host copy
// and checked there (a kernel cannot report a bad one); op names the op in
// errors.
namespace ops {
// gather_elements / scatter_elements (axis attribute, input 0 the data,
// input 1 the indices): the element offset of input 0 each index addresses.
std::vector<int64_t> elementOffsets(KernelCtx& c, const char* op);
// gather_nd / scatter_nd (batch_dims attribute, the same inputs): the
// element offset in input 0 of the slice each index tuple addresses, and
// the elements per slice.
std::vector<int64_t> ndOffsets(KernelCtx& c, const char* op, int64_t& slice);
// A scatter's reduction attribute as host::combine's code (0: none).
int reductionCode(const std::string& reduction);
}  // namespace ops

}  // namespace onyx
