#include <onyx/core/types.h>

#include <ostream>

namespace onyx {

namespace {
const char* const kNames[kNumTypes] = {
    "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
    "bool", "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
    "float4e2m1", "float8e8m0"};
const int kBits[kNumTypes] = {0, 32, 8, 8, 16, 16, 32, 64, 0, 8, 16, 64, 32, 64, 64, 128, 16,
                              8, 8, 8, 8, 4, 4, 4, 8};
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

uint16_t float16::fromFloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x007fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if(exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  int32_t e = exp - 127 + 15;
  if(e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if(e <= 0) {
    if(e < -10) return static_cast<uint16_t>(sign);  // underflow -> signed zero
    mant |= 0x00800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if(rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if(rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: correct
  return static_cast<uint16_t>(half);
}

float float16::toFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if(exp == 0) {
    if(mant == 0) x = sign;
    else {
      int e = -1;
      do { mant <<= 1; ++e; } while(!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if(exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace onyx
