// ONNX signal ops (DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
// MelWeightMatrix) as the transforms and constants of src/ops/signal.cpp.
// Sizes (dft_length, frame_step, a window's size) are read now: they set
// the output shapes.
#include <cstdint>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/signal.h>

namespace onyx {

namespace {

// DFT-17..19: axis is an attribute (default 1); DFT-20: an input (default -2).
// dft_length (input 1) is read now: it sets the output shape.
void importDft(OnnxImportCtx& c, bool axisInput) {
  Expr x = c.input(0);
  int64_t length = 0;
  if(c.numInputs() > 1 && c.hasInput(1)) {
    length = c.intScalar(1);
    c.check(length >= 1, "dft_length must be >= 1, got ", length);
  }
  int64_t axis = axisInput ? -2 : c.attrInt("axis", 1);
  if(axisInput && c.numInputs() > 2 && c.hasInput(2)) axis = c.intScalar(2);
  bool inverse = c.attrInt("inverse", 0) != 0;
  bool onesided = c.attrInt("onesided", 0) != 0;
  const int r = x->shape().rank();
  c.check(r >= 2, "input of shape ", x->shape(), " needs rank >= 2 ([batch, .., n, .., c])");
  c.check(axis >= -r && axis < r && axis != r - 1 && axis != -1, "axis ", axis, " is out of range for input of shape ",
          x->shape(), " (the last dim holds real/imag)");
  c.setOutput(0, dft(x, static_cast<int>(axis), length, inverse, onesided));
}

}  // namespace

ONYX_ONNX_IMPORT(kOnnxDft17, "DFT", 17).untilOpset(19).importer([](OnnxImportCtx& c) { importDft(c, false); });
ONYX_ONNX_IMPORT(kOnnxDft20, "DFT", 20).importer([](OnnxImportCtx& c) { importDft(c, true); });

// frame_step (input 1) and frame_length (input 3) are read now.
ONYX_ONNX_IMPORT(kOnnxStft, "STFT", 17).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  int64_t step = c.intScalar(1);
  Expr window = c.numInputs() > 2 && c.hasInput(2) ? c.input(2) : nullptr;
  int64_t length = c.numInputs() > 3 && c.hasInput(3) ? c.intScalar(3) : 0;
  c.check(c.numInputs() <= 3 || !c.hasInput(3) || length >= 1, "frame_length must be >= 1, got ", length);
  bool onesided = c.attrInt("onesided", 1) != 0;
  c.setOutput(0, stft(x, step, window, length, onesided));
});

namespace {

// size (input 0) is read now; output_datatype defaults to float, periodic to 1.
void importWindow(OnnxImportCtx& c, Expr (*f)(ExpressionGraph&, int64_t, bool, Type)) {
  int64_t size = c.intScalar(0);
  c.check(size >= 0, "size must be >= 0, got ", size);
  Type t = static_cast<Type>(c.attrInt("output_datatype", int64_t(Type::float32)));
  c.check(isComputeType(t) && t != Type::boolean, "output_datatype ", int64_t(t), " is not a numeric type");
  c.setOutput(0, f(c.graph(), size, c.attrInt("periodic", 1) != 0, t));
}

}  // namespace

ONYX_ONNX_IMPORT(kOnnxHann, "HannWindow", 17).importer([](OnnxImportCtx& c) { importWindow(c, hann_window); });
ONYX_ONNX_IMPORT(kOnnxHamming, "HammingWindow", 17).importer([](OnnxImportCtx& c) {
  importWindow(c, hamming_window);
});
ONYX_ONNX_IMPORT(kOnnxBlackman, "BlackmanWindow", 17).importer([](OnnxImportCtx& c) {
  importWindow(c, blackman_window);
});

// Every input is a scalar read now; output_datatype defaults to float.
ONYX_ONNX_IMPORT(kOnnxMelWeightMatrix, "MelWeightMatrix", 17).importer([](OnnxImportCtx& c) {
  Type t = static_cast<Type>(c.attrInt("output_datatype", int64_t(Type::float32)));
  c.check(isComputeType(t) && t != Type::boolean, "output_datatype ", int64_t(t), " is not a numeric type");
  c.setOutput(0, mel_weight_matrix(c.graph(), c.intScalar(0), c.intScalar(1),
                                   c.intScalar(2), c.scalar(3), c.scalar(4), t));
});

}  // namespace onyx
