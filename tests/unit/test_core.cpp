// Core types: Type, float16/bfloat16, the float8/float4/packed-integer
// conversions, Shape, Tensor, Allocator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include <onyx/core/dispatch.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

TEST(Types, OnnxNumbering) {
  // The ONNX TensorProto.DataType values, from onnx.proto.
  EXPECT_EQ(static_cast<int>(Type::float32), 1);
  EXPECT_EQ(static_cast<int>(Type::int64), 7);
  EXPECT_EQ(static_cast<int>(Type::boolean), 9);
  EXPECT_EQ(static_cast<int>(Type::float16), 10);
  EXPECT_EQ(static_cast<int>(Type::float64), 11);
  EXPECT_EQ(static_cast<int>(Type::bfloat16), 16);
  EXPECT_EQ(static_cast<int>(Type::int4), 22);
  EXPECT_EQ(typeFromName("float16"), Type::float16);
  EXPECT_EQ(typeBytes(Type::int4, 3), 2u);  // packed two per byte
  EXPECT_THROW(typeFromName("float17"), Error);
}

TEST(Types, Float16KnownBitPatterns) {
  // Bit patterns from IEEE 754 binary16.
  EXPECT_EQ(float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float16(1e6f).bits, 0x7c00);                  // overflow to inf
  EXPECT_EQ(float16(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float(float16::toFloat(0x3555)), 0.333251953125f);
  EXPECT_TRUE(std::isnan(float(float16(NAN))));
  for(float f : {0.1f, 3.14159f, -1000.5f, 6.1e-5f})
    EXPECT_NEAR(float(float16(f)), f, std::fabs(f) * 1e-3 + 1e-7) << f;
}

TEST(Types, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float(bfloat16(3.0f)), 3.0f);
  EXPECT_NEAR(float(bfloat16(3.14159f)), 3.140625f, 1e-6);
}

// The conversion helpers of src/core/types.h, against codes worked out by
// hand from the format definitions (sign | exponent field | mantissa).
TEST(SmallFloatConversion, Float8E4M3FN) {
  const Type t = Type::float8e4m3fn;  // bias 7, no inf, NaN S.1111.111, max 1.75 * 2^8 = 448
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x38);     // 0.0111.000
  EXPECT_EQ(encodeSmallFloat(t, -2.5), 0xC2);    // 1.1000.010: 1.25 * 2^1
  EXPECT_EQ(encodeSmallFloat(t, 448.0), 0x7E);
  EXPECT_EQ(encodeSmallFloat(t, 464.0), 0x7E);   // tie between 448 (even) and 480 (odd, the NaN code)
  EXPECT_EQ(encodeSmallFloat(t, 500.0), 0x7E);   // saturates
  EXPECT_EQ(encodeSmallFloat(t, 500.0, false), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY), 0xFE);
  EXPECT_EQ(encodeSmallFloat(t, INFINITY, false), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, NAN), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -9)), 0x01);      // smallest subnormal
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -10)), 0x00);     // tie -> even (0)
  EXPECT_EQ(encodeSmallFloat(t, 3 * std::ldexp(1.0, -10)), 0x02); // tie 1 vs 2 -> 2
  EXPECT_EQ(encodeSmallFloat(t, -0.0), 0x80);
  EXPECT_EQ(encodeSmallFloat(t, 1.0625), 0x38);  // tie 1.0 (m=0) vs 1.125 (m=1)
  EXPECT_EQ(encodeSmallFloat(t, 1.1875), 0x3A);  // tie 1.125 (m=1) vs 1.25 (m=2)
  EXPECT_EQ(decodeSmallFloat(t, 0x7E), 448.0);
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(decodeSmallFloat(t, 0xC2), -2.5);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0xFF)));
}

TEST(SmallFloatConversion, Float8E4M3FNUZ_E5M2_E5M2FNUZ) {
  Type t = Type::float8e4m3fnuz;  // bias 8, NaN 0x80 only, max 1.875 * 2^7 = 240
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x40);
  EXPECT_EQ(encodeSmallFloat(t, 240.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, 1000.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, -1000.0, false), 0x80);
  EXPECT_EQ(encodeSmallFloat(t, -0.0), 0x00);    // no negative zero
  EXPECT_EQ(encodeSmallFloat(t, NAN), 0x80);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0x80)));
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -10));
  t = Type::float8e5m2;  // bias 15, inf 0.11111.00, max 1.75 * 2^15 = 57344
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x3C);
  EXPECT_EQ(encodeSmallFloat(t, 57344.0), 0x7B);
  EXPECT_EQ(encodeSmallFloat(t, 1e6), 0x7B);
  EXPECT_EQ(encodeSmallFloat(t, 1e6, false), 0x7C);
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY, false), 0xFC);
  EXPECT_EQ(encodeSmallFloat(t, std::ldexp(1.0, -16)), 0x01);
  EXPECT_EQ(decodeSmallFloat(t, 0x7C), INFINITY);
  EXPECT_TRUE(std::isnan(decodeSmallFloat(t, 0x7D)));
  t = Type::float8e5m2fnuz;  // bias 16
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x40);
  EXPECT_EQ(encodeSmallFloat(t, 57344.0), 0x7F);
  EXPECT_EQ(encodeSmallFloat(t, INFINITY, false), 0x80);
  EXPECT_EQ(decodeSmallFloat(t, 0x01), std::ldexp(1.0, -17));
}

TEST(SmallFloatConversion, Float4E2M1AndE8M0) {
  const Type t = Type::float4e2m1;  // bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6
  EXPECT_EQ(encodeSmallFloat(t, 1.0), 0x2);
  EXPECT_EQ(encodeSmallFloat(t, 1.5), 0x3);
  EXPECT_EQ(encodeSmallFloat(t, 0.25), 0x0);   // tie 0 vs 0.5 -> 0
  EXPECT_EQ(encodeSmallFloat(t, 0.75), 0x2);   // tie 0.5 vs 1 -> 1
  EXPECT_EQ(encodeSmallFloat(t, 5.0), 0x6);    // tie 4 vs 6 -> 4
  EXPECT_EQ(encodeSmallFloat(t, -3.5), 0xE);   // tie 3 vs 4 -> -4
  EXPECT_EQ(encodeSmallFloat(t, 100.0), 0x7);  // always saturates
  EXPECT_EQ(encodeSmallFloat(t, -INFINITY), 0xF);
  EXPECT_EQ(decodeSmallFloat(t, 0x7), 6.0);
  EXPECT_EQ(decodeSmallFloat(t, 0x9), -0.5);
  // float8e8m0: 2^(e - 127); 0xff NaN.
  EXPECT_EQ(encodeE8M0(1.0f), 0x7F);
  EXPECT_EQ(encodeE8M0(1.1f), 0x80);  // up
  EXPECT_EQ(encodeE8M0(1.1f, true, E8M0Round::down), 0x7F);
  EXPECT_EQ(encodeE8M0(1.1f, true, E8M0Round::nearest), 0x7F);
  EXPECT_EQ(encodeE8M0(1.5f, true, E8M0Round::nearest), 0x80);
  EXPECT_EQ(encodeE8M0(0.0f), 0x00);
  EXPECT_EQ(encodeE8M0(NAN), 0xFF);
  EXPECT_EQ(encodeE8M0(3e38f), 0xFE);         // 1.76 * 2^127 saturates
  EXPECT_EQ(encodeE8M0(3e38f, false), 0xFF);
  EXPECT_EQ(decodeSmallFloat(Type::float8e8m0, 0x80), 2.0);
  EXPECT_EQ(decodeSmallFloat(Type::float8e8m0, 0x00), std::ldexp(1.0, -127));
}

TEST(SmallFloatConversion, PackedIntegers) {
  uint8_t buf[2] = {0, 0};
  storeFromDouble(buf, Type::uint4, 0, 1.0);
  storeFromDouble(buf, Type::uint4, 1, 2.0);
  storeFromDouble(buf, Type::uint4, 2, 19.0);  // wraps to 3
  EXPECT_EQ(buf[0], 0x21);                      // first element in the low nibble
  EXPECT_EQ(buf[1], 0x03);
  storeFromDouble(buf, Type::int4, 0, -1.0);    // 0xF
  storeFromDouble(buf, Type::int4, 1, 9.7);     // trunc 9 = 0b1001 -> -7
  EXPECT_EQ(buf[0], 0x9F);
  EXPECT_EQ(loadAsDouble(buf, Type::int4, 0), -1.0);
  EXPECT_EQ(loadAsDouble(buf, Type::int4, 1), -7.0);
  EXPECT_EQ(loadAsDouble(buf, Type::uint4, 1), 9.0);
  uint8_t b2 = 0;
  const double v[4] = {1, -2, -1, 0};  // codes 01, 10, 11, 00
  for(size_t i = 0; i < 4; ++i) storeFromDouble(&b2, Type::int2, i, v[i]);
  EXPECT_EQ(b2, 0x39);
  for(size_t i = 0; i < 4; ++i) EXPECT_EQ(loadAsDouble(&b2, Type::int2, i), v[i]);
  EXPECT_EQ(loadAsDouble(&b2, Type::uint2, 1), 2.0);
  EXPECT_EQ(typeBytes(Type::int2, 5), 2u);
}

TEST(Shape, BroadcastAndAxes) {
  EXPECT_EQ(Shape::broadcast({Shape{2, 1, 4}, Shape{3, 1}}), (Shape{2, 3, 4}));
  EXPECT_EQ(Shape::broadcast({Shape{}, Shape{5}}), (Shape{5}));
  EXPECT_EQ((Shape{2, 3, 4}).axis(-1), 2);
  EXPECT_EQ((Shape{2, 3, 4})[-2], 3);
  EXPECT_EQ((Shape{2, 3, 4}).elements(), 24);
  EXPECT_EQ(Shape().elements(), 1);
  try {
    Shape::broadcast({Shape{2, 3}, Shape{4}});
    FAIL() << "expected an error";
  } catch(const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("2x3"), std::string::npos) << m;
    EXPECT_NE(m.find("4"), std::string::npos) << m;
  }
  try {
    (void)(Shape{2, 3}).axis(2);
    FAIL() << "expected an error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("axis 2 is out of range"), std::string::npos) << e.what();
  }
}

TEST(Tensor, GetSetConvert) {
  auto t = TensorBase::create({2, 2}, Type::float16);
  t->set(std::vector<float>{1, 2.5f, -3, 0.25f});
  std::vector<double> d;
  t->get(d);
  EXPECT_EQ(d, (std::vector<double>{1, 2.5, -3, 0.25}));
  auto i = TensorBase::create({3}, Type::int32);
  i->set(std::vector<double>{1.9, -1.9, 1e12});  // truncates, saturates
  EXPECT_EQ(i->toVector<int>(), (std::vector<int>{1, -1, 2147483647}));
  EXPECT_THROW(t->set(std::vector<float>{1, 2}), Error);
  auto b = TensorBase::create({2}, Type::boolean);
  b->set(std::vector<bool>{true, false});
  EXPECT_EQ(b->toVector<int>(), (std::vector<int>{1, 0}));
}

// The one saturating cast from double (host and device code share it):
// NaN is 0, the type's ends and beyond give the ends, the rest truncates.
TEST(Dispatch, SaturateToIntAtTheEnds) {
  const double nan = std::nan("");
  EXPECT_EQ(saturateToInt<int64_t>(9223372036854775808.0), INT64_MAX);  // 2^63: one past the end
  EXPECT_EQ(saturateToInt<int64_t>(-9223372036854775808.0), INT64_MIN);
  EXPECT_EQ(saturateToInt<int64_t>(9223372036854774784.0), int64_t(9223372036854774784));  // the largest double below 2^63
  EXPECT_EQ(saturateToInt<uint64_t>(1.8446744073709552e19), UINT64_MAX);
  EXPECT_EQ(saturateToInt<uint64_t>(-1.0), uint64_t(0));
  EXPECT_EQ(saturateToInt<int8_t>(127.9), int8_t(127));
  EXPECT_EQ(saturateToInt<int8_t>(-128.5), int8_t(-128));
  EXPECT_EQ(saturateToInt<int8_t>(-127.9), int8_t(-127));
  EXPECT_EQ(saturateToInt<uint16_t>(65535.5), uint16_t(65535));
  EXPECT_EQ(saturateToInt<int32_t>(-1e300), INT32_MIN);
  for(double v : {nan, -nan}) {
    EXPECT_EQ(saturateToInt<int32_t>(v), 0);
    EXPECT_EQ(saturateToInt<uint8_t>(v), 0);
    EXPECT_EQ(castFromDouble<int64_t>(v), 0);
  }
  EXPECT_EQ(castFromDouble<int16_t>(1e9), int16_t(32767));
}

TEST(Tensor, DebugShowsStats) {
  auto t = TensorBase::fromVector<float>({1, 1}, {2.f});
  std::string s = t->debug();
  EXPECT_NE(s.find("shape=1x1 size=1 type=float32"), std::string::npos) << s;
  EXPECT_NE(s.find("min: 2.00000000 max: 2.00000000 l2-norm: 2.00000000"), std::string::npos) << s;
  EXPECT_NE(s.find("[[ 2.00000000 ]]"), std::string::npos) << s;
}

TEST(Allocator, ReusesAndCoalesces) {
  Allocator a(DeviceId{}, 256);
  a.reserve(4096);
  EXPECT_EQ(a.capacity(), 4096u);
  void* p = a.alloc(1000);
  void* q = a.alloc(1000);
  EXPECT_EQ(a.bytesInUse(), 2048u);
  a.free(p, 1000);
  a.free(q, 1000);
  EXPECT_EQ(a.bytesInUse(), 0u);
  // After coalescing, one block of the whole chunk fits again without growth.
  void* r = a.alloc(4096);
  EXPECT_EQ(a.capacity(), 4096u);
  a.free(r, 4096);
  EXPECT_EQ(a.peakBytes(), 4096u);
  // Growth when the arena is too small instead of failing.
  void* big = a.alloc(10000);
  EXPECT_GE(a.capacity(), 4096u + 10000u);
  a.free(big, 10000);
}

}  // namespace
}  // namespace onyx
