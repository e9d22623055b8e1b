#include <onyx/io/npz.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

namespace onyx {
namespace io {

namespace {

const char* npyDescr(Type t) {
  switch(t) {
    case Type::float32: return "<f4";
    case Type::float64: return "<f8";
    case Type::float16: return "<f2";
    case Type::int8: return "|i1";
    case Type::int16: return "<i2";
    case Type::int32: return "<i4";
    case Type::int64: return "<i8";
    case Type::uint8: return "|u1";
    case Type::uint16: return "<u2";
    case Type::uint32: return "<u4";
    case Type::uint64: return "<u8";
    case Type::boolean: return "|b1";
    case Type::bfloat16: return "<V2";  // numpy has no bfloat16; raw 2-byte records
    default: return nullptr;
  }
}

Type typeFromDescr(const std::string& d, const std::string& where) {
  static const std::pair<const char*, Type> table[] = {
      {"f4", Type::float32}, {"f8", Type::float64}, {"f2", Type::float16}, {"i1", Type::int8},
      {"i2", Type::int16},   {"i4", Type::int32},   {"i8", Type::int64},   {"u1", Type::uint8},
      {"u2", Type::uint16},  {"u4", Type::uint32},  {"u8", Type::uint64},  {"b1", Type::boolean},
      {"V2", Type::bfloat16}};
  ONYX_CHECK(d.size() == 3, where, ": unsupported npy dtype '", d, "'");
  ONYX_CHECK(d[0] != '>', where, ": big-endian npy dtype '", d, "' is not supported");
  for(auto& e : table)
    if(d.substr(1) == e.first) return e.second;
  fail(where, ": unsupported npy dtype '", d, "'");
}

void put16(std::string& s, uint32_t v) { s += char(v & 0xff); s += char((v >> 8) & 0xff); }
void put32(std::string& s, uint32_t v) { put16(s, v & 0xffff); put16(s, v >> 16); }
uint32_t get16(const std::string& s, size_t o) { return uint8_t(s[o]) | (uint32_t(uint8_t(s[o + 1])) << 8); }
uint32_t get32(const std::string& s, size_t o) { return get16(s, o) | (get16(s, o + 2) << 16); }

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ONYX_CHECK(f, path, ": cannot open file for reading");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

// Strings as numpy's fixed-width unicode ('<U<n>': n UTF-32LE code points
// per element, NUL-padded). UTF-8 in, UTF-8 out; a byte that is not valid
// UTF-8 travels as U+DC80 + byte (Python's surrogateescape), so nothing is lost.
std::vector<uint32_t> utf8ToCodePoints(const std::string& s) {
  std::vector<uint32_t> cps;
  for(size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for(int k = 1; ok && k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (cc >> 6) == 2;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if(ok && len > 1) ok = cp >= (len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u) && cp <= 0x10ffff &&
                           !(cp >= 0xd800 && cp <= 0xdfff);
    if(!ok) {
      cps.push_back(0xdc00u + c);
      ++i;
    } else {
      cps.push_back(cp);
      i += static_cast<size_t>(len);
    }
  }
  return cps;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if(cp >= 0xdc80 && cp <= 0xdcff) out += static_cast<char>(cp - 0xdc00);  // an escaped byte
  else if(cp < 0x80) out += static_cast<char>(cp);
  else if(cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if(cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string npyBytes(const TensorBase& t) {
  std::string unicode;
  std::vector<std::vector<uint32_t>> cps;
  size_t width = 1;
  if(t.type() == Type::string) {
    for(const auto& e : const_cast<TensorBase&>(t).strings()) {
      cps.push_back(utf8ToCodePoints(e));
      width = std::max(width, cps.back().size());
    }
    unicode = "<U" + std::to_string(width);
  }
  const char* descr = t.type() == Type::string ? unicode.c_str() : npyDescr(t.type());
  ONYX_CHECK(descr, "cannot store a tensor of type ", t.type(), " in .npy");
  std::string shape = "(";
  for(auto d : t.shape().dims()) shape += std::to_string(d) + ",";
  if(t.shape().rank() > 1) shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic(6) + version(2) + len(2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put16(out, static_cast<uint32_t>(header.size()));
  out += header;
  if(t.type() == Type::string) {
    for(const auto& e : cps)
      for(size_t k = 0; k < width; ++k) put32(out, k < e.size() ? e[k] : 0);
    return out;
  }
  // A tensor on a GPU (params, optimizer state) is read through a host copy.
  Tensor host = t.onHost() ? Tensor() : t.hostCopy();
  const TensorBase& h = host ? *host : t;
  out.append(static_cast<const char*>(h.raw()), h.bytes());
  return out;
}

Tensor parseNpy(const std::string& b, const std::string& where) {
  ONYX_CHECK(b.size() >= 10 && b.compare(0, 6, "\x93NUMPY") == 0, where, ": not a .npy array (bad magic)");
  int major = uint8_t(b[6]);
  size_t hlen, hoff;
  if(major == 1) { hlen = get16(b, 8); hoff = 10; }
  else { ONYX_CHECK(b.size() >= 12, where, ": truncated .npy header"); hlen = get32(b, 8); hoff = 12; }
  ONYX_CHECK(hoff + hlen <= b.size(), where, ": truncated .npy header");
  std::string h = b.substr(hoff, hlen);
  auto field = [&](const std::string& key) {
    auto p = h.find("'" + key + "'");
    ONYX_CHECK(p != std::string::npos, where, ": .npy header lacks '", key, "'");
    p = h.find(':', p);
    ONYX_CHECK(p != std::string::npos, where, ": malformed .npy header");
    return p + 1;
  };
  size_t p = h.find('\'', field("descr"));
  ONYX_CHECK(p != std::string::npos, where, ": malformed .npy descr");
  std::string descr = h.substr(p + 1, h.find('\'', p + 1) - p - 1);
  size_t width = 0;
  const bool unicode = descr.size() > 2 && descr.compare(0, 2, "<U") == 0;
  if(unicode) {
    try {
      size_t used = 0;
      width = std::stoul(descr.substr(2), &used);
      ONYX_CHECK(used == descr.size() - 2 && width > 0 && width < (size_t(1) << 24), where,
                 ": unsupported npy dtype '", descr, "'");
    } catch(const std::logic_error&) {
      fail(where, ": unsupported npy dtype '", descr, "'");
    }
  }
  Type type = unicode ? Type::string : typeFromDescr(descr, where);
  size_t fo = field("fortran_order");
  ONYX_CHECK(h.compare(h.find_first_not_of(' ', fo), 5, "False") == 0, where,
             ": Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  size_t s0 = h.find('(', field("shape")), s1 = h.find(')', s0);
  ONYX_CHECK(s0 != std::string::npos && s1 != std::string::npos, where, ": malformed .npy shape");
  std::vector<int64_t> dims;
  std::stringstream ss(h.substr(s0 + 1, s1 - s0 - 1));
  std::string tok;
  while(std::getline(ss, tok, ',')) {
    if(tok.find_first_not_of(' ') == std::string::npos) continue;
    try {
      dims.push_back(std::stoll(tok));
    } catch(...) {
      fail(where, ": malformed .npy shape '", h.substr(s0, s1 - s0 + 1), "'");
    }
  }
  // The data's size against the header's shape, in checked arithmetic and
  // before anything is allocated or a Shape made (a header may claim any shape).
  std::string shapeText;
  for(size_t i = 0; i < dims.size(); ++i) shapeText += (i ? "x" : "") + std::to_string(dims[i]);
  if(dims.empty()) shapeText = "scalar";
  const size_t have = b.size() - hoff - hlen;
  size_t n = 1, need = 0;
  bool overflow = false;
  for(int64_t d : dims) {
    ONYX_CHECK(d >= 0, where, ": negative dim in .npy shape ", shapeText);
    overflow |= __builtin_mul_overflow(n, static_cast<size_t>(d), &n);
  }
  const size_t elemBytes = unicode ? width * 4 : static_cast<size_t>(typeBits(type) / 8);
  overflow |= __builtin_mul_overflow(n, elemBytes, &need);
  ONYX_CHECK(!overflow && need == have, where, ": .npy data has ", have, " bytes but shape ", shapeText, " of ", descr,
             overflow ? " needs more than fits in memory" : str(" needs ", need));
  Tensor t = TensorBase::create(Shape(dims), type);
  if(unicode) {
    size_t o = hoff + hlen;
    for(size_t i = 0; i < n; ++i) {
      std::string& e = t->strings()[i];
      for(size_t k = 0; k < width; ++k, o += 4) {
        uint32_t cp = get32(b, o);
        ONYX_CHECK(cp <= 0x10ffff, where, ": element ", i, " holds code point ", cp, ", beyond Unicode");
        if(cp) appendUtf8(e, cp);
      }
    }
    return t;
  }
  std::memcpy(t->raw(), b.data() + hoff + hlen, t->bytes());
  return t;
}

bool npyStorable(Type t) { return t == Type::string || npyDescr(t) != nullptr; }

std::vector<std::string> removeStaleTemporaries(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  for(const auto& e : fs::directory_iterator(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec)) {
    const std::string n = e.path().filename().string();
    if(n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = n.substr(prefix.size());
    if(digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if(pid == ::getpid() || (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH))) continue;
    std::error_code rm;
    if(fs::remove(e.path(), rm)) removed.push_back(e.path().string());
  }
  return removed;
}

void writeFileAtomic(const std::string& path, const std::string& data) {
  removeStaleTemporaries(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // POSIX calls, so the bytes reach the disk (fsync) before the rename makes
  // them the file: a crash after the rename cannot leave an empty or
  // partial file under the final name.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ONYX_CHECK(fd >= 0, path, ": cannot open '", tmp, "' for writing: ", std::strerror(errno));
  const char* p = data.data();
  size_t left = data.size();
  bool ok = true;
  while(left > 0 && ok) {
    ssize_t w = ::write(fd, p, left);
    if(w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if(ok) {
      p += w;
      left -= static_cast<size_t>(w);
    }
  }
  ok = ok && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if(!ok) {
    std::remove(tmp.c_str());
    fail(path, ": write failed (disk full?)");
  }
  if(std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, ": cannot rename temporary file into place");
  }
  // And the rename itself: the folder's entry.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if(dfd >= 0) {
    ::fsync(dfd);  // best effort: some filesystems refuse it on folders
    ::close(dfd);
  }
}

void saveNpz(const std::string& path, const NamedTensors& items) {
  std::vector<std::pair<std::string, std::string>> members;
  for(auto& it : items) members.emplace_back(it.first + ".npy", npyBytes(*it.second));
  saveZip(path, members);
}

void saveZip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members) {
  std::string zip, central;
  uint32_t count = 0;
  for(auto& it : members) {
    const std::string& name = it.first;
    const std::string& data = it.second;
    ONYX_CHECK(data.size() < 0xffffffffu && zip.size() < 0xffffffffu, path,
               ": more than 4 GB; zip64 is not supported for writing");
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    uint32_t offset = static_cast<uint32_t>(zip.size());
    // Local file header (stored, no compression).
    put32(zip, 0x04034b50); put16(zip, 20); put16(zip, 0); put16(zip, 0); put16(zip, 0); put16(zip, 0x21);
    put32(zip, crc); put32(zip, static_cast<uint32_t>(data.size())); put32(zip, static_cast<uint32_t>(data.size()));
    put16(zip, static_cast<uint32_t>(name.size())); put16(zip, 0);
    zip += name;
    zip += data;
    put32(central, 0x02014b50); put16(central, 20); put16(central, 20); put16(central, 0); put16(central, 0);
    put16(central, 0); put16(central, 0x21); put32(central, crc); put32(central, static_cast<uint32_t>(data.size()));
    put32(central, static_cast<uint32_t>(data.size())); put16(central, static_cast<uint32_t>(name.size()));
    put16(central, 0); put16(central, 0); put16(central, 0); put16(central, 0); put32(central, 0); put32(central, offset);
    central += name;
    ++count;
  }
  uint32_t cdOffset = static_cast<uint32_t>(zip.size());
  zip += central;
  put32(zip, 0x06054b50); put16(zip, 0); put16(zip, 0); put16(zip, count); put16(zip, count);
  put32(zip, static_cast<uint32_t>(central.size())); put32(zip, cdOffset); put16(zip, 0);
  writeFileAtomic(path, zip);
}

NamedTensors loadNpz(const std::string& path) {
  NamedTensors out;
  for(auto& m : loadZip(path)) {
    std::string name = m.first;
    if(name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out.emplace_back(name, parseNpy(m.second, path + ":" + m.first));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> loadZip(const std::string& path) {
  std::string z = readFile(path);
  // Find the end-of-central-directory record from the back.
  ONYX_CHECK(z.size() >= 22, path, ": not an .npz file (too short)");
  size_t eocd = std::string::npos;
  for(size_t i = z.size() - 22 + 1; i-- > 0 && z.size() - i <= 22 + 65535;)
    if(get32(z, i) == 0x06054b50) { eocd = i; break; }
  ONYX_CHECK(eocd != std::string::npos, path, ": not an .npz file (no zip directory; truncated?)");
  uint32_t n = get16(z, eocd + 10);
  size_t cd = get32(z, eocd + 16);
  std::vector<std::pair<std::string, std::string>> out;
  for(uint32_t k = 0; k < n; ++k) {
    ONYX_CHECK(cd + 46 <= z.size() && get32(z, cd) == 0x02014b50, path, ": corrupt zip directory entry ", k);
    uint32_t method = get16(z, cd + 10);
    uint32_t crc = get32(z, cd + 16);
    size_t csize = get32(z, cd + 20), usize = get32(z, cd + 24);
    size_t nlen = get16(z, cd + 28), elen = get16(z, cd + 30), clen = get16(z, cd + 32);
    size_t local = get32(z, cd + 42);
    ONYX_CHECK(cd + 46 + nlen <= z.size(), path, ": corrupt zip directory entry ", k);
    std::string name = z.substr(cd + 46, nlen);
    cd += 46 + nlen + elen + clen;
    ONYX_CHECK(csize != 0xffffffffu && usize != 0xffffffffu, path, ": member '", name, "' uses zip64 (not supported)");
    ONYX_CHECK(local + 30 <= z.size() && get32(z, local) == 0x04034b50, path, ": corrupt local header of '", name, "'");
    size_t data = local + 30 + get16(z, local + 26) + get16(z, local + 28);
    ONYX_CHECK(data + csize <= z.size(), path, ": member '", name, "' is truncated");
    std::string bytes;
    if(method == 0) {
      ONYX_CHECK(csize == usize, path, ": member '", name, "' is stored with ", csize, " bytes but claims ", usize,
                 " (corrupt)");
      bytes = z.substr(data, csize);
    } else if(method == 8) {
      // Deflate expands at most 1032:1: a larger claim is a lie, and is
      // refused before the buffer it asks for is allocated.
      ONYX_CHECK(usize <= csize * 1032 + 64, path, ": member '", name, "' claims ", usize, " bytes from ", csize,
                 " compressed bytes, more than deflate can produce (corrupt)");
      bytes.resize(usize);
      z_stream s{};
      ONYX_CHECK(inflateInit2(&s, -MAX_WBITS) == Z_OK, path, ": zlib init failed");
      s.next_in = reinterpret_cast<Bytef*>(&z[data]);
      s.avail_in = static_cast<uInt>(csize);
      s.next_out = reinterpret_cast<Bytef*>(&bytes[0]);
      s.avail_out = static_cast<uInt>(usize);
      int rc = inflate(&s, Z_FINISH);
      inflateEnd(&s);
      ONYX_CHECK(rc == Z_STREAM_END && s.total_out == usize, path, ": member '", name, "' does not inflate (corrupt)");
    } else {
      fail(path, ": member '", name, "' uses zip compression method ", method, " (only stored and deflate are supported)");
    }
    uint32_t got = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
    ONYX_CHECK(got == crc, path, ": member '", name, "' fails its CRC check (corrupt file)");
    out.emplace_back(name, std::move(bytes));
  }
  return out;
}

}  // namespace io
}  // namespace onyx
