// ONNX neural-network ops with no registry op of their own: the opset 1-12
// forms of Softmax, LogSoftmax and Hardmax, NegativeLogLikelihoodLoss and
// Dropout, as the functions of src/ops/nn.cpp.
#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/random.h>
#include <onyx/ops/shape.h>

namespace onyx {

namespace {

// Opsets 1-12 of Softmax, LogSoftmax and Hardmax: the input is viewed as
// 2-D [d0*..*d(axis-1), d(axis)*..*d(n-1)] (axis default 1) and the op runs
// along the second dim. When every dim after the axis is 1 that is the op
// along the axis itself (what the opset < 13 export emits for it).
void importCoerced2d(OnnxImportCtx& c, Expr (*op)(Expr, int)) {
  Expr x = c.input(0);
  const int r = x->shape().rank();
  int64_t axis = c.attrInt("axis", 1);
  c.check(r >= 1, "needs an input of rank >= 1, got a scalar");
  c.check(axis >= -r && axis <= r, "axis ", axis, " is out of range for rank ", r);
  if(axis < 0) axis += r;
  bool trailingOnes = axis < r;
  for(int d = static_cast<int>(axis) + 1; d < r; ++d) trailingOnes = trailingOnes && x->shape().dims()[d] == 1;
  if(trailingOnes) {
    c.setOutput(0, op(x, axis == r - 1 ? -1 : static_cast<int>(axis)));
    return;
  }
  c.setOutput(0, reshape(op(flatten(x, static_cast<int>(axis)), -1), x->shape()));
}

// Whether x is a constant of ones, or such a constant expanded (how
// dropout_mask exports: 1 * m is m, bit for bit).
bool allOnes(OnnxImportCtx& c, Expr x) {
  if(x->kind() == NodeKind::Op && x->op()->name == "expand") x = x->child(0);
  if(x->kind() != NodeKind::Constant) return false;
  Tensor t = c.valueOf(x);
  for(int64_t i = 0; i < t->size(); ++i)
    if(t->getAsDouble(i) != 1.0) return false;
  return true;
}

}  // namespace

ONYX_ONNX_IMPORT(kOnnxSoftmaxOld, "Softmax", 1).untilOpset(12).importer([](OnnxImportCtx& c) {
  importCoerced2d(c, [](Expr x, int axis) { return softmax(x, axis); });
});

ONYX_ONNX_IMPORT(kOnnxLogSoftmaxOld, "LogSoftmax", 1).untilOpset(12).importer([](OnnxImportCtx& c) {
  importCoerced2d(c, [](Expr x, int axis) { return log_softmax(x, axis); });
});

ONYX_ONNX_IMPORT(kOnnxHardmaxOld, "Hardmax", 1).untilOpset(12).importer([](OnnxImportCtx& c) {
  importCoerced2d(c, [](Expr x, int axis) { return hardmax(x, axis); });
});

// Inputs already log-probabilities: the SoftmaxCrossEntropyLoss composite
// without its log_softmax. Opsets 12, 13 and 22 differ in types only.
ONYX_ONNX_IMPORT(kOnnxNllLoss, "NegativeLogLikelihoodLoss", 12).importer([](OnnxImportCtx& c) {
  Expr lp = c.input(0);
  c.check(isFloat(lp->value_type()), "input has element type ", lp->value_type(), "; it must be a float type");
  c.setOutput(0, nllLossImport(c, lp, c.input(1)));
});

// ONNX Dropout, every opset. Opsets 1-11 have no training switch and import
// as the identity (inference; is_test and ratio are read and ignored).
// Opsets 12+ take ratio and training_mode as inputs (read now, they steer
// the structure); training_mode true draws the mask from the graph's
// generator, so the node's `seed` attribute is not used and the mask differs
// from other runtimes'. The optional mask output is float in opsets < 10,
// bool from 10 on; all ones when no mask is drawn.
ONYX_ONNX_IMPORT(kOnnxDropout, "Dropout", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(isFloat(x->value_type()), "input has element type ", x->value_type(), "; it must be a float type");
  double ratio = 0.5;
  bool training = false;
  if(c.opset() < 12) {
    ratio = c.attrFloat("ratio", 0.5);
    if(c.opset() < 7) c.ignoreAttr("is_test");
  } else {
    c.ignoreAttr("seed");
    if(c.numInputs() > 1 && c.hasInput(1)) ratio = c.scalar(1);
    if(c.numInputs() > 2 && c.hasInput(2)) training = c.scalar(2) != 0;
  }
  c.check(ratio >= 0 && (training ? ratio < 1 : ratio <= 1), "ratio must be in [0, 1), got ", ratio);
  Type maskType = c.opset() < 10 ? x->value_type() : Type::boolean;
  if(!training || ratio == 0) {
    c.setOutput(0, x);
    if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, c.graph().ones(x->shape(), maskType));
    return;
  }
  Expr m = dropout_mask(&c.graph(), x->shape(), static_cast<float>(ratio), x->value_type());
  c.setOutput(0, allOnes(c, x) ? m : x * m);
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, cast(ne(m, 0.0), maskType));
});

}  // namespace onyx
