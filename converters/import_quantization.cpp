// ONNX quantization ops with no registry op of their own, as integer and
// float arithmetic around quantize_linear (src/ops/quant.cpp): ConvInteger,
// MatMulInteger, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul.
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/quant.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>

namespace onyx {

// ConvInteger: conv of (x - x_zero_point) and (w - w_zero_point) in int32.
ONYX_ONNX_IMPORT(kConvIntegerImport, "ConvInteger", 10).importer([](OnnxImportCtx& c) {
  Expr x = cast(c.input(0), Type::int32), W = cast(c.input(1), Type::int32);
  checkSpatialInput(c, x);
  const int nd = x->shape().rank() - 2;
  if(Expr xz = optionalInput(c, 2)) x = x - cast(xz, Type::int32);
  if(Expr wz = optionalInput(c, 3)) {
    Expr z = cast(wz, Type::int32);
    if(z->shape().rank() == 1 && z->shape()[0] > 1) {
      std::vector<int64_t> s(size_t(nd + 2), 1);
      s[0] = z->shape()[0];
      z = reshape(z, s);
    }
    W = W - z;
  }
  c.setOutput(0, conv(x, W, nullptr, importConvOptions(c, x, W)));
});

namespace {

// ONNX MatMulInteger: (A - a_zero_point) . (B - b_zero_point) in int32. A
// 1-D a_zero_point is per row of A ([M] -> [M, 1]); b's per column ([N])
// broadcasts as it is.
void importMatMulInteger(OnnxImportCtx& c) {
  Expr a = cast(c.input(0), Type::int32), b = cast(c.input(1), Type::int32);
  if(c.numInputs() > 2 && c.hasInput(2)) {
    Expr zp = cast(c.input(2), Type::int32);
    if(zp->shape().rank() == 1 && a->shape().rank() >= 2) zp = reshape(zp, Shape{zp->shape()[0], 1});
    a = a - zp;
  }
  if(c.numInputs() > 3 && c.hasInput(3)) b = b - cast(c.input(3), Type::int32);
  c.setOutput(0, matmul(a, b));
}

// DequantizeLinear 10, 13 (axis), 19, 21 (block_size), 23 (output_dtype):
// y = (x - zero_point) * scale in scale's type.
void importDequantizeLinear(OnnxImportCtx& c) {
  Expr x = c.input(0), scale = c.input(1);
  int64_t axis = c.attrInt("axis", 1), block = c.attrInt("block_size", 0);
  Type outType = static_cast<Type>(c.attrInt("output_dtype", 0));
  checkQuantTarget(c, x->value_type(), "x");
  Type ft = outType != Type::undefined ? outType : scale->value_type();
  c.check(isFloat(ft), "the output type ", ft, " is not a float type");
  const Shape& xs = x->shape();
  Expr y = cast(x, ft);
  if(c.numInputs() > 2 && c.hasInput(2))
    y = y - cast(alignQuantParam(c, c.input(2), xs, axis, block, "x_zero_point"), ft);
  c.setOutput(0, y * cast(alignQuantParam(c, scale, xs, axis, block, "x_scale"), ft));
}

// DynamicQuantizeLinear 11 (uint8): the range [min(x, 0), max(x, 0)] maps to
// [0, 255]; outputs y, y_scale, y_zero_point as the ONNX reference computes
// them (float32 arithmetic, zero point rounded half to even).
void importDynamicQuantizeLinear(OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(isFloat(x->value_type()), "x must be a float tensor, got ", x->value_type());
  Expr hi = maximum(max(x), 0.0), lo = minimum(min(x), 0.0);
  Expr range = where(eq(hi, lo), ops::scalarLike(hi, 1.0), hi - lo);
  Expr scale = range / 255.0;
  Expr one = ops::scalarLike(x, 1.0);
  Expr zp = quantize_linear(0.0 - lo / scale, one, c.graph().scalar(0, Type::uint8));
  c.setOutput(0, quantize_linear(x, scale, zp));
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, scale);
  if(c.numOutputs() > 2 && c.wantsOutput(2)) c.setOutput(2, zp);
}

// A scale or zero point of QLinearMatMul's a: 1-D means per row ([M] ->
// [M, 1]); of b: per column ([N]) as it is.
Expr rowParam(Expr p, bool isA) {
  if(isA && p->shape().rank() == 1 && p->shape().elements() > 1) return reshape(p, Shape{p->shape()[0], 1});
  return p;
}

// QLinearMatMul 10, 21: y = saturate(round((a - a_zp) . (b - b_zp) *
// (a_scale * b_scale / y_scale)) + y_zp), the product exact in int32 and
// the rescale in float64 as in the ONNX reference.
void importQLinearMatMul(OnnxImportCtx& c) {
  Expr a = c.input(0), aScale = c.input(1), aZp = c.input(2);
  Expr b = c.input(3), bScale = c.input(4), bZp = c.input(5);
  Expr yScale = c.input(6), yZp = c.input(7);
  checkQuantTarget(c, a->value_type(), "a");
  checkQuantTarget(c, b->value_type(), "b");
  checkQuantTarget(c, yZp->value_type(), "y_zero_point");
  Expr A = cast(a, Type::int32) - cast(rowParam(aZp, true), Type::int32);
  Expr B = cast(b, Type::int32) - cast(rowParam(bZp, false), Type::int32);
  Expr prod = matmul(A, B);
  Expr factor = rowParam(aScale, true) * rowParam(bScale, false) / yScale;
  Expr d = cast(prod, Type::float64) * cast(factor, Type::float64);
  c.setOutput(0, quantize_linear(d, c.graph().scalar(1.0, Type::float64), yZp));
}

}  // namespace

ONYX_ONNX_IMPORT(kMatMulIntegerImport, "MatMulInteger", 10).importer(importMatMulInteger);

ONYX_ONNX_IMPORT(kDequantizeLinearImport, "DequantizeLinear", 10).importer(importDequantizeLinear);

ONYX_ONNX_IMPORT(kDynamicQuantizeLinearImport, "DynamicQuantizeLinear", 11).importer(importDynamicQuantizeLinear);

ONYX_ONNX_IMPORT(kQLinearMatMulImport, "QLinearMatMul", 10).importer(importQLinearMatMul);

}  // namespace onyx
