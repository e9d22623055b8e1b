// Expression operators of src/ops/quantized.cpp: quantized compute.
#pragma once
#include <onyx/graph/node.h>
#include <onyx/ops/convolution.h>

namespace onyx {

// ONNX QLinearConv: y = saturate(round((conv(x - xZeroPoint, w - wZeroPoint)
// + b) * xScale * wScale / yScale) + yZeroPoint) in yZeroPoint's type. x, w
// and the zero points are uint8 or int8 (each zero point of its tensor's
// type), the scales float32; xScale, xZeroPoint, yScale and yZeroPoint hold
// one value, wScale and wZeroPoint one or one per output channel; b is int32
// [M] or null. The sums are exact integers (see the .cpp for when the fast
// kernels guarantee it); rounding is half to even. Not differentiable.
Expr qlinear_conv(Expr x, Expr xScale, Expr xZeroPoint, Expr w, Expr wScale, Expr wZeroPoint, Expr yScale,
                  Expr yZeroPoint, Expr b = nullptr, const ConvOptions& o = {});

// ONNX MatMulInteger for A [.., M, K] and a 2-D B [K, N], both uint8 or
// int8: (A - aZeroPoint) . (B - bZeroPoint) in int32, aZeroPoint one value
// (or null: 0), bZeroPoint one or one per column (or null). Exact.
Expr matmul_integer(Expr a, Expr b, Expr aZeroPoint = nullptr, Expr bZeroPoint = nullptr);

// onnxruntime's MatMulIntegerToFloat: float32(matmul_integer(a, b,
// aZeroPoint, bZeroPoint)) * (aScale * bScale) + bias, aScale one float32
// value, bScale one or one per column, bias float32 [N] or null, zero points
// as matmul_integer's (null: 0). Not differentiable.
Expr matmul_integer_to_float(Expr a, Expr b, Expr aScale, Expr bScale, Expr aZeroPoint = nullptr,
                             Expr bZeroPoint = nullptr, Expr bias = nullptr);

}  // namespace onyx
