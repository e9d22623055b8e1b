// Shape (src/ops/shape.cpp): the same elements, in order, under a new shape.
// Every op here moves elements without arithmetic, so all element types work
// (bool and integers included). The ops that move elements to new positions
// are in layout.h, those that read or write part of a tensor in slicing.h.
#pragma once
#include <cstdint>
#include <string>
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

// ONNX Tile: x repeated repeats[k] times along axis k (one entry per dim).
Expr tile(Expr x, const std::vector<int64_t>& repeats);
// ONNX Squeeze (empty axes: every size-1 dim) and Unsqueeze (axes index the
// result). Negative axes count from the end.
Expr squeeze(Expr x, const std::vector<int64_t>& axes = {});
Expr unsqueeze(Expr x, const std::vector<int64_t>& axes);

}  // namespace onyx
