// Decoding of image files to 8-bit RGB: what ONNX's ImageDecoder reads
// (converters/import_vision.cpp). PNG, JPEG, TIFF, WebP and JPEG 2000 go
// through the codec libraries found when libonyx was built (libpng,
// libjpeg-turbo, libtiff, libwebp, OpenJPEG); BMP and PNM are read here.
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

// The most pixels an image may have (its header is checked before anything
// is allocated): 2^28, 768 MiB of RGB.
constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

// Decodes the image file held in `bytes` to what PIL (ONNX's reference)
// gives for Image.open(file).convert("RGB"): alpha dropped, gray and palette
// expanded. The format is told by its first bytes. False with `why` set to
// one line naming the format for a corrupt, truncated or oversized file, or
// one this build has no decoder for.
bool decodeImage(const std::vector<uint8_t>& bytes, Image& img, std::string& why);

// The formats decodeImage reads in this build: "BMP", "PNM", and those of
// "PNG", "JPEG", "TIFF", "WebP", "JPEG 2000" whose library was found.
std::vector<std::string> imageFormats();

}  // namespace io
}  // namespace onyx
