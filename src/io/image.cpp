// The image decoding of ONNX's ImageDecoder: BMP and PNM read directly, PNG
// through zlib's inflate and the PNG row filters.
#include <onyx/io/image.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace onyx {
namespace io {

namespace {

// The little-endian unsigned integer of `bytes` bytes at p.
uint32_t littleEndian(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for(int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Uncompressed BMP (BI_RGB, or BI_BITFIELDS with the standard masks) with
// 8 (paletted), 24 or 32 bits per pixel; bottom-up or top-down rows.
bool decodeBmp(const std::vector<uint8_t>& d, Image& img, std::string& why) {
  if(d.size() < 54) { why = "truncated BMP header"; return false; }
  uint32_t offset = littleEndian(&d[10], 4), hdr = littleEndian(&d[14], 4);
  int32_t w = static_cast<int32_t>(littleEndian(&d[18], 4)), h = static_cast<int32_t>(littleEndian(&d[22], 4));
  uint32_t bpp = littleEndian(&d[28], 2), comp = littleEndian(&d[30], 4);
  if(comp != 0 && comp != 3) { why = "compressed BMP (compression " + std::to_string(comp) + ")"; return false; }
  if(bpp != 8 && bpp != 24 && bpp != 32) { why = "BMP with " + std::to_string(bpp) + " bits per pixel"; return false; }
  bool topDown = h < 0;
  int64_t H = topDown ? -int64_t(h) : h, W = w;
  if(W <= 0 || H <= 0) { why = "BMP with no pixels"; return false; }
  int64_t stride = ((W * bpp + 31) / 32) * 4;
  // offset + stride * H <= size, without overflowing for a header's extreme dims.
  uint64_t pixelBytes = d.size() > offset ? d.size() - offset : 0;
  if(static_cast<uint64_t>(H) > pixelBytes / static_cast<uint64_t>(stride)) { why = "truncated BMP pixel data"; return false; }
  uint32_t ncolors = bpp == 8 ? (littleEndian(&d[46], 4) ? littleEndian(&d[46], 4) : 256) : 0;
  size_t pal = 14 + hdr;
  if(bpp == 8 && pal + 4 * size_t(ncolors) > d.size()) { why = "truncated BMP palette"; return false; }
  img.h = H;
  img.w = W;
  img.rgb.resize(static_cast<size_t>(H * W * 3));
  for(int64_t y = 0; y < H; ++y) {
    const uint8_t* row = &d[offset + stride * (topDown ? y : H - 1 - y)];
    for(int64_t x = 0; x < W; ++x) {
      uint8_t* o = &img.rgb[static_cast<size_t>((y * W + x) * 3)];
      const uint8_t* p;
      if(bpp == 8) {
        uint32_t i = row[x];
        if(i >= ncolors) { why = "BMP palette index out of range"; return false; }
        p = &d[pal + 4 * i];
      } else {
        p = row + x * (bpp / 8);
      }
      o[0] = p[2];
      o[1] = p[1];
      o[2] = p[0];
    }
  }
  return true;
}

// Netpbm: P2/P5 (gray) and P3/P6 (color), maxval up to 65535 (scaled to 255).
bool decodePnm(const std::vector<uint8_t>& d, Image& img, std::string& why) {
  size_t i = 2;
  auto skip = [&] {
    while(i < d.size()) {
      if(d[i] == '#') { while(i < d.size() && d[i] != '\n') ++i; }
      else if(std::isspace(d[i])) ++i;
      else break;
    }
  };
  auto number = [&](int64_t& v) {
    skip();
    if(i >= d.size() || !std::isdigit(d[i])) return false;
    v = 0;
    while(i < d.size() && std::isdigit(d[i]) && v < (int64_t(1) << 40)) v = v * 10 + (d[i++] - '0');
    return true;
  };
  char kind = static_cast<char>(d[1]);
  bool color = kind == '3' || kind == '6', binary = kind == '5' || kind == '6';
  if(kind != '2' && kind != '3' && kind != '5' && kind != '6') {
    why = "PNM kind P" + std::string(1, kind) + " (only P2, P3, P5 and P6 are decoded)";
    return false;
  }
  int64_t W, H, maxv;
  if(!number(W) || !number(H) || !number(maxv) || W <= 0 || H <= 0 || maxv <= 0 || maxv > 65535) {
    why = "bad PNM header";
    return false;
  }
  ++i;  // the single whitespace after maxval
  int ch = color ? 3 : 1, bytes = maxv > 255 ? 2 : 1;
  // Every sample takes at least a byte: a header asking for more pixels than
  // that is truncated data (checked before H * W can overflow).
  int64_t left = static_cast<int64_t>(d.size() - std::min(i, d.size()));
  if(W > left || H > left / W || H * W * ch * (binary ? bytes : 1) > left) {
    why = "truncated PNM pixel data";
    return false;
  }
  img.h = H;
  img.w = W;
  img.rgb.resize(static_cast<size_t>(H * W * 3));
  for(int64_t k = 0; k < H * W * ch; ++k) {
    int64_t v;
    if(binary) {
      if(i + bytes > d.size()) { why = "truncated PNM pixel data"; return false; }
      v = bytes == 2 ? (d[i] << 8 | d[i + 1]) : d[i];
      i += bytes;
    } else if(!number(v)) {
      why = "truncated PNM pixel data";
      return false;
    }
    uint8_t b = static_cast<uint8_t>(maxv == 255 ? v : (std::min(v, maxv) * 255 + maxv / 2) / maxv);
    if(color) img.rgb[static_cast<size_t>(k)] = b;
    else for(int c3 = 0; c3 < 3; ++c3) img.rgb[static_cast<size_t>(k * 3 + c3)] = b;
  }
  return true;
}

// ---- PNG

// The zlib stream of a PNG's IDAT chunks inflated into `raw`, which must
// come out `size` bytes long (data after that is ignored, as libpng does).
bool inflatePng(const std::vector<uint8_t>& z, size_t size, std::vector<uint8_t>& raw, std::string& why) {
  raw.assign(size, 0);
  z_stream s{};
  if(inflateInit(&s) != Z_OK) { why = "PNG image data: zlib cannot start inflating"; return false; }
  // zlib counts in uInt: feed and drain in pieces it can count.
  const size_t piece = std::numeric_limits<uInt>::max();
  size_t inLeft = z.size(), outLeft = size;
  s.next_in = const_cast<Bytef*>(z.data());  // zlib's input pointer is not const
  s.next_out = raw.data();
  int rc = Z_OK;
  while(rc == Z_OK) {
    if(s.avail_in == 0 && inLeft > 0) {
      s.avail_in = static_cast<uInt>(std::min(inLeft, piece));
      inLeft -= s.avail_in;
    }
    if(s.avail_out == 0 && outLeft > 0) {
      s.avail_out = static_cast<uInt>(std::min(outLeft, piece));
      outLeft -= s.avail_out;
    }
    rc = inflate(&s, Z_NO_FLUSH);
  }
  bool full = outLeft == 0 && s.avail_out == 0;
  std::string msg = s.msg ? s.msg : "";
  inflateEnd(&s);
  // Z_BUF_ERROR: no progress possible, the output being full (the image is
  // complete) or the input used up (truncated).
  if(rc == Z_STREAM_END || (rc == Z_BUF_ERROR && full)) {
    if(full) return true;
    why = "PNG image data shorter than the image";
  } else if(rc == Z_BUF_ERROR) {
    why = "truncated PNG image data";
  } else if(rc == Z_MEM_ERROR) {
    why = "PNG image data: out of memory while inflating";
  } else {
    why = "corrupt PNG image data (zlib: " + (msg.empty() ? std::string(zError(rc)) : msg) + ")";
  }
  return false;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

// Non-interlaced PNG of any colour type and bit depth; alpha is dropped,
// 16-bit samples keep their high byte, gray and palette expand to RGB.
bool decodePng(const std::vector<uint8_t>& d, Image& img, std::string& why) {
  size_t i = 8;
  uint32_t W = 0, H = 0;
  int depth = 0, ctype = -1, interlace = 0;
  std::vector<uint8_t> idat, plte;
  while(i + 12 <= d.size()) {
    uint32_t len = be32(&d[i]);
    std::string type(reinterpret_cast<const char*>(&d[i + 4]), 4);
    if(len > d.size() - i - 12) { why = "truncated PNG chunk " + type; return false; }
    const uint8_t* body = &d[i + 8];
    if(type == "IHDR" && len >= 13) {
      W = be32(body);
      H = be32(body + 4);
      depth = body[8];
      ctype = body[9];
      interlace = body[12];
    } else if(type == "PLTE") {
      plte.assign(body, body + len);
    } else if(type == "IDAT") {
      idat.insert(idat.end(), body, body + len);
    } else if(type == "IEND") {
      break;
    }
    i += 12 + len;
  }
  if(ctype < 0 || W == 0 || H == 0) { why = "PNG without a valid IHDR"; return false; }
  if(interlace) { why = "interlaced PNG images"; return false; }
  int channels = ctype == 0 ? 1 : ctype == 2 ? 3 : ctype == 3 ? 1 : ctype == 4 ? 2 : ctype == 6 ? 4 : 0;
  bool depthOk = depth == 8 || depth == 16 || ((ctype == 0 || ctype == 3) && (depth == 1 || depth == 2 || depth == 4));
  if(!channels || !depthOk || (ctype == 3 && depth == 16)) { why = "PNG colour type/bit depth combination"; return false; }
  if(ctype == 3 && plte.size() < 3) { why = "paletted PNG without a palette"; return false; }
  const size_t bitsPerPixel = static_cast<size_t>(channels * depth);
  const size_t stride = (W * bitsPerPixel + 7) / 8, bpp = std::max<size_t>(1, bitsPerPixel / 8);
  // Each row is a filter byte and `stride` bytes. DEFLATE expands at most
  // 1032:1, so a header that promises more than that is short data, not an
  // allocation to make.
  const size_t most = (idat.size() + 1) * 1032;
  if(H > most / (stride + 1)) { why = "PNG image data shorter than the image"; return false; }
  std::vector<uint8_t> raw;
  if(!inflatePng(idat, (stride + 1) * H, raw, why)) return false;
  std::vector<uint8_t> cur(stride), prev(stride, 0);
  img.h = H;
  img.w = W;
  img.rgb.resize(static_cast<size_t>(img.h * img.w * 3));
  for(uint32_t y = 0; y < H; ++y) {
    const uint8_t* line = &raw[y * (stride + 1)];
    int filter = line[0];
    for(size_t k = 0; k < stride; ++k) {
      int a = k >= bpp ? cur[k - bpp] : 0, b = prev[k], c = k >= bpp ? prev[k - bpp] : 0, x = line[1 + k];
      switch(filter) {
        case 0: break;
        case 1: x += a; break;
        case 2: x += b; break;
        case 3: x += (a + b) / 2; break;
        case 4: {
          int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          x += (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
          break;
        }
        default: why = "bad PNG filter type"; return false;
      }
      cur[k] = static_cast<uint8_t>(x);
    }
    for(uint32_t xpix = 0; xpix < W; ++xpix) {
      // Sample s of this pixel, scaled to 8 bits (palette indexes unscaled).
      auto sample = [&](int s) -> int {
        if(depth == 16) return cur[(static_cast<size_t>(xpix) * channels + s) * 2];
        if(depth == 8) return cur[static_cast<size_t>(xpix) * channels + s];
        size_t bit = xpix * static_cast<size_t>(depth);
        int v = (cur[bit / 8] >> (8 - depth - bit % 8)) & ((1 << depth) - 1);
        return ctype == 3 ? v : v * 255 / ((1 << depth) - 1);
      };
      uint8_t* o = &img.rgb[(static_cast<size_t>(y) * W + xpix) * 3];
      if(ctype == 3) {
        size_t k = static_cast<size_t>(sample(0)) * 3;
        if(k + 2 >= plte.size()) { why = "PNG palette index out of range"; return false; }
        o[0] = plte[k]; o[1] = plte[k + 1]; o[2] = plte[k + 2];
      } else if(ctype == 0 || ctype == 4) {
        o[0] = o[1] = o[2] = static_cast<uint8_t>(sample(0));
      } else {
        for(int s = 0; s < 3; ++s) o[s] = static_cast<uint8_t>(sample(s));
      }
    }
    std::swap(cur, prev);
  }
  return true;
}

}  // namespace

bool decodeImage(const std::vector<uint8_t>& d, Image& img, std::string& why) {
  auto starts = [&](std::initializer_list<uint8_t> magic) {
    return d.size() >= magic.size() && std::equal(magic.begin(), magic.end(), d.begin());
  };
  if(starts({'B', 'M'})) return decodeBmp(d, img, why);
  if(d.size() >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7') return decodePnm(d, img, why);
  if(starts({0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a})) return decodePng(d, img, why);
  why = starts({0xff, 0xd8}) ? "JPEG"
      : starts({0, 0, 0, 0x0c, 'j', 'P'}) || starts({0xff, 0x4f, 0xff, 0x51}) ? "JPEG 2000"
      : starts({'I', 'I', 42, 0}) || starts({'M', 'M', 0, 42}) ? "TIFF"
      : starts({'R', 'I', 'F', 'F'}) ? "WebP" : "an unrecognised format";
  why += " images (only BMP, PNM and PNG are decoded)";
  return false;
}

}  // namespace io
}  // namespace onyx
