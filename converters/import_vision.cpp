// ONNX vision ops with no registry op of their own: AffineGrid, DeformConv,
// NonMaxSuppression (src/ops/vision.cpp), ImageDecoder (its decoding in
// src/io/image.cpp) and Col2Im (a scatter-add composite).
#include <cstring>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/core/checked.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/io/image.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>
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
  int64_t maxPer = opt(2) ? c.intScalar(2) : 0;
  double iou = opt(3) ? c.scalar(3) : 0.0;
  bool hasScore = opt(4);
  double score = hasScore ? c.scalar(4) : 0.0;
  int64_t cpb = c.attrInt("center_point_box", 0);
  c.check(cpb == 0 || cpb == 1, "center_point_box must be 0 or 1, got ", cpb);
  c.setOutput(0, non_max_suppression(c.graph(), c.value(0), c.value(1), maxPer, iou, score, hasScore, cpb == 1));
});

// ImageDecoder (opset 20): the encoded bytes (uint8 1-D) decoded to uint8
// [H, W, 3] (pixel_format RGB or BGR) or [H, W, 1] (Grayscale: ITU-R 601
// luma in PIL's fixed point, which is PIL's "L"). io::decodeImage gives what
// ONNX's reference (PIL) gives for BMP, PNM, PNG, JPEG, TIFF, WebP and JPEG
// 2000, each of the last five when its library was found at build time; a
// format without one, or a corrupt file, is an import error naming it.
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

// Col2Im (opset 18): x [N, C * prod(block_shape), L] holds, for each of the
// L block positions (in row-major order over the output grid), the
// C x block values; each value is added into the image [N, C, image_shape..]
// at position o * stride - pad_begin + k * dilation (o the block position,
// k the offset inside the block), or dropped in the padding. Built as
// ScatterElements-add of x into zeros [N, C, prod(image) + 1] with constant
// indices (the extra slot takes the padding), then sliced and reshaped;
// image_shape and block_shape (inputs 1, 2) are read now.
ONYX_ONNX_IMPORT(kOnnxCol2Im, "Col2Im", 18).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  std::vector<int64_t> image = c.ints(1), block = c.ints(2);
  const size_t r = image.size();
  c.check(r >= 1 && block.size() == r, "image_shape has ", r, " entries and block_shape ", block.size(),
          "; they need the same number (at least 1)");
  c.check(x->shape().rank() == 3, "input has shape ", x->shape(), "; it must be [N, C * prod(block_shape), L]");
  std::vector<int64_t> dil = c.attrInts("dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = c.attrInts("pads", std::vector<int64_t>(2 * r, 0));
  std::vector<int64_t> strides = c.attrInts("strides", std::vector<int64_t>(r, 1));
  c.check(dil.size() == r && strides.size() == r && pads.size() == 2 * r,
          "dilations and strides need one entry per spatial dim (", r, "), pads two");
  int64_t K = 1, P = 1, L = 1;
  std::vector<int64_t> grid(r);
  for(size_t d = 0; d < r; ++d) {
    c.check(image[d] >= 1 && block[d] >= 1 && dil[d] >= 1 && strides[d] >= 1 && pads[d] >= 0 && pads[d + r] >= 0,
            "spatial dim ", d, ": image, block, dilation and stride must be positive and pads not negative");
    const char* what = "Col2Im sizes";
    const int64_t span = addChecked(mulChecked(dil[d], block[d] - 1, what), 1, what);
    const int64_t padded = addChecked(addChecked(image[d], pads[d], what), pads[d + r], what);
    c.check(padded >= span, "spatial dim ", d, ": the block (", span, " with dilation) is larger than the padded image (",
            padded, ")");
    grid[d] = (padded - span) / strides[d] + 1;
    K = mulChecked(K, block[d], what);
    P = mulChecked(P, image[d], what);
    L = mulChecked(L, grid[d], what);
  }
  const int64_t N = x->shape()[0];
  c.check(x->shape()[1] % K == 0, "input dim 1 (", x->shape()[1], ") is not a multiple of prod(block_shape) (", K, ")");
  c.check(x->shape()[2] == L, "input has ", x->shape()[2], " block positions; the image, block, pads, strides and "
          "dilations give ", L);
  const int64_t C = x->shape()[1] / K;
  // Target of value (k, l) in the flattened image, or P (dropped).
  std::vector<int64_t> target(static_cast<size_t>(K * L));
  std::vector<int64_t> kIdx(r), lIdx(r);
  for(int64_t k = 0; k < K; ++k) {
    for(int64_t rem = k, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      kIdx[static_cast<size_t>(d)] = rem % block[static_cast<size_t>(d)];
      rem /= block[static_cast<size_t>(d)];
    }
    for(int64_t l = 0; l < L; ++l) {
      for(int64_t rem = l, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
        lIdx[static_cast<size_t>(d)] = rem % grid[static_cast<size_t>(d)];
        rem /= grid[static_cast<size_t>(d)];
      }
      int64_t flat = 0;
      bool inside = true;
      for(size_t d = 0; d < r; ++d) {
        int64_t p = lIdx[d] * strides[d] - pads[d] + kIdx[d] * dil[d];
        inside &= p >= 0 && p < image[d];
        flat = flat * image[d] + p;
      }
      target[static_cast<size_t>(k * L + l)] = inside ? flat : P;
    }
  }
  std::vector<int64_t> idx(static_cast<size_t>(N * C * K * L));
  for(int64_t b = 0; b < N * C; ++b)
    std::copy(target.begin(), target.end(), idx.begin() + b * K * L);
  Expr indices = c.constant(TensorBase::fromVector(Shape{N, C, K * L}, idx));
  Expr zeros = c.graph().zeros(Shape{N, C, P + 1}, x->value_type());
  Expr y = scatter_elements(zeros, 2, indices, reshape(x, std::vector<int64_t>{N, C, K * L}), "add");
  std::vector<int64_t> out{N, C};
  out.insert(out.end(), image.begin(), image.end());
  c.setOutput(0, reshape(slice(y, 2, 0, P), out));
});

}  // namespace onyx
