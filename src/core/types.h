// Element types. The numbering is ONNX's TensorProto.DataType, so a Type
// converts to and from ONNX with a cast and nothing can drift.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include <onyx/core/error.h>

namespace onyx {

enum class Type : int {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,
  complex128 = 15,
  bfloat16 = 16,
  float8e4m3fn = 17,
  float8e4m3fnuz = 18,
  float8e5m2 = 19,
  float8e5m2fnuz = 20,
  uint4 = 21,
  int4 = 22,
  float4e2m1 = 23,
  float8e8m0 = 24,
  uint2 = 25,
  int2 = 26,
};
using DataType = Type;

constexpr int kNumTypes = 27;

// Name as printed by debug output and the native format ("float32", "int64", ...).
const char* typeName(Type t);
// Inverse of typeName; throws onyx::Error on an unknown name.
Type typeFromName(const std::string& name);
// Bits per element (4 / 2 for the packed types, 0 for string/undefined).
int typeBits(Type t);
// Bytes needed for n elements (rounds packed types up).
size_t typeBytes(Type t, size_t n);
inline bool isFloat(Type t) {
  return t == Type::float32 || t == Type::float64 || t == Type::float16 || t == Type::bfloat16;
}
inline bool isInt(Type t) {
  switch(t) {
    case Type::int8: case Type::int16: case Type::int32: case Type::int64:
    case Type::uint8: case Type::uint16: case Type::uint32: case Type::uint64: return true;
    default: return false;
  }
}
// Types that element-wise and reduction kernels compute on (others are storage only).
bool isComputeType(Type t);

std::ostream& operator<<(std::ostream& os, Type t);

// ---- storage-only types (ONNX's small floats and packed integers)
//
// float8e4m3fn (bias 7, no inf, NaN S.1111.111), float8e4m3fnuz (bias 8, only
// NaN 0x80, no -0), float8e5m2 (bias 15, IEEE-like with inf), float8e5m2fnuz
// (bias 16, only NaN 0x80, no -0), float4e2m1 (bias 1, no inf/NaN) and
// float8e8m0 (a bare exponent, 2^(e-127), 0xff NaN). int4/uint4 pack two
// elements per byte and int2/uint2 four, the first in the lowest bits.

// Rounding of float8e8m0 (ONNX Cast's round_mode).
enum class E8M0Round { up = 0, down = 1, nearest = 2 };
// "up" / "down" / "nearest"; throws onyx::Error on another name.
E8M0Round e8m0RoundFromName(const std::string& name);

// Whether t is one of the small float types above (float8*, float4e2m1).
bool isSmallFloat(Type t);
// Whether t packs several elements per byte (int4, uint4, int2, uint2, float4e2m1).
bool isPacked(Type t);
// x rounded to nearest even into small float type t (float8e4m3fn,
// float8e4m3fnuz, float8e5m2, float8e5m2fnuz, float4e2m1), as ONNX Cast does.
// saturate: out-of-range values and inf become the largest finite value;
// otherwise they become NaN (fn/fnuz) or inf (e5m2). float4e2m1 always saturates.
uint8_t encodeSmallFloat(Type t, double x, bool saturate = true);
// The exact value of code `bits` of small float type t (float8e8m0 included).
double decodeSmallFloat(Type t, uint8_t bits);
// x (as float32) to float8e8m0 per ONNX: the exponent, rounded by `mode`;
// NaN/inf give 0xff, and saturate keeps a round-up at 2^127.
uint8_t encodeE8M0(float x, bool saturate = true, E8M0Round mode = E8M0Round::up);

// Element i of a packed buffer as its raw code (low bits, unsigned).
inline uint8_t loadPacked(const void* data, Type t, size_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if(typeBits(t) == 2) return static_cast<uint8_t>((p[i / 4] >> (2 * (i % 4))) & 0x3u);
  return static_cast<uint8_t>((p[i / 2] >> (4 * (i % 2))) & 0xfu);
}
// Writes code (its low bits) as element i of a packed buffer (the other
// elements sharing the byte are kept).
inline void storePacked(void* data, Type t, size_t i, uint8_t code) {
  uint8_t* p = static_cast<uint8_t*>(data);
  if(typeBits(t) == 2) {
    unsigned sh = static_cast<unsigned>(2 * (i % 4));
    p[i / 4] = static_cast<uint8_t>((p[i / 4] & ~(0x3u << sh)) | ((code & 0x3u) << sh));
  } else {
    unsigned sh = static_cast<unsigned>(4 * (i % 2));
    p[i / 2] = static_cast<uint8_t>((p[i / 2] & ~(0xfu << sh)) | ((code & 0xfu) << sh));
  }
}

// Element i of a buffer of any numeric type (storage-only ones included) as
// a double; exact except for 64-bit integers beyond 2^53.
double loadAsDouble(const void* data, Type t, size_t i);
// Stores v as element i of a buffer of any numeric type the way ONNX Cast
// converts: floats round to nearest even (small floats per `saturate`,
// float8e8m0 per `mode`), integers truncate toward zero; int4/uint4/int2/uint2
// keep the low bits of the truncated value (they wrap), wider integers clamp.
void storeFromDouble(void* data, Type t, size_t i, double v, bool saturate = true,
                     E8M0Round mode = E8M0Round::up);

// The half types convert on the host and in GPU kernels alike (the CUDA
// backend's element-wise kernels and optimizer steps store them).
#ifdef __CUDACC__
#define ONYX_TYPES_HD __host__ __device__ inline
#else
#define ONYX_TYPES_HD inline
#endif

namespace detail {
ONYX_TYPES_HD uint32_t floatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
ONYX_TYPES_HD float bitsFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
}  // namespace detail

// IEEE binary16, stored as bits; arithmetic goes through float.
struct float16 {
  uint16_t bits = 0;
  float16() = default;
  ONYX_TYPES_HD float16(float f) : bits(fromFloat(f)) {}
  ONYX_TYPES_HD operator float() const { return toFloat(bits); }
  // Round to nearest even; overflow to inf, underflow through subnormals.
  static ONYX_TYPES_HD uint16_t fromFloat(float f) {
    uint32_t x = detail::floatBits(f);
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
  static ONYX_TYPES_HD float toFloat(uint16_t h) {
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
    return detail::bitsFloat(x);
  }
};

// bfloat16: the top half of a float32 (round to nearest even).
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  ONYX_TYPES_HD bfloat16(float f) {
    uint32_t u = detail::floatBits(f);
    if((u & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<uint16_t>((u >> 16) | 0x40); return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<uint16_t>(u >> 16);
  }
  ONYX_TYPES_HD operator float() const { return detail::bitsFloat(static_cast<uint32_t>(bits) << 16); }
};

// C++ type <-> Type.
template <class T> struct TypeOf;
template <> struct TypeOf<float> { static constexpr Type value = Type::float32; };
template <> struct TypeOf<double> { static constexpr Type value = Type::float64; };
template <> struct TypeOf<float16> { static constexpr Type value = Type::float16; };
template <> struct TypeOf<bfloat16> { static constexpr Type value = Type::bfloat16; };
template <> struct TypeOf<int8_t> { static constexpr Type value = Type::int8; };
template <> struct TypeOf<int16_t> { static constexpr Type value = Type::int16; };
template <> struct TypeOf<int32_t> { static constexpr Type value = Type::int32; };
template <> struct TypeOf<int64_t> { static constexpr Type value = Type::int64; };
template <> struct TypeOf<uint8_t> { static constexpr Type value = Type::uint8; };
template <> struct TypeOf<uint16_t> { static constexpr Type value = Type::uint16; };
template <> struct TypeOf<uint32_t> { static constexpr Type value = Type::uint32; };
template <> struct TypeOf<uint64_t> { static constexpr Type value = Type::uint64; };
template <> struct TypeOf<bool> { static constexpr Type value = Type::boolean; };

// Type each element computes in: half types compute in float.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<float16> { using type = float; };
template <> struct ComputeOf<bfloat16> { using type = float; };

}  // namespace onyx
