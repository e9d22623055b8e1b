// Core types: Type, float16/bfloat16, Shape, Tensor, Allocator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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
