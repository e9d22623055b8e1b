#include <onyx/core/types.h>

#include <onyx/core/checked.h>

#include <cmath>
#include <limits>
#include <ostream>

namespace onyx {

namespace {
const char* const kNames[kNumTypes] = {
    "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
    "bool", "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
    "float4e2m1", "float8e8m0", "uint2", "int2"};
const int kBits[kNumTypes] = {0, 32, 8, 8, 16, 16, 32, 64, 0, 8, 16, 64, 32, 64, 64, 128, 16,
                              8, 8, 8, 8, 4, 4, 4, 8, 2, 2};
bool valid(Type t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumTypes; }
}  // namespace

const char* typeName(Type t) { return valid(t) ? kNames[static_cast<int>(t)] : "invalid"; }

Type typeFromName(const std::string& name) {
  for(int i = 0; i < kNumTypes; ++i)
    if(name == kNames[i]) return static_cast<Type>(i);
  if(name == "float") return Type::float32;
  if(name == "double") return Type::float64;
  fail("unknown element type '", name, "' (expected e.g. float32, float64, int64, bool)");
}

int typeBits(Type t) { return valid(t) ? kBits[static_cast<int>(t)] : 0; }

size_t typeBytes(Type t, size_t n) {
  ONYX_CHECK(n <= static_cast<size_t>(kMaxTensorElements), typeName(t), " data of ", n,
             " elements: more than 2^56 elements (the most a tensor may have)");
  if(t == Type::string) return n * sizeof(void*);
  return (n * static_cast<size_t>(typeBits(t)) + 7) / 8;
}

bool isComputeType(Type t) {
  switch(t) {
    case Type::float32: case Type::float64: case Type::float16: case Type::bfloat16:
    case Type::int8: case Type::int16: case Type::int32: case Type::int64:
    case Type::uint8: case Type::uint16: case Type::uint32: case Type::uint64:
    case Type::boolean: return true;
    default: return false;
  }
}

std::ostream& operator<<(std::ostream& os, Type t) { return os << typeName(t); }

// ---- storage-only types

namespace {

// One small float format: field widths, bias, largest finite code (without
// the sign), and how it spells NaN / what overflow without saturation gives.
struct SmallFloat {
  int expBits, manBits, bias;
  uint8_t maxCode;  // largest finite magnitude code
  uint8_t signBit;
  bool hasInf;      // e5m2: all-ones exponent with zero mantissa
  bool uz;          // fnuz: 0x80 is the only NaN, no negative zero
  bool hasNaN;      // float4e2m1 has none
};

const SmallFloat& smallFloat(Type t) {
  static const SmallFloat e4m3fn{4, 3, 7, 0x7e, 0x80, false, false, true};
  static const SmallFloat e4m3fnuz{4, 3, 8, 0x7f, 0x80, false, true, true};
  static const SmallFloat e5m2{5, 2, 15, 0x7b, 0x80, true, false, true};
  static const SmallFloat e5m2fnuz{5, 2, 16, 0x7f, 0x80, false, true, true};
  static const SmallFloat e2m1{2, 1, 1, 0x7, 0x8, false, false, false};
  switch(t) {
    case Type::float8e4m3fn: return e4m3fn;
    case Type::float8e4m3fnuz: return e4m3fnuz;
    case Type::float8e5m2: return e5m2;
    case Type::float8e5m2fnuz: return e5m2fnuz;
    case Type::float4e2m1: return e2m1;
    default: fail("element type ", t, " is not a small float type");
  }
}

}  // namespace

E8M0Round e8m0RoundFromName(const std::string& name) {
  if(name == "up") return E8M0Round::up;
  if(name == "down") return E8M0Round::down;
  if(name == "nearest") return E8M0Round::nearest;
  fail("unknown round_mode '", name, "' (expected up, down or nearest)");
}

bool isSmallFloat(Type t) {
  switch(t) {
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz:
    case Type::float4e2m1: case Type::float8e8m0: return true;
    default: return false;
  }
}

bool isPacked(Type t) {
  switch(t) {
    case Type::int4: case Type::uint4: case Type::int2: case Type::uint2: case Type::float4e2m1: return true;
    default: return false;
  }
}

uint8_t encodeSmallFloat(Type t, double x, bool saturate) {
  const SmallFloat& f = smallFloat(t);
  bool neg = std::signbit(x);
  uint8_t sign = neg ? f.signBit : 0;
  // fnuz: 0x80; e4m3fn: S.1111.111; e5m2: S.11111.10 (the quiet NaN ONNX's reference writes).
  uint8_t nanCode = f.uz ? 0x80 : static_cast<uint8_t>(sign | (f.hasInf ? 0x7e : f.signBit - 1));
  if(!f.hasNaN) saturate = true;
  if(std::isnan(x)) {
    // float4e2m1 has no NaN; ONNX's reference (ml_dtypes) gives a zero of the opposite sign.
    if(!f.hasNaN) return neg ? 0 : f.signBit;
    return nanCode;
  }
  uint8_t overflow = saturate ? static_cast<uint8_t>(sign | f.maxCode)
                              : f.hasInf ? static_cast<uint8_t>(sign | (((1u << f.expBits) - 1u) << f.manBits))
                                         : nanCode;
  if(std::isinf(x)) return overflow;
  double a = std::fabs(x);
  int eMin = 1 - f.bias;  // exponent of the smallest normal
  unsigned code;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  --e;                // a = 1.xxx * 2^e
  if(a == 0 || e < eMin) {
    // Subnormal range: multiples of 2^(eMin - manBits); rounding up to 2^manBits
    // lands exactly on the smallest normal's code.
    code = static_cast<unsigned>(std::nearbyint(std::ldexp(a, f.manBits - eMin)));
  } else {
    double k = std::nearbyint(std::ldexp(a, f.manBits - e));  // in [2^m, 2^(m+1)]
    if(k >= std::ldexp(1.0, f.manBits + 1)) {
      k = std::ldexp(1.0, f.manBits);
      ++e;
    }
    int field = e + f.bias;
    if(field >= (1 << f.expBits)) return overflow;
    code = (static_cast<unsigned>(field) << f.manBits) | (static_cast<unsigned>(k) - (1u << f.manBits));
  }
  if(code > f.maxCode) return overflow;
  if(code == 0 && f.uz) return 0;
  return static_cast<uint8_t>(sign | code);
}

double decodeSmallFloat(Type t, uint8_t bits) {
  if(t == Type::float8e8m0) {
    if(bits == 0xff) return std::numeric_limits<double>::quiet_NaN();
    return std::ldexp(1.0, static_cast<int>(bits) - 127);
  }
  const SmallFloat& f = smallFloat(t);
  bits = static_cast<uint8_t>(bits & (2 * f.signBit - 1));
  bool neg = (bits & f.signBit) != 0;
  unsigned mag = bits & (f.signBit - 1u);
  if(f.uz && bits == 0x80) return std::numeric_limits<double>::quiet_NaN();
  unsigned field = mag >> f.manBits, man = mag & ((1u << f.manBits) - 1u);
  unsigned allOnes = (1u << f.expBits) - 1u;
  if(f.hasInf && field == allOnes)
    return man ? std::numeric_limits<double>::quiet_NaN()
               : (neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
  if(f.hasNaN && !f.uz && !f.hasInf && mag == f.signBit - 1u) return std::numeric_limits<double>::quiet_NaN();
  double v = field == 0 ? std::ldexp(static_cast<double>(man), 1 - f.bias - f.manBits)
                        : std::ldexp(static_cast<double>(man + (1u << f.manBits)), static_cast<int>(field) - f.bias - f.manBits);
  return neg ? -v : v;
}

uint8_t encodeE8M0(float x, bool saturate, E8M0Round mode) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  unsigned exp = (u >> 23) & 0xffu;
  if(exp == 0xffu) return 0xff;
  bool roundUp = false;
  if(mode == E8M0Round::up) {
    roundUp = (u & 0x7fffffu) != 0;
  } else if(mode == E8M0Round::nearest) {
    // Ties of the mantissa (exactly 1.5) go up unless the exponent field is 0.
    bool g = (u & 0x400000u) != 0, r = (u & 0x200000u) != 0, s = (u & 0x1fffffu) != 0;
    roundUp = g && (r || s || exp > 0);
  }
  if(roundUp && saturate && exp == 0xfeu) roundUp = false;
  return static_cast<uint8_t>(exp + (roundUp ? 1u : 0u));
}

double loadAsDouble(const void* data, Type t, size_t i) {
  switch(t) {
    case Type::float32: return static_cast<const float*>(data)[i];
    case Type::float64: return static_cast<const double*>(data)[i];
    case Type::float16: return static_cast<const float16*>(data)[i];
    case Type::bfloat16: return static_cast<const bfloat16*>(data)[i];
    case Type::int8: return static_cast<const int8_t*>(data)[i];
    case Type::int16: return static_cast<const int16_t*>(data)[i];
    case Type::int32: return static_cast<const int32_t*>(data)[i];
    case Type::int64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case Type::uint8: return static_cast<const uint8_t*>(data)[i];
    case Type::uint16: return static_cast<const uint16_t*>(data)[i];
    case Type::uint32: return static_cast<const uint32_t*>(data)[i];
    case Type::uint64: return static_cast<double>(static_cast<const uint64_t*>(data)[i]);
    case Type::boolean: return static_cast<const bool*>(data)[i] ? 1.0 : 0.0;
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz:
    case Type::float8e8m0: return decodeSmallFloat(t, static_cast<const uint8_t*>(data)[i]);
    case Type::float4e2m1: return decodeSmallFloat(t, loadPacked(data, t, i));
    case Type::uint4: case Type::uint2: return loadPacked(data, t, i);
    case Type::int4: {
      int v = loadPacked(data, t, i);
      return v >= 8 ? v - 16 : v;
    }
    case Type::int2: {
      int v = loadPacked(data, t, i);
      return v >= 2 ? v - 4 : v;
    }
    default: fail("cannot read element type ", t, " as a number");
  }
}

namespace {
template <class T>
T toInt(double v) {
  if(std::isnan(v)) return 0;
  if(v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if(v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
template <class T>
void put(void* data, size_t i, T v) { static_cast<T*>(data)[i] = v; }
}  // namespace

void storeFromDouble(void* data, Type t, size_t i, double v, bool saturate, E8M0Round mode) {
  switch(t) {
    case Type::float32: put(data, i, static_cast<float>(v)); return;
    case Type::float64: put(data, i, v); return;
    case Type::float16: put(data, i, float16(static_cast<float>(v))); return;
    case Type::bfloat16: put(data, i, bfloat16(static_cast<float>(v))); return;
    case Type::int8: put(data, i, toInt<int8_t>(v)); return;
    case Type::int16: put(data, i, toInt<int16_t>(v)); return;
    case Type::int32: put(data, i, toInt<int32_t>(v)); return;
    case Type::int64: put(data, i, toInt<int64_t>(v)); return;
    case Type::uint8: put(data, i, toInt<uint8_t>(v)); return;
    case Type::uint16: put(data, i, toInt<uint16_t>(v)); return;
    case Type::uint32: put(data, i, toInt<uint32_t>(v)); return;
    case Type::uint64: put(data, i, toInt<uint64_t>(v)); return;
    case Type::boolean: put(data, i, v != 0); return;
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz:
      put(data, i, encodeSmallFloat(t, v, saturate));
      return;
    case Type::float8e8m0: put(data, i, encodeE8M0(static_cast<float>(v), saturate, mode)); return;
    case Type::float4e2m1: storePacked(data, t, i, encodeSmallFloat(t, v, true)); return;
    case Type::int4: case Type::uint4: case Type::int2: case Type::uint2:
      // Truncated toward zero, then wrapped to the low bits (two's complement).
      storePacked(data, t, i, static_cast<uint8_t>(static_cast<uint64_t>(toInt<int64_t>(v)) & 0xffu));
      return;
    default: fail("cannot store a number as element type ", t);
  }
}

}  // namespace onyx
