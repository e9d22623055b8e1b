// Expression operators of src/ops/linalg.cpp.
#pragma once
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {

// y = scale * op(a) . op(b) with numpy/ONNX MatMul semantics: batch dims
// broadcast; a 1-D a is a row [1, K] and a 1-D b a column [K, 1], and the
// added dim is removed from the result. transA/transB swap the last two dims
// of a rank >= 2 operand (a vector is its own transpose).
Expr dot(Expr a, Expr b, bool transA = false, bool transB = false, float scale = 1.f);
// ONNX MatMul: dot without transposes or scale.
Expr matmul(Expr a, Expr b);

// y = scale * op(x) . op(W) + b, W 2-D [K, N] (after op), b broadcast to the
// result's shape [.., N] (ONNX Gemm for 2-D x).
Expr affine(Expr x, Expr W, Expr b, bool transA = false, bool transB = false, float scale = 1.f);

}  // namespace onyx
