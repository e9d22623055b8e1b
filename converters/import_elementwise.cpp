// Element-wise ONNX ops with no registry op of their own: the variadic Sum
// and Mean, Identity, CastLike, the opset 1-6 forms of the arithmetic ops
// (the legacy broadcast attribute), and the opset 1-5 forms of ops that
// differ from opset 6 only in consumed_inputs.
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/shape.h>

namespace onyx {

// Sum(x1..xn) with broadcasting.
ONYX_ONNX_IMPORT(kOnnxSum, "Sum", 6).importer([](OnnxImportCtx& c) { c.setOutput(0, foldInputs(c, plus)); });

// Mean(x1..xn) = Sum / n.
ONYX_ONNX_IMPORT(kOnnxMean, "Mean", 6).importer([](OnnxImportCtx& c) {
  Expr s = foldInputs(c, plus);
  size_t n = c.numInputs();
  c.setOutput(0, n == 1 ? s : s / double(n));
});

// Identity passes any value through (tensor, sequence, optional).
ONYX_ONNX_IMPORT(kOnnxIdentity, "Identity", 1).importer([](OnnxImportCtx& c) {
  c.check(c.numInputs() == 1 && c.hasInput(0), "needs one input");
  c.setOutputValue(0, c.inputValue(0));
});

// CastLike(x, like): x cast to like's element type.
ONYX_ONNX_IMPORT(kOnnxCastLike, "CastLike", 15).importer([](OnnxImportCtx& c) {
  importCast(c, c.input(1)->value_type());
});

namespace {

// b of a legacy (opset 1-6) Add/Sub/Mul/Div/Pow, shaped so that numpy
// broadcasting gives the old rule: without broadcast=1 the shapes must be
// equal; with it b's dims line up with a's starting at `axis` (at the
// trailing dims when axis is absent).
Expr legacyOperandB(OnnxImportCtx& c) {
  Expr a = c.input(0), b = c.input(1);
  const Shape& sa = a->shape();
  const Shape& sb = b->shape();
  bool broadcast = c.attrInt("broadcast", 0) != 0;
  if(!broadcast) {
    c.check(sa == sb, "inputs of shapes ", sa, " and ", sb, " differ and broadcast is not 1");
    c.ignoreAttr("axis");
    return b;
  }
  int ra = sa.rank(), rb = sb.rank();
  c.check(rb <= ra, "b of shape ", sb, " has more dims than a of shape ", sa);
  int64_t axis = c.attrInt("axis", ra - rb);
  if(axis < 0) axis += ra;
  c.check(axis >= 0 && axis <= ra - rb, "axis ", c.attrInt("axis", 0), " does not place b of shape ", sb,
          " inside a of shape ", sa);
  for(int k = 0; k < rb; ++k)
    c.check(sb[k] == 1 || sb[k] == sa[static_cast<int>(axis) + k], "b of shape ", sb, " does not broadcast to a of shape ",
            sa, " at axis ", axis);
  if(axis + rb == ra) return b;
  std::vector<int64_t> dims(sb.dims().begin(), sb.dims().end());
  dims.resize(static_cast<size_t>(ra - axis), 1);
  return reshape(b, dims);
}

}  // namespace

ONYX_ONNX_IMPORT(kOnnxAddLegacy, "Add", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  c.setOutput(0, plus(c.input(0), legacyOperandB(c)));
});

ONYX_ONNX_IMPORT(kOnnxSubLegacy, "Sub", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  c.setOutput(0, minus(c.input(0), legacyOperandB(c)));
});

ONYX_ONNX_IMPORT(kOnnxMulLegacy, "Mul", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  c.setOutput(0, mul(c.input(0), legacyOperandB(c)));
});

ONYX_ONNX_IMPORT(kOnnxDivLegacy, "Div", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  c.setOutput(0, div(c.input(0), legacyOperandB(c)));
});

ONYX_ONNX_IMPORT(kOnnxPowLegacy, "Pow", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  c.setOutput(0, pow(c.input(0), legacyOperandB(c)));
});

// PRelu 1-6: slope of x's shape or one element; a 1-D slope of x's channel
// count (dim 1) is per channel, as the exporters of that time wrote it.
ONYX_ONNX_IMPORT(kOnnxPReluLegacy, "PRelu", 1).untilOpset(6).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), slope = c.input(1);
  const Shape& sx = x->shape();
  const Shape& ss = slope->shape();
  if(sx.rank() >= 3 && ss.rank() == 1 && ss[0] > 1 && ss[0] == sx[1]) {
    std::vector<int64_t> dims(static_cast<size_t>(sx.rank() - 1), 1);
    dims[0] = ss[0];
    slope = reshape(slope, dims);
  }
  c.setOutput(0, prelu(x, slope));
});

// Opsets 1-5 of ops whose next version is 6 differ from it only in the
// attribute consumed_inputs, which the importer ignores: they import as
// opset 6 does.
#define ONYX_CONSUMED_INPUTS_IMPORT(var, op)                                              \
  ONYX_ONNX_IMPORT(var, op, 1).untilOpset(5).importer([](OnnxImportCtx& c) {              \
    const OnnxRule* r = findOnnxImport(c.domain(), op, 6);                               \
    c.check(r != nullptr && r->importFn != nullptr, "no import rule for opset 6 of " op); \
    r->importFn(c);                                                                      \
  })
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxNeg1, "Neg");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxAbs1, "Abs");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxExp1, "Exp");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxLog1, "Log");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxSqrt1, "Sqrt");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxReciprocal1, "Reciprocal");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxTanh1, "Tanh");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxSigmoid1, "Sigmoid");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxRelu1, "Relu");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxLeakyRelu1, "LeakyRelu");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxElu1, "Elu");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxSelu1, "Selu");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxFloor1, "Floor");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxCeil1, "Ceil");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxHardSigmoid1, "HardSigmoid");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxClip1, "Clip");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxMax1, "Max");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxMin1, "Min");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxSum1, "Sum");
ONYX_CONSUMED_INPUTS_IMPORT(kOnnxMean1, "Mean");
#undef ONYX_CONSUMED_INPUTS_IMPORT

}  // namespace onyx
