// Decoding of image files to 8-bit RGB: what ONNX's ImageDecoder reads
// (converters/import_vision.cpp), for the formats that need no codec library
// beyond zlib.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace onyx {
namespace io {

// An image decoded to 8-bit RGB, row-major.
struct Image {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;  // h * w * 3
};

// Decodes the image file held in `bytes`: uncompressed BMP, PNM (P2, P3, P5,
// P6) or non-interlaced PNG. False with `why` set to one line for a corrupt
// file or another format (JPEG, TIFF, ...), which `why` names.
bool decodeImage(const std::vector<uint8_t>& bytes, Image& img, std::string& why);

}  // namespace io
}  // namespace onyx
