// ONNX quantization ops with no registry op of their own, as integer and
// float arithmetic around quantize_linear and dequantize_linear
// (src/ops/quant.cpp): ConvInteger, MatMulInteger (its common form is the
// registry op matmul_integer), DynamicQuantizeLinear,
// QLinearMatMul;
// and the com.microsoft ops onnxruntime's quantizer writes in QOperator
// models (QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
// QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax,
// QLinearWhere, QLinearConcat, QGemm, DynamicQuantizeMatMul):
// dequantize, compute in float, quantize, with the semantics of
// onnxruntime's contrib-op documentation. (QLinearConv is the registry op
// qlinear_conv, src/ops/quantized.cpp, and MatMulIntegerToFloat's common
// form the registry op matmul_integer_to_float.)
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/pooling.h>
#include <onyx/ops/quant.h>
#include <onyx/ops/quantized.h>
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

// The form matmul_integer takes: 8-bit A [.., M, K] and B [K, N], A's zero
// point one value (or none), B's one or one per column (or none).
bool matmulIntegerForm(Expr A, Expr B, Expr az, Expr bz) {
  auto is8 = [](Expr e) { return e->value_type() == Type::uint8 || e->value_type() == Type::int8; };
  return is8(A) && is8(B) && A->shape().rank() >= 2 && B->shape().rank() == 2 && A->shape()[-1] == B->shape()[0] &&
         (!az || (az->shape().elements() == 1 && az->value_type() == A->value_type())) &&
         (!bz || (bz->value_type() == B->value_type() && bz->shape().rank() <= 1 &&
                  (bz->shape().elements() == 1 || bz->shape().elements() == B->shape()[1])));
}

// ONNX MatMulInteger: (A - a_zero_point) . (B - b_zero_point) in int32. A
// 1-D a_zero_point is per row of A ([M] -> [M, 1]); b's per column ([N])
// broadcasts as it is.
void importMatMulInteger(OnnxImportCtx& c) {
  Expr A = c.input(0), Bq = c.input(1);
  Expr az = optionalInput(c, 2), bz = optionalInput(c, 3);
  // The common form (8-bit, a 2-D B, A's zero point per tensor, B's per
  // tensor or per column) is the registry op; the rest as int32 arithmetic.
  if(matmulIntegerForm(A, Bq, az, bz)) {
    c.setOutput(0, matmul_integer(A, Bq, az, bz));
    return;
  }
  Expr a = cast(A, Type::int32), b = cast(Bq, Type::int32);
  if(c.numInputs() > 2 && c.hasInput(2)) {
    Expr zp = cast(c.input(2), Type::int32);
    if(zp->shape().rank() == 1 && a->shape().rank() >= 2) zp = reshape(zp, Shape{zp->shape()[0], 1});
    a = a - zp;
  }
  if(c.numInputs() > 3 && c.hasInput(3)) b = b - cast(c.input(3), Type::int32);
  c.setOutput(0, matmul(a, b));
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
  Expr prod = matmulIntegerForm(a, b, aZp, bZp)
                   ? matmul_integer(a, b, aZp, bZp)
                   : matmul(cast(a, Type::int32) - cast(rowParam(aZp, true), Type::int32),
                            cast(b, Type::int32) - cast(rowParam(bZp, false), Type::int32));
  Expr factor = rowParam(aScale, true) * rowParam(bScale, false) / yScale;
  Expr d = cast(prod, Type::float64) * cast(factor, Type::float64);
  c.setOutput(0, quantize_linear(d, c.graph().scalar(1.0, Type::float64), yZp));
}

// ---- com.microsoft (onnxruntime's contrib ops)

// Input i dequantized with the scale and zero point at i + 1, i + 2 (the
// zero point may be left out: 0).
Expr dequantized(OnnxImportCtx& c, size_t i, const char* what) {
  Expr x = c.input(i);
  checkQuantTarget(c, x->value_type(), what);
  Expr s = c.input(i + 1);
  c.check(s->value_type() == Type::float32, what, "'s scale has element type ", s->value_type(), ", not float32");
  Expr zp = optionalInput(c, i + 2);
  if(!zp) zp = c.graph().scalar(0, x->value_type());
  c.check(zp->value_type() == x->value_type(), what, "'s zero point has element type ", zp->value_type(), " but ",
          what, " has ", x->value_type());
  return dequantize_linear(x, s, zp);
}

// y quantized with the scale at i and the zero point at i + 1 (left out: 0
// in `type`, the quantized input's type).
Expr requantized(OnnxImportCtx& c, Expr y, size_t i, Type type) {
  Expr s = c.input(i);
  Expr zp = optionalInput(c, i + 1);
  if(!zp) zp = c.graph().scalar(0, type);
  checkQuantTarget(c, zp->value_type(), "the output");
  return quantize_linear(y, cast(s, y->value_type()), zp);
}

// QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp).
template <bool kAdd>
void importQLinearBinary(OnnxImportCtx& c) {
  Expr a = dequantized(c, 0, "A"), b = dequantized(c, 3, "B");
  c.setOutput(0, requantized(c, kAdd ? a + b : a * b, 6, c.input(0)->value_type()));
}

// QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zp, Y_scale, Y_zp).
void importQLinearSigmoid(OnnxImportCtx& c) {
  c.setOutput(0, requantized(c, sigmoid(dequantized(c, 0, "X")), 3, c.input(0)->value_type()));
}

void importQLinearLeakyRelu(OnnxImportCtx& c) {
  const float alpha = float(c.attrFloat("alpha", 0.01));
  c.setOutput(0, requantized(c, leaky_relu(dequantized(c, 0, "X"), alpha), 3, c.input(0)->value_type()));
}

// QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp), channels_last.
void importQLinearGlobalAveragePool(OnnxImportCtx& c) {
  Expr x = dequantized(c, 0, "X");
  const int r = x->shape().rank();
  c.check(r >= 3, "X of shape ", x->shape(), " must have a batch, a channel and spatial dims");
  const bool last = c.attrInt("channels_last", 0) != 0;
  std::vector<int> axes;
  for(int i = last ? 1 : 2; i < (last ? r - 1 : r); ++i) axes.push_back(i);
  c.setOutput(0, requantized(c, mean(x, axes, true), 3, c.input(0)->value_type()));
}

// QLinearAveragePool (X, x_scale, x_zp, y_scale, y_zp): AveragePool's
// attributes, channels_last (X and Y [N, spatial.., C]).
void importQLinearAveragePool(OnnxImportCtx& c) {
  Expr x = dequantized(c, 0, "X");
  const int r = x->shape().rank();
  c.check(r >= 3, "X of shape ", x->shape(), " must have a batch, a channel and spatial dims");
  const bool last = c.attrInt("channels_last", 0) != 0;
  std::vector<int> toFirst{0, r - 1}, toLast{0};
  for(int i = 1; i < r - 1; ++i) toFirst.push_back(i);
  for(int i = 2; i < r; ++i) toLast.push_back(i);
  toLast.push_back(1);
  if(last) x = transpose(x, toFirst);
  PoolOptions o;
  std::vector<int64_t> k = importPool(c, x, o);
  o.countIncludePad = c.attrInt("count_include_pad", 0) != 0;
  Expr y = average_pool(x, k, o);
  if(last) y = transpose(y, toLast);
  c.setOutput(0, requantized(c, y, 3, c.input(0)->value_type()));
}

// QLinearSoftmax (X, X_scale, x_zp, y_scale, y_zp), axis (default -1) and
// opset, the replaced Softmax's: before 13 the input is viewed as 2-D
// [d0*..*d(axis-1), d(axis)*..] and the softmax runs along the second dim.
void importQLinearSoftmax(OnnxImportCtx& c) {
  Expr x = dequantized(c, 0, "X");
  const int r = x->shape().rank();
  c.check(r >= 1, "X must have rank >= 1, got a scalar");
  c.check(c.hasAttr("opset"), "needs the opset attribute (the replaced Softmax's opset)");
  const int axis = c.axis(c.attrInt("axis", -1), r);
  Expr y = c.attrInt("opset", 13) < 13 ? reshape(softmax(flatten(x, axis), -1), x->shape()) : softmax(x, axis);
  c.setOutput(0, requantized(c, y, 3, c.input(0)->value_type()));
}

// QLinearWhere (condition, X, x_scale, x_zp, Y, y_scale, y_zp, z_scale, z_zp).
void importQLinearWhere(OnnxImportCtx& c) {
  Expr cond = c.input(0);
  c.check(cond->value_type() == Type::boolean, "condition has element type ", cond->value_type(), ", not bool");
  Expr x = dequantized(c, 1, "X"), y = dequantized(c, 4, "Y");
  c.check(c.input(1)->value_type() == c.input(4)->value_type(), "X (", c.input(1)->value_type(), ") and Y (",
          c.input(4)->value_type(), ") must have one element type");
  c.setOutput(0, requantized(c, where(cond, x, y), 7, c.input(1)->value_type()));
}

// QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input), axis.
void importQLinearConcat(OnnxImportCtx& c) {
  c.check(c.numInputs() >= 5 && (c.numInputs() - 2) % 3 == 0, "takes Y_scale, Y_zero_point and a triple (X, ",
          "X_scale, X_zero_point) per input, got ", c.numInputs(), " inputs");
  std::vector<Expr> xs;
  for(size_t i = 2; i < c.numInputs(); i += 3) xs.push_back(dequantized(c, i, "an input"));
  const int rank = xs[0]->shape().rank();
  c.setOutput(0, requantized(c, concat(xs, c.axis(c.attrInt("axis", 0), rank)), 0, c.input(2)->value_type()));
}

// QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp), alpha,
// transA, transB: Y = alpha * a_scale * b_scale * ((A - a_zp)' (B - b_zp)' +
// C), C int32 (scale alpha * a_scale * b_scale, zero point 0); quantized
// with y_scale and y_zp when y_scale is given, float32 otherwise. b_scale
// and b_zp are per tensor or per column of B'. The integer product is
// matmul_integer's (exact); forms it does not take run in float64 (exact).
void importQGemm(OnnxImportCtx& c) {
  Expr a = c.input(0), b = c.input(3);
  checkQuantTarget(c, a->value_type(), "A");
  checkQuantTarget(c, b->value_type(), "B");
  c.check(a->shape().rank() == 2 && b->shape().rank() == 2, "A of shape ", a->shape(), " and B of shape ",
          b->shape(), " must be matrices");
  const bool ta = c.attrInt("transA", 0) != 0, tb = c.attrInt("transB", 0) != 0;
  const double alpha = c.attrFloat("alpha", 1.0);
  auto zeroOr = [&](size_t i) {
    Expr z = optionalInput(c, i);
    return z ? cast(z, Type::float64) : c.graph().scalar(0, Type::float64);
  };
  Expr At = ta ? transpose(a, {1, 0}) : a, Bt = tb ? transpose(b, {1, 0}) : b;
  c.check(At->shape()[1] == Bt->shape()[0], "A' of shape ", At->shape(), " and B' of shape ", Bt->shape(),
          " do not multiply");
  Expr acc;
  if(matmulIntegerForm(At, Bt, optionalInput(c, 2), optionalInput(c, 5))) {
    acc = cast(matmul_integer(At, Bt, optionalInput(c, 2), optionalInput(c, 5)), Type::float64);
  } else {
    // per column of B' ([N]) broadcasts as it is
    acc = matmul(cast(At, Type::float64) - zeroOr(2), cast(Bt, Type::float64) - zeroOr(5));
  }
  if(Expr bias = optionalInput(c, 6)) {
    c.check(bias->value_type() == Type::int32, "C has element type ", bias->value_type(), " but must be int32");
    acc = acc + cast(bias, Type::float64);
  }
  Expr scale = cast(c.input(1), Type::float64) * cast(c.input(4), Type::float64) * alpha;
  Expr y = acc * scale;
  if(Expr ys = optionalInput(c, 7)) {
    Expr zp = optionalInput(c, 8);
    if(!zp) zp = c.graph().scalar(0, a->value_type());
    checkQuantTarget(c, zp->value_type(), "y_zero_point");
    c.setOutput(0, quantize_linear(y, cast(ys, Type::float64), zp));
  } else {
    c.setOutput(0, cast(y, Type::float32));
  }
}

// DynamicQuantizeMatMul (A float, B int8/uint8, b_scale, b_zp, bias): A is
// quantized to uint8 as DynamicQuantizeLinear does, then Y = (Aq - a_zp)
// (B - b_zp) * a_scale * b_scale + bias in float32; b_scale and b_zp per
// tensor or per column.
void importDynamicQuantizeMatMul(OnnxImportCtx& c) {
  Expr x = c.input(0), b = c.input(1);
  c.check(x->value_type() == Type::float32, "A has element type ", x->value_type(), " but must be float32");
  checkQuantTarget(c, b->value_type(), "B");
  Expr hi = maximum(max(x), 0.0), lo = minimum(min(x), 0.0);
  Expr range = where(eq(hi, lo), ops::scalarLike(hi, 1.0), hi - lo);
  Expr aScale = range / 255.0;
  Expr aZp = quantize_linear(0.0 - lo / aScale, ops::scalarLike(x, 1.0), c.graph().scalar(0, Type::uint8));
  Expr aq = quantize_linear(x, aScale, aZp);
  Expr A = cast(aq, Type::float64) - cast(aZp, Type::float64);
  Expr B = cast(b, Type::float64);
  if(Expr bz = optionalInput(c, 3)) B = B - cast(bz, Type::float64);
  Expr y = matmul(A, B) * (cast(aScale, Type::float64) * cast(c.input(2), Type::float64));
  Expr out = cast(y, Type::float32);
  if(Expr bias = optionalInput(c, 4)) out = out + bias;
  c.setOutput(0, out);
}

// MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zero_point, b_zero_point,
// bias): float32((A - a_zp) (B - b_zp)) * (a_scale * b_scale) + bias. The
// registry op takes matmul_integer's form with a_scale one value and b_scale
// one or one per column; other forms run as their steps.
void importMatMulIntegerToFloat(OnnxImportCtx& c) {
  Expr A = c.input(0), B = c.input(1), as = c.input(2), bs = c.input(3);
  Expr az = optionalInput(c, 4), bz = optionalInput(c, 5), bias = optionalInput(c, 6);
  c.check(as->value_type() == Type::float32 && bs->value_type() == Type::float32, "a_scale (", as->value_type(),
          ") and b_scale (", bs->value_type(), ") must be float32");
  const bool columnScale = bs->shape().rank() <= 1 && B->shape().rank() == 2 &&
                           (bs->shape().elements() == 1 || bs->shape().elements() == B->shape()[1]);
  const bool biasForm = !bias || (bias->value_type() == Type::float32 && B->shape().rank() == 2 &&
                                  bias->shape() == Shape({B->shape()[1]}));
  if(matmulIntegerForm(A, B, az, bz) && as->shape().elements() == 1 && columnScale && biasForm) {
    c.setOutput(0, matmul_integer_to_float(A, B, as->shape().rank() ? reshape(as, Shape()) : as, bs, az, bz, bias));
    return;
  }
  Expr prod;
  if(matmulIntegerForm(A, B, az, bz)) {
    prod = matmul_integer(A, B, az, bz);
  } else {
    Expr a = cast(A, Type::int32), b = cast(B, Type::int32);
    if(az) a = a - cast(rowParam(az, true), Type::int32);
    if(bz) b = b - cast(bz, Type::int32);
    prod = matmul(a, b);
  }
  Expr y = cast(prod, Type::float32) * (rowParam(as, true) * bs);
  c.setOutput(0, bias ? y + bias : y);
}

}  // namespace

ONYX_ONNX_IMPORT(kMatMulIntegerImport, "MatMulInteger", 10).importer(importMatMulInteger);

ONYX_ONNX_IMPORT(kDynamicQuantizeLinearImport, "DynamicQuantizeLinear", 11).importer(importDynamicQuantizeLinear);

ONYX_ONNX_IMPORT(kQLinearMatMulImport, "QLinearMatMul", 10).importer(importQLinearMatMul);

#define ONYX_MS_IMPORT(var, op, fn) ONYX_ONNX_IMPORT(var, op, 1).inDomain("com.microsoft").importer(fn)
ONYX_MS_IMPORT(kQLinearAddImport, "QLinearAdd", importQLinearBinary<true>);
ONYX_MS_IMPORT(kQLinearMulImport, "QLinearMul", importQLinearBinary<false>);
ONYX_MS_IMPORT(kQLinearSigmoidImport, "QLinearSigmoid", importQLinearSigmoid);
ONYX_MS_IMPORT(kQLinearLeakyReluImport, "QLinearLeakyRelu", importQLinearLeakyRelu);
ONYX_MS_IMPORT(kQLinearGlobalAveragePoolImport, "QLinearGlobalAveragePool", importQLinearGlobalAveragePool);
ONYX_MS_IMPORT(kQLinearConcatImport, "QLinearConcat", importQLinearConcat);
ONYX_MS_IMPORT(kQLinearAveragePoolImport, "QLinearAveragePool", importQLinearAveragePool);
ONYX_MS_IMPORT(kQLinearSoftmaxImport, "QLinearSoftmax", importQLinearSoftmax);
ONYX_MS_IMPORT(kQLinearWhereImport, "QLinearWhere", importQLinearWhere);
ONYX_MS_IMPORT(kQGemmImport, "QGemm", importQGemm);
ONYX_MS_IMPORT(kDynamicQuantizeMatMulImport, "DynamicQuantizeMatMul", importDynamicQuantizeMatMul);
ONYX_MS_IMPORT(kMatMulIntegerToFloatImport, "MatMulIntegerToFloat", importMatMulIntegerToFloat);

}  // namespace onyx
