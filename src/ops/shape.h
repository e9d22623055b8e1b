// Shape manipulation (src/ops/shape.cpp).
#pragma once
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

}  // namespace onyx
