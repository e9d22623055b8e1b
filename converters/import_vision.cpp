// ONNX vision ops with no registry op of their own: AffineGrid, DeformConv,
// NonMaxSuppression (src/ops/vision.cpp) and ImageDecoder (its decoding in
// src/io/image.cpp).
#include <cstring>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/io/image.h>
#include <onyx/ops/vision.h>

namespace onyx {

// size (input 1, [N, C, H, W] or [N, C, D, H, W]) is read now.
ONYX_ONNX_IMPORT(kOnnxAffineGrid, "AffineGrid", 20).importer([](OnnxImportCtx& c) {
  Expr theta = c.input(0);
  std::vector<int64_t> size = c.ints(1);
  c.check(size.size() == 4 || size.size() == 5, "size must have 4 or 5 entries ([N, C, (D,) H, W]), got ",
          size.size());
  c.check(size[0] == theta->shape()[0], "size's batch ", size[0], " does not match theta of shape ", theta->shape());
  bool align = c.attrInt("align_corners", 0) != 0;
  c.setOutput(0, affine_grid(theta, std::vector<int64_t>(size.begin() + 2, size.end()), align));
});

// Opset 19; 22 adds types. kernel_shape, when given, must match W's.
ONYX_ONNX_IMPORT(kOnnxDeformConv, "DeformConv", 19).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), W = c.input(1), off = c.input(2);
  Expr b = c.numInputs() > 3 && c.hasInput(3) ? c.input(3) : nullptr;
  Expr mask = c.numInputs() > 4 && c.hasInput(4) ? c.input(4) : nullptr;
  c.check(x->shape().rank() == 4, "only 2-D DeformConv is supported (X of shape ", x->shape(), ")");
  std::vector<int64_t> k = c.attrInts("kernel_shape", {});
  c.check(k.empty() || (W->shape().rank() == 4 && k == std::vector<int64_t>{W->shape()[2], W->shape()[3]}),
          "kernel_shape does not match W of shape ", W->shape());
  DeformConvOptions o;
  o.strides = c.attrInts("strides", {});
  o.dilations = c.attrInts("dilations", {});
  o.pads = c.attrInts("pads", {});
  o.group = c.attrInt("group", 1);
  o.offsetGroup = c.attrInt("offset_group", 1);
  c.setOutput(0, deform_conv(x, W, off, b, mask, o));
});

// Every input is read now (the output's size depends on the data).
// max_output_boxes_per_class absent or 0 selects nothing; score_threshold
// absent keeps every score. Opsets 10 and 11 differ in documentation only.
ONYX_ONNX_IMPORT(kOnnxNms, "NonMaxSuppression", 10).importer([](OnnxImportCtx& c) {
  auto opt = [&](size_t i) { return c.numInputs() > i && c.hasInput(i) && c.value(i)->size() > 0; };
  int64_t maxPer = opt(2) ? static_cast<int64_t>(c.scalar(2)) : 0;
  double iou = opt(3) ? c.scalar(3) : 0.0;
  bool hasScore = opt(4);
  double score = hasScore ? c.scalar(4) : 0.0;
  int64_t cpb = c.attrInt("center_point_box", 0);
  c.check(cpb == 0 || cpb == 1, "center_point_box must be 0 or 1, got ", cpb);
  c.setOutput(0, non_max_suppression(c.graph(), c.value(0), c.value(1), maxPer, iou, score, hasScore, cpb == 1));
});

// ImageDecoder (opset 20): the encoded bytes (uint8 1-D) decoded to uint8
// [H, W, 3] (pixel_format RGB or BGR) or [H, W, 1] (Grayscale: ITU-R 601
// luma, rounded, as PIL's "L"). Decoded: BMP (uncompressed), PNM and PNG
// (not interlaced; alpha dropped, 16-bit samples keep their high byte);
// JPEG, JPEG 2000, TIFF and WebP need codec libraries Onyx does not link,
// and are an import error naming the format.
ONYX_ONNX_IMPORT(kOnnxImageDecoder, "ImageDecoder", 20).importer([](OnnxImportCtx& c) {
  Tensor t = c.value(0);
  std::string fmt = c.attrString("pixel_format", "RGB");
  c.check(fmt == "RGB" || fmt == "BGR" || fmt == "Grayscale", "pixel_format must be RGB, BGR or Grayscale, got '",
          fmt, "'");
  c.check(t->type() == Type::uint8 && t->shape().rank() == 1, "input is ", t->shape(), " ", t->type(),
          "; it must be 1-D uint8 (the encoded file)");
  std::vector<uint8_t> d(static_cast<size_t>(t->size()));
  if(!d.empty()) std::memcpy(d.data(), t->raw(), d.size());
  io::Image img;
  std::string why;
  bool ok = io::decodeImage(d, img, why);
  c.check(ok, "cannot decode ", why);
  int64_t n = img.h * img.w;
  Tensor y;
  if(fmt == "Grayscale") {
    y = TensorBase::create(Shape{img.h, img.w, 1}, Type::uint8);
    uint8_t* p = y->data<uint8_t>();
    for(int64_t k = 0; k < n; ++k) {
      const uint8_t* q = &img.rgb[static_cast<size_t>(k * 3)];
      p[k] = static_cast<uint8_t>((q[0] * 19595u + q[1] * 38470u + q[2] * 7471u + 0x8000u) >> 16);
    }
  } else {
    y = TensorBase::create(Shape{img.h, img.w, 3}, Type::uint8);
    uint8_t* p = y->data<uint8_t>();
    for(int64_t k = 0; k < n; ++k)
      for(int j = 0; j < 3; ++j)
        p[k * 3 + j] = img.rgb[static_cast<size_t>(k * 3 + (fmt == "BGR" ? 2 - j : j))];
  }
  c.setOutput(0, c.constant(y));
});

}  // namespace onyx
