// Expression operators of src/ops/quant.cpp: linear quantization.
#pragma once
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

// y = saturate(round(x / scale) + zeroPoint) in zeroPoint's integer type
// (int8, uint8, int16, uint16, int32, int64); round is half to even, as ONNX
// QuantizeLinear. x is a float type and scale has x's type; scale and
// zeroPoint broadcast to x's shape (numpy rules: give a per-channel scale the
// shape [C, 1, 1] for axis 1 of NCHW). Not differentiable.
Expr quantize_linear(Expr x, Expr scale, Expr zeroPoint);

// y = (x - zeroPoint) * scale in scale's float type, with broadcasting; x
// and zeroPoint of one integer type (as quantize_linear's). The scale gets
// a gradient, dy * (x - zeroPoint).
Expr dequantize_linear(Expr x, Expr scale, Expr zeroPoint);

// Per-tensor parameters of qlinear_add.
struct QLinearAddParams {
  float aScale = 1, bScale = 1, yScale = 1;
  int32_t aZeroPoint = 0, bZeroPoint = 0, yZeroPoint = 0;
  bool relu = false;
};

// y = quantize(act(dequantize(a) + dequantize(b))) with per-tensor scales
// and zero points, a and b int8 or uint8 (the same), y of their type,
// broadcasting; act is relu or none. Each step in float32, as
// dequantize_linear, add, relu and quantize_linear compute it, so the result
// is theirs bit for bit (the inference pass fuse_qlinear_add makes it from
// those).
// Not differentiable.
Expr qlinear_add(Expr a, Expr b, const QLinearAddParams& p);

// ---- ONNX import helpers, shared by QuantizeLinear's import (src/ops/quant.cpp)
// and the composites of converters/import_quantization.cpp.

// A scale or zero point of QuantizeLinear/DequantizeLinear reshaped to
// broadcast against x (shape xs): one element is per tensor (also with a
// block_size, as the ONNX reference reads it); a 1-D one lies along `axis`
// ([1, .., C, .., 1]); with block_size > 0 it has x's rank and each entry
// covers block_size consecutive elements along `axis`.
Expr alignQuantParam(OnnxImportCtx& c, Expr p, const Shape& xs, int64_t axisAttr, int64_t block, const char* what);
// Fails unless t is int8, uint8, int16, uint16 or int32 (what these imports take).
void checkQuantTarget(OnnxImportCtx& c, Type t, const char* what);

}  // namespace onyx
