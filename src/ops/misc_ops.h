// Expression operators of src/ops/misc_ops.cpp.
#pragma once
#include <onyx/core/types.h>
#include <onyx/graph/node.h>

namespace onyx {

// ONNX BitCast: x's bytes read as element type `to`, which must have x's bit
// width (bool counts as 8 bits); same shape. Not differentiable.
Expr bitcast(Expr x, Type to);

}  // namespace onyx
