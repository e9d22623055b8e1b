// The image decoding of ONNX's ImageDecoder: each format through the codec
// library Debian keeps for it (libpng, libjpeg-turbo, libtiff, libwebp,
// OpenJPEG), when CMake found it (ONYX_HAVE_<codec>); BMP and PNM, a few
// lines each, read here. Every decoder gives what PIL, ONNX's reference,
// gives for Image.open(file).convert("RGB"), and turns the library's errors
// into one line: libjpeg's and libpng's error exits longjmp back here
// (neither may return), libtiff's and OpenJPEG's go to per-file handlers.
#include <onyx/io/image.h>

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <vector>

#ifdef ONYX_HAVE_PNG
#include <png.h>
#endif
#ifdef ONYX_HAVE_JPEG
#include <jpeglib.h>  // after <cstdio>: it needs FILE
#include <jerror.h>
#endif
#ifdef ONYX_HAVE_TIFF
#include <tiffio.h>
#endif
#ifdef ONYX_HAVE_WEBP
#include <webp/decode.h>
#endif
#ifdef ONYX_HAVE_OPENJP2
#include <openjpeg.h>
#endif

namespace onyx {
namespace io {

namespace {

using Bytes = std::vector<uint8_t>;

// False with `why` naming the format for an image of no pixels or of more
// than kMaxImagePixels.
bool sizeOk(const char* format, int64_t w, int64_t h, std::string& why) {
  if(w <= 0 || h <= 0) {
    why = std::string(format) + " image with no pixels";
    return false;
  }
  if(w > kMaxImagePixels || h > kMaxImagePixels / w) {
    why = std::string(format) + " image of " + std::to_string(w) + " x " + std::to_string(h) +
          " pixels (more than the limit of 2^28)";
    return false;
  }
  return true;
}

// img sized for w x h pixels, or false with `why` naming the format (see
// sizeOk, or memory refused). Called once the header is read, before
// anything of the image's size is allocated.
bool allocate(const char* format, int64_t w, int64_t h, Image& img, std::string& why) {
  if(!sizeOk(format, w, h, why)) return false;
  try {
    img.rgb.assign(static_cast<size_t>(w * h * 3), 0);
  } catch(const std::bad_alloc&) {
    why = std::string(format) + " image of " + std::to_string(w) + " x " + std::to_string(h) +
          " pixels: out of memory";
    return false;
  }
  img.w = w;
  img.h = h;
  return true;
}

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
  if(!allocate("BMP", W, H, img, why)) return false;
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
  if(!allocate("PNM", W, H, img, why)) return false;
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

#ifdef ONYX_HAVE_PNG
// ---- PNG (libpng)

struct PngSource {
  explicit PngSource(const Bytes& bytes) : d(&bytes) {}
  const Bytes* d;
  size_t pos = 0;
  bool truncated = false;
  std::string msg;
};

void pngRead(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if(n > s->d->size() - s->pos) {
    s->truncated = true;
    png_error(png, "truncated");
  }
  std::memcpy(out, s->d->data() + s->pos, n);
  s->pos += n;
}

void pngError(png_structp png, png_const_charp msg) {
  static_cast<PngSource*>(png_get_error_ptr(png))->msg = msg;
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReader() {
    if(png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

// What a PNG decode holds, outside the frames a libpng error longjmps out of.
struct PngJob {
  PngJob(const Bytes& d, Image& image) : src(d), img(image) {}
  PngSource src;
  PngReader r;
  Image& img;
  std::vector<png_bytep> rows;
  Bytes gray16;
  std::string why;  // a refusal of ours
};

// The libpng calls, header to last row. Every colour type, bit depth and
// interlacing. As PIL: alpha and tRNS dropped, palette and gray expanded (1,
// 2, 4 bits scaled to 8), 16-bit samples keep their high byte, except 16-bit
// gray, which PIL opens as I;16 and clips at 255.
bool readPng(PngJob& job) {
  png_structp png = job.r.png;
  png_infop info = job.r.info;
  png_set_read_fn(png, &job.src, pngRead);
  png_read_info(png, info);
  png_uint_32 w = 0, h = 0;
  int depth = 0, ctype = 0;
  png_get_IHDR(png, info, &w, &h, &depth, &ctype, nullptr, nullptr, nullptr);
  if(!sizeOk("PNG", w, h, job.why)) return false;
  // DEFLATE expands at most 1032:1, and each row is a filter byte and its
  // samples: a header that promises more than the file can hold is short
  // data, not an allocation to make.
  const uint64_t rawRow = (uint64_t(w) * png_get_channels(png, info) * unsigned(depth) + 7) / 8 + 1;
  if(h > (job.src.d->size() + 1) * 1032 / rawRow) {
    job.why = "PNG image data shorter than the image (" + std::to_string(w) + " x " + std::to_string(h) + " pixels)";
    return false;
  }
  const bool isGray16 = ctype == PNG_COLOR_TYPE_GRAY && depth == 16;
  if(ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if(ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if(depth == 16 && !isGray16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  if(!isGray16 && (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA)) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t rowBytes = png_get_rowbytes(png, info);
  if(rowBytes != size_t(w) * (isGray16 ? 2 : 3)) {
    job.why = "PNG colour type " + std::to_string(ctype) + " with bit depth " + std::to_string(depth);
    return false;
  }
  if(!allocate("PNG", w, h, job.img, job.why)) return false;
  uint8_t* out = job.img.rgb.data();
  if(isGray16) {
    job.gray16.resize(size_t(w) * h * 2);
    out = job.gray16.data();
  }
  job.rows.resize(h);
  for(png_uint_32 y = 0; y < h; ++y) job.rows[y] = out + y * rowBytes;
  png_read_image(png, job.rows.data());
  if(isGray16)
    for(size_t k = 0; k < size_t(w) * h; ++k) {
      int v = job.gray16[2 * k] << 8 | job.gray16[2 * k + 1];
      std::fill_n(&job.img.rgb[3 * k], 3, static_cast<uint8_t>(std::min(v, 255)));
    }
  return true;
}

// readPng, where a libpng error comes back (false, src.msg set). Nothing
// else in this frame, so that nothing is live across the longjmp.
bool readPngGuarded(PngJob& job, bool& libpngFailed) {
  if(setjmp(png_jmpbuf(job.r.png))) {
    libpngFailed = true;
    return false;
  }
  return readPng(job);
}

bool decodePng(const Bytes& d, Image& img, std::string& why) {
  PngJob job(d, img);
  job.r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job.src, pngError, pngWarning);
  if(job.r.png) job.r.info = png_create_info_struct(job.r.png);
  if(!job.r.info) {
    why = "PNG: libpng cannot start";
    return false;
  }
  bool libpngFailed = false;
  if(readPngGuarded(job, libpngFailed)) return true;
  why = !libpngFailed         ? job.why
        : job.src.truncated ? "truncated PNG file"
                            : "corrupt PNG file (libpng: " + job.src.msg + ")";
  return false;
}
#endif

#ifdef ONYX_HAVE_JPEG
// ---- JPEG (libjpeg-turbo)

// Each progressive scan passes over the whole image: a small file of many
// scans could take very long (djpeg has -maxscans for the same reason).
constexpr int kMaxJpegScans = 1000;

struct JpegErrors {
  jpeg_error_mgr pub;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  bool truncated = false, tooManyScans = false;
  char msg[JMSG_LENGTH_MAX] = {};
};

void jpegErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  c->err->format_message(c, e->msg);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) about corrupt data are ignored, as PIL does, but the
// end of the data (libjpeg would go on with a fake EOI, gray) is an error.
void jpegMessage(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  if(level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
    e->truncated = true;
    std::longjmp(e->jump, 1);
  }
}

void jpegProgress(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  if(c->is_decompressor && reinterpret_cast<j_decompress_ptr>(c)->input_scan_number > kMaxJpegScans) {
    e->tooManyScans = true;
    std::longjmp(e->jump, 1);
  }
}

struct JpegReader {
  jpeg_decompress_struct cinfo;
  bool created = false;
  ~JpegReader() {
    if(created) jpeg_destroy_decompress(&cinfo);
  }
};

// What a JPEG decode holds, outside the frames a libjpeg error longjmps out
// of.
struct JpegJob {
  JpegJob(const Bytes& bytes, Image& image) : d(bytes), img(image) {}
  const Bytes& d;
  Image& img;
  JpegErrors err;
  JpegReader r;
  Bytes cmykRow;
  std::string why;  // a refusal of ours
};

// The libjpeg calls, header to last row. PIL's settings are libjpeg's
// defaults (JDCT_ISLOW, fancy upsampling). CMYK and YCCK come out as
// libjpeg's CMYK, inverted as Adobe writes it (PIL's "CMYK;I"), then
// converted as PIL's CMYK -> RGB does.
bool readJpeg(JpegJob& job) {
  jpeg_decompress_struct& cinfo = job.r.cinfo;
  jpeg_create_decompress(&cinfo);
  job.r.created = true;
  cinfo.progress = &job.err.progress;
  jpeg_mem_src(&cinfo, job.d.data(), static_cast<unsigned long>(job.d.size()));
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if(!allocate("JPEG", w, h, job.img, job.why)) return false;
  jpeg_start_decompress(&cinfo);
  if(cmyk) job.cmykRow.resize(size_t(w) * 4);
  while(cinfo.output_scanline < cinfo.output_height) {
    uint8_t* rgb = &job.img.rgb[size_t(cinfo.output_scanline) * size_t(w) * 3];
    JSAMPROW row = cmyk ? job.cmykRow.data() : rgb;
    jpeg_read_scanlines(&cinfo, &row, 1);
    for(int64_t x = 0; cmyk && x < w; ++x) {
      const uint8_t* p = &job.cmykRow[size_t(x) * 4];
      const int nk = p[3];  // 255 - k, k = 255 - p[3]
      for(int c = 0; c < 3; ++c) {
        const int t = (255 - p[c]) * nk + 128;  // PIL's MULDIV255(c, 255 - k)
        rgb[x * 3 + c] = static_cast<uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
      }
    }
  }
  return true;
}

// readJpeg, where a libjpeg error comes back. Nothing else in this frame.
bool readJpegGuarded(JpegJob& job, bool& libjpegFailed) {
  if(setjmp(job.err.jump)) {
    libjpegFailed = true;
    return false;
  }
  return readJpeg(job);
}

bool decodeJpeg(const Bytes& d, Image& img, std::string& why) {
  JpegJob job(d, img);
  job.r.cinfo.err = jpeg_std_error(&job.err.pub);
  job.err.pub.error_exit = jpegErrorExit;
  job.err.pub.emit_message = jpegMessage;
  job.err.pub.output_message = [](j_common_ptr) {};
  job.err.progress.progress_monitor = jpegProgress;
  bool libjpegFailed = false;
  if(readJpegGuarded(job, libjpegFailed)) return true;
  const JpegErrors& e = job.err;
  why = !libjpegFailed     ? job.why
        : e.truncated    ? std::string("truncated JPEG file")
        : e.tooManyScans ? "JPEG file of more than " + std::to_string(kMaxJpegScans) + " scans"
                         : std::string("corrupt JPEG file (libjpeg: ") + e.msg + ")";
  return false;
}
#endif

#if defined(ONYX_HAVE_TIFF) || defined(ONYX_HAVE_OPENJP2)
// A read position in a file's bytes, for the stream callbacks of libtiff
// and OpenJPEG, and the first error message the library reports.
struct ByteSource {
  explicit ByteSource(const Bytes& bytes) : d(&bytes) {}
  const Bytes* d;
  uint64_t pos = 0;  // may lie past the end (a seek there is legal)
  std::string msg;
  uint64_t left() const { return d->size() - std::min<uint64_t>(pos, d->size()); }
  // Copies up to n bytes from pos into buf and moves past them: the count.
  uint64_t read(void* buf, uint64_t n) {
    const uint64_t got = std::min(n, left());
    if(got) std::memcpy(buf, d->data() + pos, got);
    pos += got;
    return got;
  }
};
#endif

#ifdef ONYX_HAVE_TIFF
// ---- TIFF (libtiff)

using TiffSource = ByteSource;

tmsize_t tiffRead(thandle_t h, void* buf, tmsize_t n) {
  return static_cast<tmsize_t>(static_cast<TiffSource*>(h)->read(buf, static_cast<uint64_t>(std::max<tmsize_t>(n, 0))));
}

tmsize_t tiffWrite(thandle_t, void*, tmsize_t) { return -1; }

toff_t tiffSeek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  uint64_t base = whence == SEEK_CUR ? s->pos : whence == SEEK_END ? s->d->size() : 0;
  s->pos = base + off;  // toff_t is unsigned: a negative offset wraps, as it should
  return s->pos;
}

int tiffClose(thandle_t) { return 0; }
toff_t tiffSize(thandle_t h) { return static_cast<TiffSource*>(h)->d->size(); }
int tiffMap(thandle_t, tdata_t*, toff_t*) { return 0; }
void tiffUnmap(thandle_t, tdata_t, toff_t) {}

// The first error is kept for the message; warnings are dropped. 1: handled
// (libtiff's global handlers, which print to stderr, are not called).
int tiffError(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSource*>(user);
  if(s->msg.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    s->msg = std::string(module ? module : "") + (module ? ": " : "") + buf;
  }
  return 1;
}

int tiffWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

// The first image of the file through libtiff's RGBA interface (every
// photometric, bit depth and compression it knows). Its rows come as stored
// (the orientation asked for is the file's own), then the Orientation tag is
// applied as PIL applies it, transposes (5 to 8) included.
bool decodeTiff(const Bytes& d, Image& img, std::string& why) {
  TiffSource src(d);
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if(!opts) {
    why = "TIFF: libtiff cannot start";
    return false;
  }
  TIFFOpenOptionsSetErrorHandlerExtR(opts, tiffError, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, tiffWarning, &src);
  TIFF* tif = TIFFClientOpenExt("TIFF", "rm", &src, tiffRead, tiffWrite, tiffSeek, tiffClose, tiffSize, tiffMap,
                                tiffUnmap, opts);
  TIFFOpenOptionsFree(opts);
  auto fail = [&](const std::string& what) {
    why = what + (src.msg.empty() ? "" : " (libtiff: " + src.msg + ")");
    return false;
  };
  if(!tif) return fail("corrupt or truncated TIFF file");
  struct Closer {
    TIFF* t;
    ~Closer() { TIFFClose(t); }
  } closer{tif};
  uint32_t w = 0, h = 0;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orientation);
  if(orientation < ORIENTATION_TOPLEFT || orientation > ORIENTATION_LEFTBOT) orientation = ORIENTATION_TOPLEFT;
  char emsg[1024] = {};
  if(!TIFFRGBAImageOK(tif, emsg)) return fail(std::string("TIFF image libtiff cannot read as RGB: ") + emsg);
  const bool transposed = orientation >= ORIENTATION_LEFTTOP;
  if(!allocate("TIFF", transposed ? h : w, transposed ? w : h, img, why)) return false;
  std::vector<uint32_t> raster;
  try {
    raster.resize(size_t(w) * h);
  } catch(const std::bad_alloc&) {
    return fail("TIFF image of " + std::to_string(w) + " x " + std::to_string(h) + " pixels: out of memory");
  }
  if(!TIFFReadRGBAImageOriented(tif, w, h, raster.data(), orientation, 1))
    return fail("corrupt or truncated TIFF file");
  // Output pixel (i, j) is stored pixel (y, x).
  for(uint32_t i = 0; i < uint32_t(img.h); ++i) {
    for(uint32_t j = 0; j < uint32_t(img.w); ++j) {
      uint32_t y = i, x = j;
      switch(orientation) {
        case ORIENTATION_TOPRIGHT: x = w - 1 - j; break;
        case ORIENTATION_BOTRIGHT: y = h - 1 - i; x = w - 1 - j; break;
        case ORIENTATION_BOTLEFT: y = h - 1 - i; break;
        case ORIENTATION_LEFTTOP: y = j; x = i; break;
        case ORIENTATION_RIGHTTOP: y = h - 1 - j; x = i; break;
        case ORIENTATION_RIGHTBOT: y = h - 1 - j; x = w - 1 - i; break;
        case ORIENTATION_LEFTBOT: y = j; x = w - 1 - i; break;
        default: break;
      }
      const uint32_t p = raster[size_t(y) * w + x];
      uint8_t* o = &img.rgb[(size_t(i) * size_t(img.w) + j) * 3];
      o[0] = static_cast<uint8_t>(TIFFGetR(p));
      o[1] = static_cast<uint8_t>(TIFFGetG(p));
      o[2] = static_cast<uint8_t>(TIFFGetB(p));
    }
  }
  return true;
}
#endif

#ifdef ONYX_HAVE_WEBP
// ---- WebP (libwebp)

std::string webpStatus(VP8StatusCode st) {
  switch(st) {
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated WebP file";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "WebP file with a feature libwebp does not decode";
    case VP8_STATUS_OUT_OF_MEMORY: return "WebP image: out of memory";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt WebP file (libwebp: bitstream error)";
    default: return "corrupt WebP file (libwebp status " + std::to_string(int(st)) + ")";
  }
}

// Still images, lossy or lossless, alpha dropped; an animation's first
// frame (what PIL gives) would need libwebpdemux, and is an error.
bool decodeWebp(const Bytes& d, Image& img, std::string& why) {
  WebPDecoderConfig config;
  if(!WebPInitDecoderConfig(&config)) {
    why = "WebP: libwebp cannot start (version mismatch)";
    return false;
  }
  VP8StatusCode st = WebPGetFeatures(d.data(), d.size(), &config.input);
  if(st != VP8_STATUS_OK) {
    why = webpStatus(st);
    return false;
  }
  if(config.input.has_animation) {
    why = "animated WebP images (only still ones are decoded)";
    return false;
  }
  if(!allocate("WebP", config.input.width, config.input.height, img, why)) return false;
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = img.rgb.data();
  config.output.u.RGBA.stride = static_cast<int>(img.w * 3);
  config.output.u.RGBA.size = img.rgb.size();
  st = WebPDecode(d.data(), d.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if(st != VP8_STATUS_OK) {
    why = webpStatus(st);
    return false;
  }
  return true;
}
#endif

#ifdef ONYX_HAVE_OPENJP2
// ---- JPEG 2000 (OpenJPEG)

using J2kSource = ByteSource;

// OpenJPEG wants (OPJ_SIZE_T)-1 at the end of the stream.
OPJ_SIZE_T j2kRead(void* buf, OPJ_SIZE_T n, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if(s->left() == 0) return static_cast<OPJ_SIZE_T>(-1);
  return static_cast<OPJ_SIZE_T>(s->read(buf, n));
}

OPJ_OFF_T j2kSkip(OPJ_OFF_T n, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  const int64_t to = std::clamp<int64_t>(static_cast<int64_t>(s->pos) + n, 0, static_cast<int64_t>(s->d->size()));
  const OPJ_OFF_T moved = to - static_cast<int64_t>(s->pos);
  s->pos = static_cast<uint64_t>(to);
  return moved;
}

OPJ_BOOL j2kSeek(OPJ_OFF_T to, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if(to < 0 || static_cast<uint64_t>(to) > s->d->size()) return OPJ_FALSE;
  s->pos = static_cast<uint64_t>(to);
  return OPJ_TRUE;
}

void j2kError(const char* msg, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if(!s->msg.empty()) return;
  s->msg = msg;
  while(!s->msg.empty() && std::isspace(static_cast<unsigned char>(s->msg.back()))) s->msg.pop_back();
}

void j2kQuiet(const char*, void*) {}

struct J2kReader {
  opj_stream_t* stream = nullptr;
  opj_codec_t* codec = nullptr;
  opj_image_t* image = nullptr;
  ~J2kReader() {
    if(image) opj_image_destroy(image);
    if(codec) opj_destroy_codec(codec);
    if(stream) opj_stream_destroy(stream);
  }
};

// A JP2 file or a bare J2K codestream, in strict mode (a truncated
// codestream is an error, not a partial image). 1 (gray), 2 (gray, alpha),
// 3 (RGB) or 4 (RGBA) components of the image's full size; each sample
// offset to unsigned and shifted to 8 bits, as PIL does, but a single
// component of more than 8 bits, which PIL opens as I;16 (shifted to 16
// bits) and clips at 255 in its conversion to RGB.
bool decodeJpeg2000(const Bytes& d, bool jp2, Image& img, std::string& why) {
  J2kSource src(d);
  J2kReader r;
  auto fail = [&](const std::string& what) {
    why = what + (src.msg.empty() ? "" : " (OpenJPEG: " + src.msg + ")");
    return false;
  };
  r.stream = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  r.codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if(!r.stream || !r.codec) return fail("JPEG 2000: OpenJPEG cannot start");
  opj_stream_set_user_data(r.stream, &src, nullptr);
  opj_stream_set_user_data_length(r.stream, d.size());
  opj_stream_set_read_function(r.stream, j2kRead);
  opj_stream_set_skip_function(r.stream, j2kSkip);
  opj_stream_set_seek_function(r.stream, j2kSeek);
  opj_set_error_handler(r.codec, j2kError, &src);
  opj_set_warning_handler(r.codec, j2kQuiet, nullptr);
  opj_set_info_handler(r.codec, j2kQuiet, nullptr);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  if(!opj_setup_decoder(r.codec, &params) || !opj_decoder_set_strict_mode(r.codec, OPJ_TRUE))
    return fail("JPEG 2000: OpenJPEG cannot start");
  if(!opj_read_header(r.stream, r.codec, &r.image)) return fail("corrupt or truncated JPEG 2000 file");
  const opj_image_t& im = *r.image;
  const int64_t w = int64_t(im.x1) - im.x0, h = int64_t(im.y1) - im.y0;
  auto componentsOk = [&] {
    if(im.numcomps < 1 || im.numcomps > 4) return false;
    for(OPJ_UINT32 c = 0; c < im.numcomps; ++c)
      if(im.comps[c].dx != 1 || im.comps[c].dy != 1 || im.comps[c].prec < 1 || im.comps[c].prec > 16) return false;
    return true;
  };
  if(!componentsOk()) {
    return fail("JPEG 2000 image of " + std::to_string(im.numcomps) +
                " components (decoded: 1 to 4 components of 1 to 16 bits, none subsampled)");
  }
  if(!allocate("JPEG 2000", w, h, img, why)) return false;
  if(!opj_decode(r.codec, r.stream, r.image) || !opj_end_decompress(r.codec, r.stream))
    return fail("corrupt or truncated JPEG 2000 file");
  // A JP2 palette or channel definitions change the components: check again.
  if(!componentsOk())
    return fail("JPEG 2000 image of " + std::to_string(im.numcomps) + " components after its palette");
  if(im.color_space == OPJ_CLRSPC_SYCC || im.color_space == OPJ_CLRSPC_EYCC || im.color_space == OPJ_CLRSPC_CMYK)
    return fail("JPEG 2000 image in the YCC or CMYK colour space (decoded: sRGB and gray)");
  for(OPJ_UINT32 c = 0; c < im.numcomps; ++c)
    if(!im.comps[c].data || int64_t(im.comps[c].w) != w || int64_t(im.comps[c].h) != h)
      return fail("corrupt JPEG 2000 file (a component does not cover the image)");
  const int colours = im.numcomps >= 3 ? 3 : 1;
  for(int c = 0; c < colours; ++c) {
    const opj_image_comp_t& comp = im.comps[c];
    const int prec = static_cast<int>(comp.prec);
    const int64_t offset = comp.sgnd ? int64_t(1) << (prec - 1) : 0;
    const bool i16 = im.numcomps == 1 && prec > 8;
    for(int64_t k = 0; k < w * h; ++k) {
      int64_t v = std::clamp<int64_t>(comp.data[k] + offset, 0, (int64_t(1) << prec) - 1);
      v = i16 ? std::min<int64_t>(v << (16 - prec), 255) : prec >= 8 ? v >> (prec - 8) : v << (8 - prec);
      const auto b = static_cast<uint8_t>(v);
      if(colours == 3) img.rgb[size_t(k * 3 + c)] = b;
      else std::fill_n(&img.rgb[size_t(k * 3)], 3, b);
    }
  }
  return true;
}
#endif

// The formats, in the order of imageFormats().
enum class Format { bmp, pnm, png, jpeg, tiff, webp, jpeg2000, unknown };

const char* formatName(Format f) {
  static const char* names[] = {"BMP", "PNM", "PNG", "JPEG", "TIFF", "WebP", "JPEG 2000", "unrecognised"};
  return names[static_cast<int>(f)];
}

bool built(Format f) {
  switch(f) {
    case Format::bmp: case Format::pnm: return true;
#ifdef ONYX_HAVE_PNG
    case Format::png: return true;
#endif
#ifdef ONYX_HAVE_JPEG
    case Format::jpeg: return true;
#endif
#ifdef ONYX_HAVE_TIFF
    case Format::tiff: return true;
#endif
#ifdef ONYX_HAVE_WEBP
    case Format::webp: return true;
#endif
#ifdef ONYX_HAVE_OPENJP2
    case Format::jpeg2000: return true;
#endif
    default: return false;
  }
}

}  // namespace

std::vector<std::string> imageFormats() {
  std::vector<std::string> names;
  for(int f = 0; f < static_cast<int>(Format::unknown); ++f)
    if(built(static_cast<Format>(f))) names.push_back(formatName(static_cast<Format>(f)));
  return names;
}

bool decodeImage(const Bytes& d, Image& img, std::string& why) {
  auto starts = [&](std::initializer_list<uint8_t> magic, size_t at = 0) {
    return d.size() >= at + magic.size() &&
           std::equal(magic.begin(), magic.end(), d.begin() + static_cast<std::ptrdiff_t>(at));
  };
  const bool jp2 = starts({0, 0, 0, 0x0c, 'j', 'P', ' ', ' ', 0x0d, 0x0a, 0x87, 0x0a});
  const Format f = starts({'B', 'M'}) ? Format::bmp
                 : d.size() >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7' ? Format::pnm
                 : starts({0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a}) ? Format::png
                 : starts({0xff, 0xd8, 0xff}) ? Format::jpeg
                 : starts({'I', 'I', 42, 0}) || starts({'M', 'M', 0, 42}) ? Format::tiff
                 : starts({'R', 'I', 'F', 'F'}) && starts({'W', 'E', 'B', 'P'}, 8) ? Format::webp
                 : jp2 || starts({0xff, 0x4f, 0xff, 0x51}) ? Format::jpeg2000
                 : Format::unknown;
  img = Image();
  switch(built(f) ? f : Format::unknown) {
    case Format::bmp: return decodeBmp(d, img, why);
    case Format::pnm: return decodePnm(d, img, why);
#ifdef ONYX_HAVE_PNG
    case Format::png: return decodePng(d, img, why);
#endif
#ifdef ONYX_HAVE_JPEG
    case Format::jpeg: return decodeJpeg(d, img, why);
#endif
#ifdef ONYX_HAVE_TIFF
    case Format::tiff: return decodeTiff(d, img, why);
#endif
#ifdef ONYX_HAVE_WEBP
    case Format::webp: return decodeWebp(d, img, why);
#endif
#ifdef ONYX_HAVE_OPENJP2
    case Format::jpeg2000: return decodeJpeg2000(d, jp2, img, why);
#endif
    default: break;
  }
  std::string list;
  for(const std::string& name : imageFormats()) list += (list.empty() ? "" : ", ") + name;
  why = f == Format::unknown ? "an image of an unrecognised format (this build decodes " + list + ")"
                             : std::string(formatName(f)) + " images (this build decodes " + list + ")";
  return false;
}

}  // namespace io
}  // namespace onyx
