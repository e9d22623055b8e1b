// Reductions (src/ops/reduce.cpp). `axes` empty means all axes; negative
// axes count from the end.
#pragma once
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {

Expr sum(Expr x, const std::vector<int>& axes, bool keepdims = true);
// Seed form: sum over one axis, keeping it as size 1.
Expr sum(Expr x, int axis);
Expr sum(Expr x);  // all elements, rank-0 result

}  // namespace onyx
