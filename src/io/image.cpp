// Odds and ends of ONNX: BitCast (a registry op) and the image decoding of
// ImageDecoder (BMP, PNM and PNG; its import, and TensorScatter's, are in
// converters/).
#include <onyx/io/image.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/shape.h>

namespace onyx {

// y = x's bytes read as type `to`
ONYX_OP(kBitCast, "bitcast")
    .doc("y = the bytes of x reinterpreted as element type `to` (same bit width, same shape; little endian)")
    .inputs(1)
    .attr("to", int64_t(Type::float32))
    .infer([](InferCtx& c) {
      Type from = c.typeOf(0), to = static_cast<Type>(c.attrs.i("to"));
      c.check(static_cast<int>(to) > 0 && static_cast<int>(to) < kNumTypes, "target type ", static_cast<int>(to),
              " is not an element type");
      c.check(from != Type::string && to != Type::string, "strings have no fixed bit pattern to reinterpret");
      c.check(typeBits(from) == typeBits(to), "cannot reinterpret ", from, " (", typeBits(from), " bits) as ", to,
              " (", typeBits(to), " bits): the widths must match");
      c.shape = c.shapeOf(0);
      c.type = to;
    })
    .anyDevice([](KernelCtx& c) {
      ONYX_ASSERT(c.out.bytes() == c.in[0]->bytes(), "bitcast of ", c.in[0]->bytes(), " bytes into ", c.out.bytes());
      ops::copyInput0(c);
    })
    .notDifferentiable("a reinterpretation of bits has no useful derivative")
    .onnx("BitCast", 26);

// y = bitcast(x, to)
Expr bitcast(Expr x, Type to) { return x->graph()->make(kBitCast, {x}, {{"to", int64_t(to)}}); }

// ------------------------------------------------------------ ImageDecoder

namespace {

uint32_t le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for(int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Uncompressed BMP (BI_RGB, or BI_BITFIELDS with the standard masks) with
// 8 (paletted), 24 or 32 bits per pixel; bottom-up or top-down rows.
bool decodeBmp(const std::vector<uint8_t>& d, Image& img, std::string& why) {
  if(d.size() < 54) { why = "truncated BMP header"; return false; }
  uint32_t offset = le(&d[10], 4), hdr = le(&d[14], 4);
  int32_t w = static_cast<int32_t>(le(&d[18], 4)), h = static_cast<int32_t>(le(&d[22], 4));
  uint32_t bpp = le(&d[28], 2), comp = le(&d[30], 4);
  if(comp != 0 && comp != 3) { why = "compressed BMP (compression " + std::to_string(comp) + ")"; return false; }
  if(bpp != 8 && bpp != 24 && bpp != 32) { why = "BMP with " + std::to_string(bpp) + " bits per pixel"; return false; }
  bool topDown = h < 0;
  int64_t H = topDown ? -int64_t(h) : h, W = w;
  if(W <= 0 || H <= 0) { why = "BMP with no pixels"; return false; }
  int64_t stride = ((W * bpp + 31) / 32) * 4;
  if(static_cast<uint64_t>(offset) + static_cast<uint64_t>(stride * H) > d.size()) { why = "truncated BMP pixel data"; return false; }
  uint32_t ncolors = bpp == 8 ? (le(&d[46], 4) ? le(&d[46], 4) : 256) : 0;
  size_t pal = 14 + hdr;
  if(bpp == 8 && pal + 4 * ncolors > d.size()) { why = "truncated BMP palette"; return false; }
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
  if(kind != '2' && kind != '3' && kind != '5' && kind != '6') { why = "PNM kind P" + std::string(1, kind); return false; }
  int64_t W, H, maxv;
  if(!number(W) || !number(H) || !number(maxv) || W <= 0 || H <= 0 || maxv <= 0 || maxv > 65535) {
    why = "bad PNM header";
    return false;
  }
  ++i;  // the single whitespace after maxval
  int ch = color ? 3 : 1, bytes = maxv > 255 ? 2 : 1;
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

// ---- PNG: zlib inflate (RFC 1950/1951) and the PNG filters.

struct BitReader {
  const uint8_t* p;
  size_t n, pos = 0;
  uint32_t buf = 0;
  int cnt = 0;
  bool bad = false;
  int bits(int k) {
    while(cnt < k) {
      if(pos >= n) { bad = true; return 0; }
      buf |= static_cast<uint32_t>(p[pos++]) << cnt;
      cnt += 8;
    }
    int v = static_cast<int>(buf & ((1u << k) - 1));
    buf >>= k;
    cnt -= k;
    return v;
  }
};

// Canonical Huffman code from code lengths: counts per length and the
// symbols ordered by (length, value).
struct Huffman {
  int counts[16] = {0};
  std::vector<int> symbols;
  bool build(const int* lengths, int n) {
    symbols.assign(static_cast<size_t>(n), 0);
    for(int i = 0; i < n; ++i) counts[lengths[i]]++;
    counts[0] = 0;
    int offs[16] = {0};
    for(int l = 1; l < 15; ++l) offs[l + 1] = offs[l] + counts[l];
    for(int i = 0; i < n; ++i)
      if(lengths[i]) symbols[static_cast<size_t>(offs[lengths[i]]++)] = i;
    return true;
  }
  int decode(BitReader& br) const {
    int code = 0, first = 0, index = 0;
    for(int len = 1; len < 16; ++len) {
      code |= br.bits(1);
      if(br.bad) return -1;
      int count = counts[len];
      if(code - first < count) return symbols[static_cast<size_t>(index + code - first)];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    return -1;
  }
};

bool inflate(const uint8_t* data, size_t n, std::vector<uint8_t>& out, std::string& why) {
  static const int lbase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static const int lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  static const int dbase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  static const int dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
  if(n < 2 || (data[0] & 0x0f) != 8 || ((data[0] << 8) | data[1]) % 31 != 0) { why = "bad zlib header"; return false; }
  BitReader br{data + 2, n - 2};
  bool last = false;
  while(!last) {
    last = br.bits(1) != 0;
    int type = br.bits(2);
    if(br.bad) break;
    if(type == 0) {
      br.buf = 0;
      br.cnt = 0;
      if(br.pos + 4 > br.n) { br.bad = true; break; }
      unsigned len = br.p[br.pos] | (br.p[br.pos + 1] << 8), nlen = br.p[br.pos + 2] | (br.p[br.pos + 3] << 8);
      br.pos += 4;
      if((len ^ 0xffffu) != nlen || br.pos + len > br.n) { br.bad = true; break; }
      out.insert(out.end(), br.p + br.pos, br.p + br.pos + len);
      br.pos += len;
      continue;
    }
    if(type == 3) { why = "bad deflate block type"; return false; }
    Huffman lit, dist;
    int lengths[320];
    if(type == 1) {
      for(int i = 0; i < 288; ++i) lengths[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
      lit.build(lengths, 288);
      for(int i = 0; i < 30; ++i) lengths[i] = 5;
      dist.build(lengths, 30);
    } else {
      static const int order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
      int nlit = br.bits(5) + 257, ndist = br.bits(5) + 1, ncode = br.bits(4) + 4;
      if(nlit > 286 || ndist > 30) { why = "bad deflate code counts"; return false; }
      int cl[19] = {0};
      for(int i = 0; i < ncode; ++i) cl[order[i]] = br.bits(3);
      Huffman lencode;
      lencode.build(cl, 19);
      int i = 0;
      while(i < nlit + ndist && !br.bad) {
        int sym = lencode.decode(br);
        if(sym < 0) { br.bad = true; break; }
        if(sym < 16) { lengths[i++] = sym; continue; }
        int rep = 0, val = 0;
        if(sym == 16) {
          if(i == 0) { why = "bad deflate code lengths"; return false; }
          val = lengths[i - 1];
          rep = 3 + br.bits(2);
        } else if(sym == 17) {
          rep = 3 + br.bits(3);
        } else {
          rep = 11 + br.bits(7);
        }
        if(i + rep > nlit + ndist) { why = "bad deflate code lengths"; return false; }
        while(rep--) lengths[i++] = val;
      }
      if(br.bad) break;
      lit.build(lengths, nlit);
      dist.build(lengths + nlit, ndist);
    }
    while(true) {
      int sym = lit.decode(br);
      if(sym < 0) { br.bad = true; break; }
      if(sym < 256) { out.push_back(static_cast<uint8_t>(sym)); continue; }
      if(sym == 256) break;
      sym -= 257;
      if(sym >= 29) { why = "bad deflate length code"; return false; }
      int len = lbase[sym] + br.bits(lext[sym]);
      int ds = dist.decode(br);
      if(ds < 0 || ds >= 30) { br.bad = true; break; }
      size_t d = static_cast<size_t>(dbase[ds] + br.bits(dext[ds]));
      if(br.bad) break;
      if(d > out.size()) { why = "deflate distance too far back"; return false; }
      for(int k = 0; k < len; ++k) out.push_back(out[out.size() - d]);
    }
    if(br.bad) break;
  }
  if(br.bad) { why = "truncated or corrupt deflate data"; return false; }
  return true;
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
  std::vector<uint8_t> raw;
  if(!inflate(idat.data(), idat.size(), raw, why)) return false;
  const size_t bitsPerPixel = static_cast<size_t>(channels * depth);
  const size_t stride = (W * bitsPerPixel + 7) / 8, bpp = std::max<size_t>(1, bitsPerPixel / 8);
  if(raw.size() < (stride + 1) * H) { why = "PNG image data shorter than the image"; return false; }
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
        if(depth == 16) return cur[(xpix * channels + s) * 2];
        if(depth == 8) return cur[xpix * channels + s];
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

}  // namespace onyx
