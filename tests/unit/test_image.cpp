// src/io/image.cpp: PNGs written here (zlib-compressed, every row filter,
// the colour types, bit depths and Adam7 interlacing ImageDecoder meets);
// JPEG, TIFF, WebP and JPEG 2000 files made by PIL (tests/data/images, with
// PIL's own decoding of each, make_images.py), which must decode to the same
// bytes; and the one-line errors, naming the format, for corrupt, truncated
// or oversized files. A format this build has no library for is skipped.
#include <gtest/gtest.h>

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <onyx/core/tensor.h>
#include <onyx/io/image.h>
#include <onyx/io/npz.h>

namespace onyx {
namespace {

using Bytes = std::vector<uint8_t>;

void putBe32(Bytes& out, uint32_t v) {
  for(int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(Bytes& png, const char* type, const Bytes& body) {
  putBe32(png, static_cast<uint32_t>(body.size()));
  Bytes typed(type, type + 4);
  typed.insert(typed.end(), body.begin(), body.end());
  png.insert(png.end(), typed.begin(), typed.end());
  putBe32(png, static_cast<uint32_t>(crc32(0, typed.data(), static_cast<uInt>(typed.size()))));
}

Bytes zlibCompress(const Bytes& raw) {
  uLongf n = compressBound(raw.size());
  Bytes z(n);
  EXPECT_EQ(compress(z.data(), &n, raw.data(), raw.size()), Z_OK);
  z.resize(n);
  return z;
}

// Row y filtered with PNG filter f (0 none, 1 sub, 2 up, 3 average, 4
// Paeth) given the previous row's bytes; bpp bytes per pixel (at least 1).
Bytes filterRow(const Bytes& row, const Bytes& prev, int f, size_t bpp) {
  Bytes out{static_cast<uint8_t>(f)};
  for(size_t k = 0; k < row.size(); ++k) {
    int a = k >= bpp ? row[k - bpp] : 0, b = prev[k], c = k >= bpp ? prev[k - bpp] : 0;
    int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
    out.push_back(static_cast<uint8_t>(row[k] - pred));
  }
  return out;
}

// The filtered rows of one image (or one Adam7 pass), row y filtered with
// filter y % 5.
Bytes filterAll(const std::vector<Bytes>& rows, size_t bpp) {
  Bytes raw;
  if(rows.empty() || rows[0].empty()) return raw;
  Bytes prev(rows[0].size(), 0);
  for(size_t y = 0; y < rows.size(); ++y) {
    Bytes f = filterRow(rows[y], prev, static_cast<int>(y % 5), bpp);
    raw.insert(raw.end(), f.begin(), f.end());
    prev = rows[y];
  }
  return raw;
}

// A PNG of the given unfiltered rows (whole bytes per pixel when
// interlaced).
Bytes makePng(uint32_t w, uint32_t h, int depth, int ctype, const std::vector<Bytes>& rows, size_t bpp,
              const Bytes& palette = {}, const Bytes& extraRaw = {}, bool interlaced = false, const Bytes& trns = {}) {
  Bytes png{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  Bytes ihdr;
  putBe32(ihdr, w);
  putBe32(ihdr, h);
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(depth), static_cast<uint8_t>(ctype), 0, 0, uint8_t(interlaced)});
  chunk(png, "IHDR", ihdr);
  if(!palette.empty()) chunk(png, "PLTE", palette);
  if(!trns.empty()) chunk(png, "tRNS", trns);
  Bytes raw;
  if(!interlaced) {
    raw = filterAll(rows, bpp);
  } else {
    // Adam7: pass p holds pixels (x0 + i dx, y0 + j dy).
    const int x0[] = {0, 4, 0, 2, 0, 1, 0}, y0[] = {0, 0, 4, 0, 2, 0, 1};
    const int dx[] = {8, 8, 4, 4, 2, 2, 1}, dy[] = {8, 8, 8, 4, 4, 2, 2};
    for(int p = 0; p < 7; ++p) {
      std::vector<Bytes> pass;
      for(uint32_t y = y0[p]; y < h; y += dy[p]) {
        Bytes r;
        for(uint32_t x = x0[p]; x < w; x += dx[p]) r.insert(r.end(), &rows[y][x * bpp], &rows[y][x * bpp] + bpp);
        if(!r.empty()) pass.push_back(r);
      }
      Bytes f = filterAll(pass, bpp);
      raw.insert(raw.end(), f.begin(), f.end());
    }
  }
  raw.insert(raw.end(), extraRaw.begin(), extraRaw.end());
  Bytes z = zlibCompress(raw);
  // Two IDAT chunks: the stream may be split anywhere.
  size_t half = z.size() / 2;
  chunk(png, "IDAT", Bytes(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(half)));
  chunk(png, "IDAT", Bytes(z.begin() + static_cast<std::ptrdiff_t>(half), z.end()));
  chunk(png, "IEND", {});
  return png;
}

// 5 rows of 4 RGB pixels (one row per filter type).
std::vector<Bytes> rgbRows() {
  std::vector<Bytes> rows;
  for(int y = 0; y < 5; ++y) {
    Bytes r;
    for(int x = 0; x < 4; ++x)
      for(int c = 0; c < 3; ++c) r.push_back(static_cast<uint8_t>((37 * y + 91 * x + 53 * c + x * y * c) & 0xff));
    rows.push_back(r);
  }
  return rows;
}

Bytes concat(const std::vector<Bytes>& rows) {
  Bytes all;
  for(const Bytes& r : rows) all.insert(all.end(), r.begin(), r.end());
  return all;
}

std::string whyNot(const Bytes& file) {
  io::Image img;
  std::string why;
  EXPECT_FALSE(io::decodeImage(file, img, why));
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  return why;
}

bool built(const std::string& format) {
  std::vector<std::string> all = io::imageFormats();
  return std::find(all.begin(), all.end(), format) != all.end();
}

#define REQUIRE_FORMAT(f) \
  if(!built(f)) GTEST_SKIP() << f " has no decoder in this build"

Bytes readFile(const std::string& name) {
  std::ifstream f(std::string(ONYX_SOURCE_DIR) + "/tests/data/images/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// The message of `file`'s refusal starts with `prefix` (the rest is the
// library's own words).
#define EXPECT_REFUSED_WITH(file, prefix)                       \
  do {                                                          \
    std::string why_ = whyNot(file);                            \
    EXPECT_EQ(why_.rfind(prefix, 0), 0u) << why_;               \
  } while(0)

TEST(ImageDecode, PngRgbEveryFilter) {
  REQUIRE_FORMAT("PNG");
  std::vector<Bytes> rows = rgbRows();
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 2, rows, 3), img, why)) << why;
  EXPECT_EQ(img.h, 5);
  EXPECT_EQ(img.w, 4);
  EXPECT_EQ(img.rgb, concat(rows));
}

// As PIL: RGBA drops alpha, 16-bit RGB keeps the high byte, 16-bit gray
// (PIL's I;16) clips at 255.
TEST(ImageDecode, PngRgbaRgb16AndGray16AsPil) {
  REQUIRE_FORMAT("PNG");
  std::vector<Bytes> rgba, rgb16, rgb = rgbRows();
  for(const Bytes& r : rgb) {
    Bytes o, o16;
    for(size_t p = 0; p < r.size(); p += 3) o.insert(o.end(), {r[p], r[p + 1], r[p + 2], static_cast<uint8_t>(p * 7)});
    for(uint8_t v : r) o16.insert(o16.end(), {v, static_cast<uint8_t>(255 - v)});
    rgba.push_back(o);
    rgb16.push_back(o16);
  }
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 6, rgba, 4), img, why)) << why;
  EXPECT_EQ(img.rgb, concat(rgb));
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 16, 2, rgb16, 6), img, why)) << why;
  EXPECT_EQ(img.rgb, concat(rgb));

  std::vector<Bytes> gray{{0x12, 0x34, 0xab, 0xcd, 0xff, 0x00}, {0x00, 0x01, 0x00, 0xfe, 0x01, 0x00}};
  ASSERT_TRUE(io::decodeImage(makePng(3, 2, 16, 0, gray, 2), img, why)) << why;
  EXPECT_EQ(img.rgb, (Bytes{255, 255, 255, 255, 255, 255, 255, 255, 255, 1, 1, 1, 254, 254, 254, 255, 255, 255}));
}

TEST(ImageDecode, PngPaletted2BitWithTransparencyAndGray1Bit) {
  REQUIRE_FORMAT("PNG");
  Bytes palette{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};
  // 5 pixels of indexes 0 1 2 3 1, two bits each, high bits first; tRNS
  // makes index 1 transparent, which RGB drops.
  std::vector<Bytes> rows{{0b00011011, 0b01000000}};
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(5, 1, 2, 3, rows, 1, palette, {}, false, {255, 0}), img, why)) << why;
  EXPECT_EQ(img.rgb, (Bytes{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 40, 50, 60}));
  ASSERT_TRUE(io::decodeImage(makePng(3, 1, 1, 0, {{0b10100000}}, 1), img, why)) << why;
  EXPECT_EQ(img.rgb, (Bytes{255, 255, 255, 0, 0, 0, 255, 255, 255}));
}

TEST(ImageDecode, PngInterlaced) {
  REQUIRE_FORMAT("PNG");
  // 11 x 9: every Adam7 pass has pixels, some a partial last block.
  std::vector<Bytes> rows;
  for(int y = 0; y < 9; ++y) {
    Bytes r;
    for(int x = 0; x < 11; ++x)
      for(int c = 0; c < 3; ++c) r.push_back(static_cast<uint8_t>(17 * y + 29 * x + 71 * c + x * y));
    rows.push_back(r);
  }
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(11, 9, 8, 2, rows, 3, {}, {}, true), img, why)) << why;
  EXPECT_EQ(img.w, 11);
  EXPECT_EQ(img.h, 9);
  EXPECT_EQ(img.rgb, concat(rows));
}

// Data after the last row is ignored, as PIL does.
TEST(ImageDecode, PngIgnoresDataAfterTheImage) {
  REQUIRE_FORMAT("PNG");
  std::vector<Bytes> rows = rgbRows();
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 2, rows, 3, {}, Bytes(40, 7)), img, why)) << why;
  EXPECT_EQ(img.rgb, concat(rows));
}

// Each file decodes to what PIL gives for it, bit for bit (JPEG included:
// both use libjpeg-turbo's accurate integer IDCT and fancy upsampling).
TEST(ImageDecode, FilesMadeByPilDecodeAsPil) {
  struct Case {
    const char* file;
    const char* format;
  };
  const Case cases[] = {
      {"rgb.jpg", "JPEG"},          {"rgb444.jpg", "JPEG"},        {"gray.jpg", "JPEG"},
      {"progressive.jpg", "JPEG"},  {"cmyk.jpg", "JPEG"},          {"rgb.tif", "TIFF"},
      {"deflate.tif", "TIFF"},      {"lzw_gray.tif", "TIFF"},      {"palette.tif", "TIFF"},
      {"opaque_rgba.tif", "TIFF"},  {"bottom_up.tif", "TIFF"},     {"right_top.tif", "TIFF"},
      {"lossy.webp", "WebP"},       {"lossless_rgba.webp", "WebP"}, {"rgb.jp2", "JPEG 2000"},
      {"gray.j2k", "JPEG 2000"},    {"rgba.jp2", "JPEG 2000"},     {"gray16.j2k", "JPEG 2000"},
  };
  int decoded = 0;
  for(const Case& c : cases) {
    if(!built(c.format)) continue;
    SCOPED_TRACE(c.file);
    Bytes file = readFile(c.file), npy = readFile(std::string(c.file) + ".npy");
    Tensor want = io::parseNpy(std::string(npy.begin(), npy.end()), c.file);
    io::Image img;
    std::string why;
    ASSERT_TRUE(io::decodeImage(file, img, why)) << why;
    ASSERT_EQ(Shape({img.h, img.w, 3}), want->shape());
    EXPECT_EQ(img.rgb, Bytes(want->data<uint8_t>(), want->data<uint8_t>() + want->size()));
    ++decoded;
  }
  if(decoded == 0) GTEST_SKIP() << "no JPEG, TIFF, WebP or JPEG 2000 decoder in this build";
}

TEST(ImageDecode, PngCorruptTruncatedOrOversizedSayWhy) {
  REQUIRE_FORMAT("PNG");
  Bytes good = makePng(4, 5, 8, 2, rgbRows(), 3);
  // The zlib header of the first IDAT: 33 bytes of signature and IHDR, then
  // the IDAT's length and type.
  Bytes bad = good;
  bad[33 + 8] ^= 0xff;
  EXPECT_EQ(whyNot(bad), "corrupt PNG file (libpng: IDAT: invalid window size (libpng))");

  // The second IDAT cut short, or missing with IEND.
  EXPECT_EQ(whyNot(Bytes(good.begin(), good.end() - 12 - 6)), "truncated PNG file");
  size_t first = 33 + 12 + (size_t(good[33]) << 24 | size_t(good[34]) << 16 | size_t(good[35]) << 8 | good[36]);
  EXPECT_EQ(whyNot(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(first))), "truncated PNG file");

  // A complete file whose stream ends before the last row.
  EXPECT_EQ(whyNot(makePng(4, 6, 8, 2, rgbRows(), 3)), "corrupt PNG file (libpng: Not enough image data)");

  // Headers promising 100000 x 100000 and 2^31 - 1 x 2^31 - 1 pixels:
  // refused before any allocation, by Onyx's limit and libpng's.
  EXPECT_EQ(whyNot(makePng(100000, 100000, 8, 2, rgbRows(), 3)),
            "PNG image of 100000 x 100000 pixels (more than the limit of 2^28)");
  EXPECT_REFUSED_WITH(makePng(0x7fffffff, 0x7fffffff, 8, 2, rgbRows(), 3), "corrupt PNG file (libpng: ");
  // Within the limit, but more than 1032:1 of the file's size.
  EXPECT_EQ(whyNot(makePng(16000, 16000, 8, 2, rgbRows(), 3)),
            "PNG image data shorter than the image (16000 x 16000 pixels)");
}

TEST(ImageDecode, BmpAndPnmCorruptTruncatedOrOversizedSayWhy) {
  Bytes bmp(54, 0);
  bmp[0] = 'B';
  bmp[1] = 'M';
  bmp[18] = 0xa0;  // width 100000
  bmp[19] = 0x86;
  bmp[20] = 0x01;
  bmp[22] = 0xff;  // height 0x7fffffff
  bmp[23] = 0xff;
  bmp[24] = 0xff;
  bmp[25] = 0x7f;
  bmp[28] = 24;
  EXPECT_EQ(whyNot(bmp), "truncated BMP pixel data");

  std::string pnm = "P6 100000 100000 255\n\x01\x02\x03";
  EXPECT_EQ(whyNot(Bytes(pnm.begin(), pnm.end())), "truncated PNM pixel data");
  std::string p1 = "P1 1 1\n1";
  EXPECT_EQ(whyNot(Bytes(p1.begin(), p1.end())), "PNM kind P1 (only P2, P3, P5 and P6 are decoded)");

  std::string list;
  for(const std::string& f : io::imageFormats()) list += (list.empty() ? "" : ", ") + f;
  EXPECT_EQ(whyNot(Bytes{'G', 'I', 'F', '8', '9', 'a'}),
            "an image of an unrecognised format (this build decodes " + list + ")");
}

// A format whose library was not found names itself and what the build
// decodes (checked in builds without them).
TEST(ImageDecode, FormatWithoutItsLibraryNamesIt) {
  std::string list;
  for(const std::string& f : io::imageFormats()) list += (list.empty() ? "" : ", ") + f;
  const std::pair<const char*, Bytes> starts[] = {
      {"PNG", {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a}},
      {"JPEG", {0xff, 0xd8, 0xff, 0xe0}},
      {"TIFF", {'I', 'I', 42, 0, 8, 0, 0, 0}},
      {"WebP", {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'W', 'E', 'B', 'P'}},
      {"JPEG 2000", {0xff, 0x4f, 0xff, 0x51}},
  };
  for(const auto& [format, bytes] : starts) {
    if(!built(format)) {
      EXPECT_EQ(whyNot(bytes), std::string(format) + " images (this build decodes " + list + ")");
    }
  }
}

// Big-endian 16-bit value at p.
void putBe16(Bytes& d, size_t at, uint32_t v) {
  d[at] = static_cast<uint8_t>(v >> 8);
  d[at + 1] = static_cast<uint8_t>(v);
}

TEST(ImageDecode, JpegCorruptTruncatedOrOversizedSayWhy) {
  REQUIRE_FORMAT("JPEG");
  Bytes good = readFile("rgb.jpg");
  EXPECT_EQ(whyNot(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2))),
            "truncated JPEG file");
  EXPECT_EQ(whyNot(Bytes{0xff, 0xd8, 0xff, 0xe0}), "truncated JPEG file");
  Bytes bad = good;
  bad[3] = 0x07;  // APP0 becomes an unknown marker
  EXPECT_EQ(whyNot(bad), "corrupt JPEG file (libjpeg: Unsupported marker type 0x07)");
  // SOF0 claiming 65000 x 65000 (JPEG's dims are 16-bit).
  Bytes huge = good;
  size_t sof = 2;
  while(sof + 9 < huge.size() && !(huge[sof] == 0xff && huge[sof + 1] == 0xc0)) ++sof;
  ASSERT_LT(sof + 9, huge.size());
  putBe16(huge, sof + 5, 65000);
  putBe16(huge, sof + 7, 65000);
  EXPECT_EQ(whyNot(huge), "JPEG image of 65000 x 65000 pixels (more than the limit of 2^28)");
}

TEST(ImageDecode, TiffCorruptTruncatedOrOversizedSayWhy) {
  REQUIRE_FORMAT("TIFF");
  Bytes good = readFile("rgb.tif");  // little-endian, uncompressed
  EXPECT_REFUSED_WITH(Bytes(good.begin(), good.begin() + 100), "corrupt or truncated TIFF file (libtiff: ");
  Bytes bad = good;
  bad[4] = bad[5] = bad[6] = 0xee;  // the first directory's offset, past the end
  EXPECT_REFUSED_WITH(bad, "corrupt or truncated TIFF file (libtiff: ");
  // ImageWidth and ImageLength (tags 256, 257) made LONG 100000.
  Bytes huge = good;
  const size_t ifd = size_t(huge[4]) | size_t(huge[5]) << 8 | size_t(huge[6]) << 16 | size_t(huge[7]) << 24;
  const size_t n = size_t(huge[ifd]) | size_t(huge[ifd + 1]) << 8;
  int patched = 0;
  for(size_t e = ifd + 2; e < ifd + 2 + 12 * n; e += 12) {
    const uint32_t tag = uint32_t(huge[e]) | uint32_t(huge[e + 1]) << 8;
    if(tag != 256 && tag != 257) continue;
    const Bytes entry{huge[e], huge[e + 1], 4, 0, 1, 0, 0, 0, 0xa0, 0x86, 0x01, 0x00};
    std::copy(entry.begin(), entry.end(), huge.begin() + static_cast<std::ptrdiff_t>(e));
    ++patched;
  }
  ASSERT_EQ(patched, 2);
  EXPECT_EQ(whyNot(huge), "TIFF image of 100000 x 100000 pixels (more than the limit of 2^28)");
}

TEST(ImageDecode, WebpCorruptTruncatedOrOversizedSayWhy) {
  REQUIRE_FORMAT("WebP");
  Bytes good = readFile("lossy.webp");
  EXPECT_EQ(whyNot(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2))),
            "truncated WebP file");
  Bytes bad = good;
  bad[23] ^= 0xff;  // the VP8 frame's start code (9d 01 2a at 23)
  EXPECT_EQ(whyNot(bad), "corrupt WebP file (libwebp: bitstream error)");
  // An extended header (VP8X) whose canvas is 100000 x 100000, and no frame:
  // refused by libwebp before Onyx allocates (a still image's frame has
  // 14-bit dims, under the limit of 2^28 pixels).
  Bytes vp8x{'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0,
             0, 0, 0, 0, 0x9f, 0x86, 0x01, 0x9f, 0x86, 0x01};
  EXPECT_EQ(whyNot(vp8x), "corrupt WebP file (libwebp: bitstream error)");
}

TEST(ImageDecode, Jpeg2000CorruptTruncatedOrOversizedSayWhy) {
  REQUIRE_FORMAT("JPEG 2000");
  for(const char* name : {"rgb.jp2", "gray.j2k"}) {
    SCOPED_TRACE(name);
    Bytes good = readFile(name);
    EXPECT_REFUSED_WITH(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() * 2 / 3)),
                        "corrupt or truncated JPEG 2000 file (OpenJPEG: ");
  }
  Bytes good = readFile("gray.j2k");  // a bare codestream: SOC, then SIZ
  Bytes bad = good;
  bad[4] = bad[5] = 0;  // SIZ's length
  EXPECT_REFUSED_WITH(bad, "corrupt or truncated JPEG 2000 file (OpenJPEG: ");
  // Xsiz, Ysiz, XTsiz, YTsiz (the image and its one tile) 100000.
  Bytes huge = good;
  for(size_t at : {8, 12, 24, 28}) {
    const Bytes v{0x00, 0x01, 0x86, 0xa0};
    std::copy(v.begin(), v.end(), huge.begin() + static_cast<std::ptrdiff_t>(at));
  }
  EXPECT_EQ(whyNot(huge), "JPEG 2000 image of 100000 x 100000 pixels (more than the limit of 2^28)");
}

}  // namespace
}  // namespace onyx
