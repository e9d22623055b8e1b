// The JSON reader/writer and the native model format.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <onyx/onyx.h>

namespace onyx {
namespace {

TEST(Json, NumbersRoundTripExactly) {
  json::Value o = json::Value::object();
  o.set("big", json::Value::number(std::numeric_limits<int64_t>::max()));
  o.set("neg", json::Value::number(int64_t(-7)));
  o.set("tenth", json::Value::number(0.1));
  o.set("third", json::Value::number(1.0 / 3.0));
  o.set("whole", json::Value::number(2.0));
  json::Value back = json::parse(o.dump(), "test");
  EXPECT_EQ(back.at("big", "t").asInt("t"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(back.at("neg", "t").asInt("t"), -7);
  EXPECT_EQ(back.at("tenth", "t").asDouble("t"), 0.1);
  EXPECT_EQ(back.at("third", "t").asDouble("t"), 1.0 / 3.0);
  EXPECT_EQ(back.at("whole", "t").asDouble("t"), 2.0);
  EXPECT_EQ(back.dump(), o.dump());  // printing is deterministic
}

TEST(Json, StringsAndEscapes) {
  json::Value v = json::parse(R"({"s": "a\"b\\c\n\u00e9", "l": [1, "x", null, true, false]})", "test");
  EXPECT_EQ(v.at("s", "t").asString("t"), "a\"b\\c\n\xc3\xa9");
  EXPECT_EQ(v.at("l", "t").asArray("t").size(), 5u);
  EXPECT_EQ(json::parse(v.dump(), "again").dump(), v.dump());
}

TEST(Json, QuoteIsAStringLiteralThatParsesBack) {
  const std::string s = "a\"b\\c\n\x01 \xc3\xa9";
  EXPECT_EQ(json::quote(s), "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\"");
  EXPECT_EQ(json::parse(json::quote(s), "test").asString("test"), s);
}

TEST(Json, ErrorsNameThePlace) {
  auto msg = [](const std::string& text) {
    try {
      json::parse(text, "f.json");
    } catch(const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("{\n  \"a\": [1, 2,,]\n}").find("f.json: invalid JSON at line 2"), std::string::npos);
  EXPECT_NE(msg("{\"a\": 1, \"a\": 2}").find("duplicate key"), std::string::npos);
  EXPECT_NE(msg("[1] x").find("trailing"), std::string::npos);
  EXPECT_NE(msg("\"open").find("unterminated"), std::string::npos);
  EXPECT_NE(msg(std::string(500, '[')).find("nesting"), std::string::npos);
  json::Value v = json::parse("{\"a\": \"x\"}", "f.json");
  EXPECT_THROW(v.at("a", "f.json: a").asInt("f.json: a"), Error);
  EXPECT_THROW(v.at("b", "f.json"), Error);
}

TEST(Native, SavesAndReloadsTheSameGraphAndBits) {
  auto g = New<ExpressionGraph>();
  auto x = g->input("x", {2, 3});
  auto W = g->param("layer.W", {3, 4}, inits::glorotUniform());
  auto c = g->constant(TensorBase::fromVector<float>(Shape({4}), {0.5f, -1.f, 2.f, 0.25f}));
  auto y = clip(relu(matmul(x, W)) + c, -std::numeric_limits<float>::infinity(), 1.5f);
  Tensor xv = TensorBase::fromVector<float>(Shape({2, 3}), {1, -2, 3, 0.5f, 0.25f, -1});
  g->bindInput("x", xv);
  y->keepValue();
  g->forward();
  GraphSpec spec;
  spec.outputs = {{"y", y}};
  spec.dimNames["x"] = {"batch", ""};
  spec.docString = "a test graph";
  std::string path = ::testing::TempDir() + "/onyx_native_test.npz";
  saveNative(path, spec);

  ExpressionGraph g2;
  GraphSpec back = loadNative(path, g2);
  EXPECT_EQ(nativeGraphJson(back), nativeGraphJson(spec));
  EXPECT_EQ(back.docString, "a test graph");
  ASSERT_EQ(back.dimNames.count("x"), 1u);
  EXPECT_EQ(back.dimNames["x"][0], "batch");
  ASSERT_TRUE(g2.params()->get("layer.W"));
  EXPECT_TRUE(g2.params()->get("layer.W")->trainable());
  g2.bindInput("x", xv);
  back.outputs[0].second->keepValue();
  g2.forward();
  Tensor a = y->val(), b = back.outputs[0].second->val();
  ASSERT_EQ(a->shape(), b->shape());
  EXPECT_EQ(std::memcmp(a->raw(), b->raw(), a->bytes()), 0);
  std::remove(path.c_str());
}

TEST(Native, TypesWithoutANumpyDtypeAreStoredRaw) {
  auto g = New<ExpressionGraph>();
  Tensor s = TensorBase::create(Shape({2}), Type::string);
  s->strings() = {"hello", "w\"orld"};
  Tensor f8 = TensorBase::create(Shape({3}), Type::float8e4m3fn);
  std::memcpy(f8->raw(), "\x38\x40\xc0", 3);
  auto cs = g->constant(s);
  auto c8 = g->constant(f8);
  auto y = cast(c8, Type::float32);
  GraphSpec spec;
  spec.outputs = {{"y", y}, {"s", cs}};
  std::string path = ::testing::TempDir() + "/onyx_native_types.npz";
  saveNative(path, spec);
  ExpressionGraph g2;
  GraphSpec back = loadNative(path, g2);
  EXPECT_EQ(nativeGraphJson(back), nativeGraphJson(spec));
  Tensor s2 = g2.value(back.outputs[1].second);
  EXPECT_EQ(s2->strings(), s->strings());
  Tensor y2 = g2.value(back.outputs[0].second);
  Tensor y1 = g->value(y);
  EXPECT_EQ(std::memcmp(y1->raw(), y2->raw(), y1->bytes()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace onyx
