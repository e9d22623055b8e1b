// ONNX imports of composite rules in converters/ (strings, ml, training,
// random, ImageDecoder, TensorScatter) on cases the official node tests
// leave out: one-node models built here, run through Model/Session, checked
// against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include <onyx/runtime/session.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

namespace fs = std::filesystem;

struct Io {
  std::string name;
  Type type;
  std::vector<int64_t> dims;
};

// One node `op` (domain, opset) with graph inputs `ins`, outputs `outs`; the
// attributes are filled by `attrs` on the node.
struct OneNode {
  ::onnx::ModelProto m;
  ::onnx::NodeProto* node;
  OneNode(const std::string& op, const std::string& domain, int opset, const std::vector<Io>& ins,
          const std::vector<Io>& outs) {
    m.set_ir_version(9);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(domain.empty() ? opset : 21);
    if(!domain.empty()) {
      auto* o2 = m.add_opset_import();
      o2->set_domain(domain);
      o2->set_version(opset);
    }
    auto* g = m.mutable_graph();
    g->set_name("g");
    node = g->add_node();
    node->set_op_type(op);
    node->set_domain(domain);
    node->set_name("n");
    for(auto& i : ins) { add(g->add_input(), i); node->add_input(i.name); }
    for(auto& i : outs) { add(g->add_output(), i); node->add_output(i.name); }
  }
  static void add(::onnx::ValueInfoProto* v, const Io& io) {
    v->set_name(io.name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int>(io.type));
    auto* sh = tt->mutable_shape();
    for(auto d : io.dims) sh->add_dim()->set_dim_value(d);
  }
  ::onnx::AttributeProto* attr(const std::string& name, ::onnx::AttributeProto::AttributeType t) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(t);
    return a;
  }
  void i(const std::string& n, int64_t v) { attr(n, ::onnx::AttributeProto::INT)->set_i(v); }
  void f(const std::string& n, float v) { attr(n, ::onnx::AttributeProto::FLOAT)->set_f(v); }
  void s(const std::string& n, const std::string& v) { attr(n, ::onnx::AttributeProto::STRING)->set_s(v); }
  void ints(const std::string& n, std::vector<int64_t> v) {
    auto* a = attr(n, ::onnx::AttributeProto::INTS);
    for(auto x : v) a->add_ints(x);
  }
  void floats(const std::string& n, std::vector<float> v) {
    auto* a = attr(n, ::onnx::AttributeProto::FLOATS);
    for(auto x : v) a->add_floats(x);
  }
  void strings(const std::string& n, std::vector<std::string> v) {
    auto* a = attr(n, ::onnx::AttributeProto::STRINGS);
    for(auto& x : v) a->add_strings(x);
  }
  void tensor(const std::string& n, Type t, std::vector<int64_t> dims, std::vector<double> v) {
    auto* tp = attr(n, ::onnx::AttributeProto::TENSOR)->mutable_t();
    tp->set_data_type(static_cast<int>(t));
    for(auto d : dims) tp->add_dims(d);
    for(auto x : v) {
      if(t == Type::float32) tp->add_float_data(static_cast<float>(x));
      else if(t == Type::float64) tp->add_double_data(x);
      else if(t == Type::int64) tp->add_int64_data(static_cast<int64_t>(x));
      else tp->add_int32_data(static_cast<int32_t>(x));
    }
  }
  std::shared_ptr<Model> load() {
    char tmpl[] = "/tmp/onyx_misc_XXXXXX";
    fs::path dir = mkdtemp(tmpl);
    std::string path = (dir / "m.onnx").string();
    {
      std::ofstream out(path, std::ios::binary);
      m.SerializeToOstream(&out);
    }
    auto model = Model::load(path);
    fs::remove_all(dir);
    return model;
  }
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& in) {
    Session s(load());
    return s.run(in);
  }
};

Tensor strs(const Shape& s, std::vector<std::string> v) {
  Tensor t = TensorBase::create(s, Type::string);
  t->strings() = std::move(v);
  return t;
}

TEST(MiscImport, StringSplitWhitespaceWithMaxsplit) {
  OneNode n("StringSplit", "", 20, {{"x", Type::string, {3}}},
            {{"y", Type::string, {}}, {"len", Type::int64, {}}});
  n.i("maxsplit", 1);
  auto out = n.run({{"x", strs({3}, {"  a  b c ", "", "one"})}});
  EXPECT_EQ(out.at("y")->shape(), Shape({3, 2}));
  EXPECT_EQ(out.at("y")->strings(), (std::vector<std::string>{"a", "b c", "", "", "one", ""}));
  EXPECT_EQ(out.at("len")->toVector<int64_t>(), (std::vector<int64_t>{2, 0, 1}));
}

TEST(MiscImport, StringNormalizerCaseInsensitiveStopwordsKeepRank) {
  OneNode n("StringNormalizer", "", 10, {{"x", Type::string, {1, 3}}}, {{"y", Type::string, {}}});
  n.strings("stopwords", {"THE"});
  n.s("case_change_action", "LOWER");
  auto out = n.run({{"x", strs({1, 3}, {"The", "Cat", "the"})}});
  EXPECT_EQ(out.at("y")->shape(), Shape({1, 1}));
  EXPECT_EQ(out.at("y")->strings(), (std::vector<std::string>{"cat"}));
}

TEST(MiscImport, RegexFullMatchNeedsTheWholeString) {
  OneNode n("RegexFullMatch", "", 20, {{"x", Type::string, {3}}}, {{"y", Type::boolean, {}}});
  n.s("pattern", "a+b?");
  auto out = n.run({{"x", strs({3}, {"aab", "aabb", "ba"})}});
  EXPECT_EQ(out.at("y")->toVector<bool>(), (std::vector<bool>{true, false, false}));
  OneNode bad("RegexFullMatch", "", 20, {{"x", Type::string, {1}}}, {{"y", Type::boolean, {}}});
  bad.s("pattern", "(unclosed");
  try {
    bad.run({{"x", strs({1}, {"a"})}});
    ADD_FAILURE() << "no error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
}

// Strings with TFIDF weights, 2 rows: row 0 "a b a c", row 1 "b c x b".
// Pool: unigrams a, b; bigram (b, c) -> outputs 2, 0, 1, weights 0.5, 2, 3.
TEST(MiscImport, TfIdfOnStringsWithWeights) {
  OneNode n("TfIdfVectorizer", "", 9, {{"x", Type::string, {2, 4}}}, {{"y", Type::float32, {}}});
  n.i("min_gram_length", 1);
  n.i("max_gram_length", 2);
  n.i("max_skip_count", 1);
  n.s("mode", "TFIDF");
  n.ints("ngram_counts", {0, 2});
  n.ints("ngram_indexes", {2, 0, 1});
  n.strings("pool_strings", {"a", "b", "b", "c"});
  n.floats("weights", {0.5f, 2.f, 3.f});
  auto out = n.run({{"x", strs({2, 4}, {"a", "b", "a", "c", "b", "c", "x", "b"})}});
  // Row 0: a x2 -> out 2 = 2*0.5; b x1 -> out 0 = 2; (b,c) with skip 1: b@1,c@3 -> out 1 = 3.
  // Row 1: b x2 -> out 0 = 4; (b,c) skip 0: b@0,c@1 -> out 1 = 3.
  EXPECT_EQ(out.at("y")->shape(), Shape({2, 3}));
  EXPECT_EQ(out.at("y")->toVector<float>(), (std::vector<float>{2, 3, 1, 4, 3, 0}));
}

TEST(MiscImport, LabelEncoderInt64ToFloatWithDefault) {
  OneNode n("LabelEncoder", "ai.onnx.ml", 2, {{"x", Type::int64, {4}}}, {{"y", Type::float32, {}}});
  n.ints("keys_int64s", {3, 7});
  n.floats("values_floats", {0.5f, -1.5f});
  n.f("default_float", 9.f);
  auto out = n.run({{"x", TensorBase::fromVector<int64_t>({4}, {7, 3, 0, 7})}});
  EXPECT_EQ(out.at("y")->toVector<float>(), (std::vector<float>{-1.5f, 0.5f, 9.f, -1.5f}));
}

// Two one-split trees on feature 1, averaged, then LOGISTIC.
TEST(MiscImport, TreeEnsembleAverageLogistic) {
  OneNode n("TreeEnsemble", "ai.onnx.ml", 5, {{"x", Type::float32, {2, 2}}}, {{"y", Type::float32, {}}});
  n.i("aggregate_function", 0);
  n.i("post_transform", 2);
  n.i("n_targets", 1);
  n.ints("tree_roots", {0, 1});
  n.ints("nodes_featureids", {1, 1});
  n.tensor("nodes_splits", Type::float32, {2}, {0.0, 10.0});
  n.tensor("nodes_modes", Type::uint8, {2}, {0, 3});  // x1 <= 0 ; x1 > 10
  n.ints("nodes_truenodeids", {0, 2});
  n.ints("nodes_trueleafs", {1, 1});
  n.ints("nodes_falsenodeids", {1, 3});
  n.ints("nodes_falseleafs", {1, 1});
  n.ints("leaf_targetids", {0, 0, 0, 0});
  n.tensor("leaf_weights", Type::float32, {4}, {1, 2, 3, 4});
  auto out = n.run({{"x", TensorBase::fromVector<float>({2, 2}, {5, -1, 5, 20})}});
  // Row 0: tree 0 -> leaf 0 (1), tree 1 -> false leaf 3 (4): mean 2.5.
  // Row 1: tree 0 -> leaf 1 (2), tree 1 -> true leaf 2 (3): mean 2.5.
  auto y = out.at("y")->toVector<float>();
  ASSERT_EQ(y.size(), 2u);
  for(float v : y) EXPECT_NEAR(v, 1 / (1 + std::exp(-2.5)), 1e-6);
}

TEST(MiscImport, SeededRandomUniformRepeatsAcrossSessions) {
  auto make = [] {
    auto n = std::make_unique<OneNode>("RandomUniform", "", 22, std::vector<Io>{}, std::vector<Io>{{"y", Type::float64, {}}});
    n->ints("shape", {3, 4});
    n->i("dtype", static_cast<int64_t>(Type::float64));
    n->f("low", 2.f);
    n->f("high", 5.f);
    n->f("seed", 7.f);
    return n;
  };
  auto a = make()->run({}), b = make()->run({});
  EXPECT_EQ(a.at("y")->shape(), Shape({3, 4}));
  EXPECT_EQ(a.at("y")->type(), Type::float64);
  EXPECT_EQ(a.at("y")->toVector<double>(), b.at("y")->toVector<double>());
  for(double v : a.at("y")->toVector<double>()) EXPECT_TRUE(v >= 2 && v < 5) << v;
}

TEST(MiscImport, BernoulliOfZeroAndOneIsExact) {
  OneNode n("Bernoulli", "", 22, {{"p", Type::float32, {4}}}, {{"y", Type::int64, {}}});
  n.i("dtype", static_cast<int64_t>(Type::int64));
  auto out = n.run({{"p", TensorBase::fromVector<float>({4}, {0, 1, 1, 0})}});
  EXPECT_EQ(out.at("y")->toVector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(MiscImport, MomentumAfterTheFirstStepUsesBeta) {
  OneNode n("Momentum", "ai.onnx.preview.training", 1,
            {{"r", Type::float32, {}}, {"t", Type::int64, {}}, {"x", Type::float32, {1}}, {"g", Type::float32, {1}},
             {"v", Type::float32, {1}}},
            {{"x2", Type::float32, {}}, {"v2", Type::float32, {}}});
  n.f("alpha", 0.5f);
  n.f("beta", 0.25f);
  n.f("norm_coefficient", 0.f);
  n.s("mode", "standard");
  auto out = n.run({{"r", TensorBase::fromVector<float>({}, {0.1f})},
                    {"t", TensorBase::fromVector<int64_t>({}, {3})},
                    {"x", TensorBase::fromVector<float>({1}, {1.f})},
                    {"g", TensorBase::fromVector<float>({1}, {2.f})},
                    {"v", TensorBase::fromVector<float>({1}, {4.f})}});
  // v' = 0.5 * 4 + 0.25 * 2 = 2.5; x' = 1 - 0.1 * 2.5 = 0.75.
  EXPECT_NEAR(out.at("v2")->scalar<float>(), 2.5f, 1e-6);
  EXPECT_NEAR(out.at("x2")->scalar<float>(), 0.75f, 1e-6);
}

TEST(MiscImport, ImageDecoderReadsAsciiPnm) {
  std::string pnm = "P3\n# comment\n2 1\n255\n10 20 30  40 50 60\n";
  std::vector<uint8_t> bytes(pnm.begin(), pnm.end());
  for(std::string fmt : {"RGB", "BGR", "Grayscale"}) {
    OneNode n("ImageDecoder", "", 20, {{"d", Type::uint8, {int64_t(bytes.size())}}}, {{"y", Type::uint8, {}}});
    n.s("pixel_format", fmt);
    auto out = n.run({{"d", TensorBase::fromVector<uint8_t>({int64_t(bytes.size())}, bytes)}});
    auto y = out.at("y")->toVector<int>();
    if(fmt == "RGB") {
      EXPECT_EQ(y, (std::vector<int>{10, 20, 30, 40, 50, 60}));
    } else if(fmt == "BGR") {
      EXPECT_EQ(y, (std::vector<int>{30, 20, 10, 60, 50, 40}));
    } else {
      EXPECT_EQ(out.at("y")->shape(), Shape({1, 2, 1}));
      // 0.299 R + 0.587 G + 0.114 B, rounded.
      EXPECT_EQ(y, (std::vector<int>{int(std::lround(0.299 * 10 + 0.587 * 20 + 0.114 * 30)),
                                      int(std::lround(0.299 * 40 + 0.587 * 50 + 0.114 * 60))}));
    }
  }
}

TEST(MiscImport, TensorScatterCircularOnAxis1) {
  OneNode n("TensorScatter", "", 24,
            {{"p", Type::float32, {1, 3, 2}}, {"u", Type::float32, {1, 2, 2}}, {"w", Type::int64, {1}}},
            {{"y", Type::float32, {}}});
  n.s("mode", "circular");
  n.i("axis", 1);
  auto out = n.run({{"p", TensorBase::fromVector<float>({1, 3, 2}, {0, 1, 2, 3, 4, 5})},
                    {"u", TensorBase::fromVector<float>({1, 2, 2}, {10, 11, 12, 13})},
                    {"w", TensorBase::fromVector<int64_t>({1}, {2})}});
  EXPECT_EQ(out.at("y")->toVector<float>(), (std::vector<float>{12, 13, 2, 3, 10, 11}));
}

}  // namespace
}  // namespace onyx
