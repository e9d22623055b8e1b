// Cumulative ops (src/ops/cumulative.cpp): running sums and products along
// an axis. Negative axes count from the end; a rank-0 x counts as 1-D.
#pragma once
#include <onyx/graph/node.h>

namespace onyx {

// ONNX CumSum: running sum along `axis`; `exclusive` leaves out the element
// itself, `reverse` sums from the end.
Expr cumsum(Expr x, int axis, bool exclusive = false, bool reverse = false);

// ONNX CumProd: running product along `axis`; `exclusive` leaves out the
// element itself (the first product is 1), `reverse` multiplies from the end.
// The gradient is exact where elements are 0.
Expr cumprod(Expr x, int axis, bool exclusive = false, bool reverse = false);

}  // namespace onyx
