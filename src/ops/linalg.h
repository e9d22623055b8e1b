// Expression operators of src/ops/linalg.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/core/shape.h>
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

// Determinant and inverse of each square matrix in the last two dims
// ([.., M, M] -> [..] and [.., M, M]). Gradients need invertible matrices
// (d det / dx = det * x^-T; a singular x gives inf/NaN there).
Expr det(Expr x);
Expr inverse(Expr x);

// numpy/ONNX einsum: "ij,jk->ik", implicit output ("ij,jk": the ellipsis
// dims, then the labels used once, sorted), "..." for leading dims (size-1
// dims broadcast), a label repeated in one term takes the diagonal ("ii->i",
// "ii" is the trace). Built from transpose/reshape/slice/sum and one batched
// matmul per extra operand, so gradients come with it.
Expr einsum(const std::string& equation, const std::vector<Expr>& operands);

// ONNX Trilu on the last two dims: upper keeps x[.., i, j] where j - i >= k,
// lower where j - i <= k; everything else becomes 0.
Expr trilu(Expr x, bool upper = true, int64_t k = 0);

// ---- For kernels: trilu's host-side helper, which its GPU kernel
// (backend/cuda/ops_linalg.cpp) shares.
namespace ops {
// trilu's k for x of shape s, clamped so that i + k cannot overflow.
int64_t triluK(int64_t k, const Shape& s);
}  // namespace ops

}  // namespace onyx
