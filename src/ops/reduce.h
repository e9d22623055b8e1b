// Reductions (src/ops/reduce.cpp). `axes` empty means all axes; negative
// axes count from the end. Each has three forms, as `sum`:
//   sum(x, axes, keepdims)   any set of axes
//   sum(x, axis)             seed form: one axis, kept as size 1
//   sum(x)                   all elements, rank-0 result
#pragma once
#include <functional>
#include <vector>

#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

Expr sum(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr sum(Expr x, int axis);
Expr sum(Expr x);

// Integer types truncate the quotient toward 0 (numpy's mean with an integer dtype).
Expr mean(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr mean(Expr x, int axis);
Expr mean(Expr x);

// NaN propagates. The gradient goes to the positions equal to the result;
// tied positions share it equally. Bools work too (max: any, min: all).
Expr max(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr max(Expr x, int axis);
Expr max(Expr x);
Expr min(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr min(Expr x, int axis);
Expr min(Expr x);

// The gradient is exact where inputs are 0 (product of the other elements).
Expr prod(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr prod(Expr x, int axis);
Expr prod(Expr x);

// log(sum(exp(x))), stable for large |x|. Float types only.
Expr logsumexp(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr logsumexp(Expr x, int axis);
Expr logsumexp(Expr x);

// sqrt(sum(x^2)) (ONNX ReduceL2); gradient 0 where the norm is 0. Float types only.
Expr l2_norm(Expr x, const std::vector<int>& axes, bool keepdims = true);
Expr l2_norm(Expr x, int axis);
Expr l2_norm(Expr x);

// ---- ONNX import helper, shared by the import rules of src/ops/reduce.cpp and
// the composites of converters/import_reduce.cpp.

using ReduceBuild = std::function<Expr(Expr x, const std::vector<int>& axes, bool keepdims)>;
using NoopBuild = std::function<Expr(Expr x)>;
// One ONNX reduction. `full` builds it over `axes` (empty: all axes). With
// axes as an input (ReduceSum 13+, the others 18+) an empty or absent axes
// input and noop_with_empty_axes = 1 reduce nothing: the result is then
// `none(x)`, the element-wise part of the reduction (abs for ReduceL1, x*x
// for ReduceSumSquare; x itself for the plain ones), as the ONNX reference
// computes it.
OnnxImportFn reduceImport(bool axesInput, ReduceBuild full, NoopBuild none = nullptr);

}  // namespace onyx
