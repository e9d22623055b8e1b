// Expression operators of src/ops/quant.cpp: linear quantization.
#pragma once
#include <onyx/graph/node.h>

namespace onyx {

// y = saturate(round(x / scale) + zeroPoint) in zeroPoint's integer type
// (int8, uint8, int16, uint16, int32, int64); round is half to even, as ONNX
// QuantizeLinear. x is a float type and scale has x's type; scale and
// zeroPoint broadcast to x's shape (numpy rules: give a per-channel scale the
// shape [C, 1, 1] for axis 1 of NCHW). Not differentiable.
Expr quantize_linear(Expr x, Expr scale, Expr zeroPoint);

// y = (x - zeroPoint) * scale in scale's type, with broadcasting: a cast, a
// sub and a mul, so scale gets a gradient.
Expr dequantize_linear(Expr x, Expr scale, Expr zeroPoint);

}  // namespace onyx
