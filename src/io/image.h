// Expression operators of src/ops/misc_ops.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/core/types.h>
#include <onyx/graph/node.h>

namespace onyx {

// ONNX BitCast: x's bytes read as element type `to`, which must have x's bit
// width (bool counts as 8 bits); same shape. Not differentiable.
Expr bitcast(Expr x, Type to);

// An image decoded to 8-bit RGB, row-major.
struct Image {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;  // h * w * 3
};
// Decodes the image file held in `bytes`: uncompressed BMP, PNM (P1-P7) or
// PNG, the formats of ONNX ImageDecoder that need no codec library. False
// with `why` set for a corrupt file or another format (JPEG, TIFF, ...),
// which `why` names.
bool decodeImage(const std::vector<uint8_t>& bytes, Image& img, std::string& why);

}  // namespace onyx
