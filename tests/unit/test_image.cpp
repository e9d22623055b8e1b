// src/io/image.cpp: PNGs written here (zlib-compressed, every row filter,
// the colour types and bit depths ImageDecoder meets), and the one-line
// errors for corrupt, truncated or oversized files.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <onyx/io/image.h>

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

// A PNG of the given unfiltered rows, row y filtered with filter y % 5.
Bytes makePng(uint32_t w, uint32_t h, int depth, int ctype, const std::vector<Bytes>& rows, size_t bpp,
              const Bytes& palette = {}, const Bytes& extraRaw = {}) {
  Bytes png{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  Bytes ihdr;
  putBe32(ihdr, w);
  putBe32(ihdr, h);
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(depth), static_cast<uint8_t>(ctype), 0, 0, 0});
  chunk(png, "IHDR", ihdr);
  if(!palette.empty()) chunk(png, "PLTE", palette);
  Bytes raw, prev(rows[0].size(), 0);
  for(size_t y = 0; y < rows.size(); ++y) {
    Bytes f = filterRow(rows[y], prev, static_cast<int>(y % 5), bpp);
    raw.insert(raw.end(), f.begin(), f.end());
    prev = rows[y];
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

TEST(ImageDecode, PngRgbEveryFilter) {
  std::vector<Bytes> rows = rgbRows();
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 2, rows, 3), img, why)) << why;
  EXPECT_EQ(img.h, 5);
  EXPECT_EQ(img.w, 4);
  EXPECT_EQ(img.rgb, concat(rows));
}

TEST(ImageDecode, PngRgbaDropsAlphaAndGray16KeepsTheHighByte) {
  std::vector<Bytes> rgba, rgb = rgbRows();
  for(const Bytes& r : rgb) {
    Bytes o;
    for(size_t p = 0; p < r.size(); p += 3) o.insert(o.end(), {r[p], r[p + 1], r[p + 2], static_cast<uint8_t>(p * 7)});
    rgba.push_back(o);
  }
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 6, rgba, 4), img, why)) << why;
  EXPECT_EQ(img.rgb, concat(rgb));

  std::vector<Bytes> gray{{0x12, 0x34, 0xab, 0xcd, 0xff, 0x00}, {0x00, 0x01, 0x80, 0x00, 0x7f, 0xff}};
  ASSERT_TRUE(io::decodeImage(makePng(3, 2, 16, 0, gray, 2), img, why)) << why;
  EXPECT_EQ(img.rgb, (Bytes{0x12, 0x12, 0x12, 0xab, 0xab, 0xab, 0xff, 0xff, 0xff,
                            0x00, 0x00, 0x00, 0x80, 0x80, 0x80, 0x7f, 0x7f, 0x7f}));
}

TEST(ImageDecode, PngPaletted2Bit) {
  Bytes palette{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};
  // 5 pixels of indexes 0 1 2 3 1, two bits each, high bits first.
  std::vector<Bytes> rows{{0b00011011, 0b01000000}};
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(5, 1, 2, 3, rows, 1, palette), img, why)) << why;
  EXPECT_EQ(img.rgb, (Bytes{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 40, 50, 60}));
}

// Data after the last row is ignored, as libpng does.
TEST(ImageDecode, PngIgnoresDataAfterTheImage) {
  std::vector<Bytes> rows = rgbRows();
  io::Image img;
  std::string why;
  ASSERT_TRUE(io::decodeImage(makePng(4, 5, 8, 2, rows, 3, {}, Bytes(40, 7)), img, why)) << why;
  EXPECT_EQ(img.rgb, concat(rows));
}

TEST(ImageDecode, CorruptTruncatedOrOversizedFilesSayWhy) {
  Bytes good = makePng(4, 5, 8, 2, rgbRows(), 3);
  // The zlib header of the first IDAT: 33 bytes of signature and IHDR, then
  // the IDAT's length and type.
  Bytes bad = good;
  bad[33 + 8] ^= 0xff;
  EXPECT_EQ(whyNot(bad), "corrupt PNG image data (zlib: incorrect header check)");

  // The second IDAT cut short: the stream ends early.
  Bytes cut(good.begin(), good.end() - 12 - 6);
  EXPECT_EQ(whyNot(cut), "truncated PNG chunk IDAT");
  Bytes half = makePng(4, 5, 8, 2, rgbRows(), 3);
  // Only the first IDAT (and IEND): the inflater runs out of input.
  size_t first = 33 + 12 + (size_t(half[33]) << 24 | size_t(half[34]) << 16 | size_t(half[35]) << 8 | half[36]);
  Bytes oneIdat(half.begin(), half.begin() + static_cast<std::ptrdiff_t>(first));
  EXPECT_EQ(whyNot(oneIdat), "truncated PNG image data");

  // A stream that ends before the last row.
  std::vector<Bytes> rows = rgbRows();
  Bytes shortPng = makePng(4, 6, 8, 2, rows, 3);
  EXPECT_EQ(whyNot(shortPng), "PNG image data shorter than the image");

  // A header promising 2^31 x 2^31 pixels: refused before any allocation.
  Bytes huge = makePng(0x7fffffff, 0x7fffffff, 8, 2, rows, 3);
  EXPECT_EQ(whyNot(huge), "PNG image data shorter than the image");

  Bytes bmp(54, 0);
  bmp[0] = 'B';
  bmp[1] = 'M';
  bmp[18] = 0xff;  // width 0x7fffffff
  bmp[19] = 0xff;
  bmp[20] = 0xff;
  bmp[21] = 0x7f;
  bmp[22] = 0xff;  // height 0x7fffffff
  bmp[23] = 0xff;
  bmp[24] = 0xff;
  bmp[25] = 0x7f;
  bmp[28] = 24;
  EXPECT_EQ(whyNot(bmp), "truncated BMP pixel data");

  std::string pnm = "P6 1099511627775 1099511627775 255\n\x01\x02\x03";
  EXPECT_EQ(whyNot(Bytes(pnm.begin(), pnm.end())), "truncated PNM pixel data");
  std::string p1 = "P1 1 1\n1";
  EXPECT_EQ(whyNot(Bytes(p1.begin(), p1.end())), "PNM kind P1 (only P2, P3, P5 and P6 are decoded)");

  EXPECT_EQ(whyNot(Bytes{0xff, 0xd8, 0xff, 0xe0}), "JPEG images (only BMP, PNM and PNG are decoded)");
}

}  // namespace
}  // namespace onyx
