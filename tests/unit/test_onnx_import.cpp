// ONNX loading, the runtime API, and bad input: every bad file or model is a
// one-line onyx::Error naming the file and, where there is one, the node, op
// and opset; none crashes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include <onyx/runtime/session.h>
#include <onyx/onnx/model_file.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/onyx_onnx_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

void addTensorValueInfo(::onnx::ValueInfoProto* v, const std::string& name, Type t, std::vector<int64_t> dims,
                        std::vector<std::string> params = {}) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(t));
  auto* sh = tt->mutable_shape();
  for(size_t i = 0; i < dims.size(); ++i) {
    auto* d = sh->add_dim();
    if(i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
    else d->set_dim_value(dims[i]);
  }
}

// y = op(x [, w]) with x float32[2,3] and, when given, a float32 initializer w.
::onnx::ModelProto unaryModel(const std::string& op, int opset = 13, std::vector<float> w = {},
                              std::vector<int64_t> wdims = {}) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  addTensorValueInfo(g->add_input(), "x", Type::float32, {2, 3});
  addTensorValueInfo(g->add_output(), "y", Type::float32, {2, 3});
  auto* n = g->add_node();
  n->set_name("the_node");
  n->set_op_type(op);
  n->add_input("x");
  if(!w.empty()) {
    n->add_input("w");
    auto* t = g->add_initializer();
    t->set_name("w");
    t->set_data_type(static_cast<int>(Type::float32));
    for(auto d : wdims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
  }
  n->add_output("y");
  return m;
}

std::string save(const ::onnx::ModelProto& m, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  return path;
}

Tensor x23() { return TensorBase::fromVector<float>({2, 3}, {-1, 2, -3, 4, -5, 6}); }

// Runs the model at `path` and returns the error message ("" if none).
std::string errorOf(const std::string& path, std::map<std::string, Tensor> in = {{"x", x23()}}) {
  try {
    auto model = Model::load(path);
    Session s(model);
    s.run(in);
  } catch(const Error& e) {
    return e.what();
  } catch(const std::exception& e) {
    return std::string("NOT AN onyx::Error: ") + e.what();
  }
  return "";
}

void expectOneLine(const std::string& msg, std::initializer_list<const char*> parts) {
  EXPECT_FALSE(msg.empty()) << "no error";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find("NOT AN"), std::string::npos) << msg;
  for(const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

TEST(OnnxImport, RunsAModelAndCachesTheGraphPerShape) {
  TempDir d;
  auto path = save(unaryModel("Relu"), d / "relu.onnx");
  auto model = Model::load(path);
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].describe(), "float32[2,3]");
  Session s(model);
  auto out = s.run({{"x", x23()}});
  EXPECT_EQ(out.at("y")->toVector<float>(), (std::vector<float>{0, 2, 0, 4, 0, 6}));
  auto out2 = s.run({{"x", TensorBase::fromVector<float>({2, 3}, {1, -1, 1, -1, 1, -1})}});
  EXPECT_EQ(out2.at("y")->toVector<float>(), (std::vector<float>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(s.graphsBuilt(), 1u);  // same signature: the graph is reused, inputs rebound
  // The first result is the caller's own copy: the second run did not change it.
  EXPECT_EQ(out.at("y")->toVector<float>(), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST(OnnxImport, SymbolicBatchDimBuildsOneGraphPerShape) {
  TempDir d;
  auto m = unaryModel("Relu");
  auto* in = m.mutable_graph()->mutable_input(0);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  auto path = save(m, d / "relu_n.onnx");
  Session s(Model::load(path));
  s.run({{"x", x23()}});
  auto out = s.run({{"x", TensorBase::fromVector<float>({1, 3}, {-1, 0, 1})}});
  EXPECT_EQ(out.at("y")->shape(), Shape({1, 3}));
  s.run({{"x", x23()}});
  EXPECT_EQ(s.graphsBuilt(), 2u);
}

TEST(OnnxImport, SessionsShareNothingMutable) {
  TempDir d;
  auto path = save(unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 3}), d / "add.onnx");
  auto a = Model::load(path), b = Model::load(path);
  EXPECT_NE(a->initializers().at("w").get(), b->initializers().at("w").get());
  SessionOptions train;
  train.trainable = true;
  Session s1(a, train);
  s1.run({{"x", x23()}});
  // Training-style changes to the session's params never reach the model.
  auto g = s1.lastGraph();
  ASSERT_TRUE(g->params()->get("w"));
  g->params()->get("w")->val()->set(100.0);
  EXPECT_EQ(a->initializers().at("w")->toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Session s2(a);
  EXPECT_EQ(s2.run({{"x", x23()}}).at("y")->toVector<float>(), (std::vector<float>{0, 4, 0, 8, 0, 12}));
}

TEST(OnnxImport, ExternalDataIsReadFromTheModelsFolder) {
  TempDir d;
  auto m = unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 3});
  auto* t = m.mutable_graph()->mutable_initializer(0);
  std::string bytes = t->raw_data();
  t->clear_raw_data();
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "8");
  kv("length", std::to_string(bytes.size()));
  {
    std::ofstream f(d / "weights.bin", std::ios::binary);
    f << std::string(8, '\0') << bytes;
  }
  auto path = save(m, d / "ext.onnx");
  Session s(Model::load(path));
  EXPECT_EQ(s.run({{"x", x23()}}).at("y")->toVector<float>(), (std::vector<float>{0, 4, 0, 8, 0, 12}));

  // A length that contradicts the shape.
  t->mutable_external_data(2)->set_value("20");
  expectOneLine(errorOf(save(m, d / "ext_len.onnx")), {"ext_len.onnx", "initializer 'w'", "length 20"});
  // Beyond the end of the file.
  t->mutable_external_data(2)->set_value(std::to_string(bytes.size()));
  t->mutable_external_data(1)->set_value("100");
  expectOneLine(errorOf(save(m, d / "ext_off.onnx")), {"ext_off.onnx", "beyond the end"});
  t->mutable_external_data(1)->set_value("8");
  // Paths that leave the folder: '..', absolute, and a symlink pointing out.
  t->mutable_external_data(0)->set_value("../weights.bin");
  expectOneLine(errorOf(save(m, d / "ext_up.onnx")), {"ext_up.onnx", "leaves the model's folder"});
  t->mutable_external_data(0)->set_value("/etc/passwd");
  expectOneLine(errorOf(save(m, d / "ext_abs.onnx")), {"ext_abs.onnx", "absolute"});
  TempDir outside;
  { std::ofstream f(outside / "w.bin", std::ios::binary); f << std::string(8, '\0') << bytes; }
  fs::create_symlink(outside.path / "w.bin", d.path / "link.bin");
  t->mutable_external_data(0)->set_value("link.bin");
  expectOneLine(errorOf(save(m, d / "ext_link.onnx")), {"ext_link.onnx", "leaves the model's folder"});
}

// Weights past the 2 GiB mark of an external file (a sparse file: no disk
// space is used): offsets are 64-bit all the way.
TEST(OnnxImport, ExternalDataBeyondTwoGigabytes) {
  TempDir d;
  auto m = unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 3});
  auto* t = m.mutable_graph()->mutable_initializer(0);
  std::string bytes = t->raw_data();
  t->clear_raw_data();
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  const int64_t offset = (int64_t(1) << 31) + 4096;
  for(auto kv : {std::make_pair("location", std::string("big.bin")), std::make_pair("offset", std::to_string(offset))}) {
    auto* e = t->add_external_data();
    e->set_key(kv.first);
    e->set_value(kv.second);
  }
  {
    std::ofstream f(d / "big.bin", std::ios::binary);
    f.seekp(offset);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ASSERT_GT(fs::file_size(d / "big.bin"), uint64_t(1) << 31);
  Session s(Model::load(save(m, d / "big.onnx")));
  EXPECT_EQ(s.run({{"x", x23()}}).at("y")->toVector<float>(), (std::vector<float>{0, 4, 0, 8, 0, 12}));
  t->mutable_external_data(1)->set_value("12abc");
  expectOneLine(errorOf(save(m, d / "badnum.onnx")), {"badnum.onnx", "offset '12abc' is not a number"});
}

TEST(OnnxBadInput, TruncatedFile) {
  TempDir d;
  auto m = unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 3});
  std::string bytes = m.SerializeAsString();
  for(size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t(5)}) {
    { std::ofstream f(d / "t.onnx", std::ios::binary); f << bytes.substr(0, cut); }
    std::string e = errorOf(d / "t.onnx");
    expectOneLine(e, {"t.onnx"});
  }
  { std::ofstream f(d / "empty.onnx", std::ios::binary); }
  expectOneLine(errorOf(d / "empty.onnx"), {"empty.onnx", "empty file"});
  expectOneLine(errorOf(d / "missing.onnx"), {"missing.onnx", "no such file"});
}

TEST(OnnxBadInput, WrongMagic) {
  TempDir d;
  { std::ofstream f(d / "png.onnx", std::ios::binary); f << "\x89PNG\r\n\x1a\n not a model at all"; }
  expectOneLine(errorOf(d / "png.onnx"), {"png.onnx", "not an ONNX model"});
  { std::ofstream f(d / "text.onnx"); f << "ir_version: 8\ngraph { }\n"; }
  expectOneLine(errorOf(d / "text.onnx"), {"text.onnx", "not an ONNX model"});
}

TEST(OnnxBadInput, NodeWithAMissingInput) {
  TempDir d;
  auto m = unaryModel("Add");
  m.mutable_graph()->mutable_node(0)->add_input("nowhere");
  expectOneLine(errorOf(save(m, d / "missing_in.onnx")),
                {"missing_in.onnx", "node 'the_node'", "Add", "opset 13", "'nowhere' is not produced"});
}

TEST(OnnxBadInput, UnknownOpAndOpset) {
  TempDir d;
  expectOneLine(errorOf(save(unaryModel("NoSuchOp"), d / "unk.onnx")),
                {"unk.onnx", "node 'the_node'", "NoSuchOp", "opset 13", "unsupported op"});
  expectOneLine(errorOf(save(unaryModel("Relu", 99), d / "opset99.onnx")), {"opset99.onnx", "opset 99"});
  auto m = unaryModel("Relu");
  m.mutable_graph()->mutable_node(0)->set_domain("com.example");
  expectOneLine(errorOf(save(m, d / "dom.onnx")), {"dom.onnx", "the_node", "com.example"});
  auto bad = unaryModel("Relu");
  auto* a = bad.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("bogus");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(1);
  expectOneLine(errorOf(save(bad, d / "attr.onnx")), {"attr.onnx", "the_node", "Relu", "attribute 'bogus'"});
}

// Split (opset 18) into more parts than the axis has elements: an error, not
// empty outputs.
TEST(OnnxBadInput, SplitIntoMorePartsThanElements) {
  TempDir d;
  auto m = unaryModel("Split", 18);
  auto* n = m.mutable_graph()->mutable_node(0);
  m.mutable_graph()->mutable_output(0)->Clear();
  addTensorValueInfo(m.mutable_graph()->mutable_output(0), "y", Type::float32, {1, 3});
  for(const char* extra : {"y1", "y2"}) {
    n->add_output(extra);
    addTensorValueInfo(m.mutable_graph()->add_output(), extra, Type::float32, {1, 3});
  }
  auto* a = n->add_attribute();
  a->set_name("num_outputs");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(3);  // axis 0 of x float32[2,3] has 2 elements
  expectOneLine(errorOf(save(m, d / "split.onnx")), {"split.onnx", "the_node", "Split", "num_outputs 3", "2 elements"});
  a->set_i(2);
  n->mutable_output()->RemoveLast();
  m.mutable_graph()->mutable_output()->RemoveLast();
  EXPECT_EQ(errorOf(save(m, d / "split2.onnx")), "");  // two parts of one row each
}

// Range(start, limit, delta) from int64 or float initializers: y.
::onnx::ModelProto rangeModel(Type t, double start, double limit, double delta) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  addTensorValueInfo(g->add_output(), "y", t, {-1});
  auto* n = g->add_node();
  n->set_name("the_range");
  n->set_op_type("Range");
  const char* names[] = {"start", "limit", "delta"};
  double values[] = {start, limit, delta};
  for(int i = 0; i < 3; ++i) {
    n->add_input(names[i]);
    auto* init = g->add_initializer();
    init->set_name(names[i]);
    init->set_data_type(static_cast<int>(t));
    if(t == Type::int64) {
      int64_t v = static_cast<int64_t>(values[i]);
      if(values[i] >= 9.2e18) v = INT64_MAX;
      if(values[i] <= -9.2e18) v = INT64_MIN;
      init->set_raw_data(std::string(reinterpret_cast<const char*>(&v), sizeof v));
    } else {
      float v = static_cast<float>(values[i]);
      init->set_raw_data(std::string(reinterpret_cast<const char*>(&v), sizeof v));
    }
  }
  n->add_output("y");
  return m;
}

// Range counts in integers (the full int64 span overflowed and came out
// empty) and checks the count before converting it (a delta of 1e-30 came
// out empty too).
TEST(OnnxBadInput, RangeCountsWithoutOverflow) {
  TempDir d;
  expectOneLine(errorOf(save(rangeModel(Type::int64, -1e19, 1e19, 1), d / "full.onnx"), {}),
                {"full.onnx", "the_range", "Range", "too many for one tensor"});
  expectOneLine(errorOf(save(rangeModel(Type::float32, 0, 1, 1e-30), d / "tiny.onnx"), {}),
                {"tiny.onnx", "the_range", "too many for one tensor"});
  // limit - start overflows int64 here, the count (3) does not.
  auto m = rangeModel(Type::int64, -5, 1e19, 0);
  const int64_t step = int64_t(1) << 62;
  m.mutable_graph()->mutable_initializer(2)->set_raw_data(std::string(reinterpret_cast<const char*>(&step), sizeof step));
  auto model = Model::load(save(m, d / "wide.onnx"));
  Session s(model);
  auto out = s.run({});
  ASSERT_EQ(out.at("y")->shape(), Shape({3}));
  const int64_t* y = out.at("y")->data<int64_t>();
  EXPECT_EQ(y[0], -5);
  EXPECT_EQ(y[1], step - 5);
  EXPECT_EQ(y[2], INT64_MAX - 4);  // 2^63 - 5
}

// If nested `depth` deep around a Constant 7 (then branches nest, else
// branches are a Constant -1), its condition an initializer of the main graph.
::onnx::ModelProto nestedIfModel(int depth) {
  auto leaf = [](float v) {
    ::onnx::GraphProto g;
    g.set_name("leaf");
    auto* n = g.add_node();
    n->set_op_type("Constant");
    n->add_output("r");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(static_cast<int>(Type::float32));
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_float_data(v);
    addTensorValueInfo(g.add_output(), "r", Type::float32, {1});
    return g;
  };
  ::onnx::GraphProto g = leaf(7);
  for(int i = 0; i < depth; ++i) {
    ::onnx::GraphProto up;
    up.set_name("level" + std::to_string(i));
    auto* n = up.add_node();
    n->set_op_type("If");
    n->add_input("c");
    n->add_output("r");
    auto* t = n->add_attribute();
    t->set_name("then_branch");
    t->set_type(::onnx::AttributeProto::GRAPH);
    *t->mutable_g() = std::move(g);
    auto* e = n->add_attribute();
    e->set_name("else_branch");
    e->set_type(::onnx::AttributeProto::GRAPH);
    *e->mutable_g() = leaf(-1);
    addTensorValueInfo(up.add_output(), "r", Type::float32, {1});
    g = std::move(up);
  }
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  *m.mutable_graph() = std::move(g);
  m.mutable_graph()->set_name("main");
  auto* c = m.mutable_graph()->add_initializer();
  c->set_name("c");
  c->set_data_type(static_cast<int>(Type::boolean));
  c->add_int32_data(1);
  return m;
}

// If nested 40 deep loads and runs (protobuf's default recursion limit
// stopped it at about 33, reported as a truncated or corrupt file); 120 deep
// is a one-line error that names the nesting limit.
TEST(OnnxBadInput, NestedSubgraphsUpToTheLimit) {
  TempDir d;
  auto model = Model::load(save(nestedIfModel(40), d / "nested40.onnx"));
  Session s(model);
  auto out = s.run({});
  ASSERT_EQ(out.at("r")->size(), 1);
  EXPECT_EQ(out.at("r")->data<float>()[0], 7.f);
  expectOneLine(errorOf(save(nestedIfModel(120), d / "nested120.onnx"), {}),
                {"nested120.onnx", "nested more than 100 deep"});
  // Within protobuf's nesting but over the importer's limit.
  expectOneLine(errorOf(save(nestedIfModel(101), d / "nested101.onnx"), {}), {"nested more than 100 deep"});
}

// consumed_inputs (an in-place hint of opsets 1-5) is ignored by the
// importer for every op, and stays an unsupported attribute from opset 6 on.
TEST(OnnxImport, ConsumedInputsIsIgnoredBeforeOpset6) {
  TempDir d;
  auto withConsumed = [](::onnx::ModelProto m) {
    auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name("consumed_inputs");
    a->set_type(::onnx::AttributeProto::INTS);
    a->add_ints(0);
    return m;
  };
  EXPECT_EQ(errorOf(save(withConsumed(unaryModel("Relu", 1)), d / "relu1.onnx")), "");
  EXPECT_EQ(errorOf(save(withConsumed(unaryModel("Sigmoid", 5)), d / "sigmoid5.onnx")), "");
  EXPECT_EQ(errorOf(save(withConsumed(unaryModel("Add", 5, {1, 2, 3, 4, 5, 6}, {2, 3})), d / "add5.onnx")), "");
  expectOneLine(errorOf(save(withConsumed(unaryModel("Relu", 6)), d / "relu6.onnx")),
                {"relu6.onnx", "the_node", "Relu", "attribute 'consumed_inputs'"});
}

TEST(OnnxBadInput, GatherIndexOutOfRange) {
  TempDir d;
  ::onnx::ModelProto m = unaryModel("Gather");
  auto* g = m.mutable_graph();
  g->mutable_node(0)->add_input("idx");
  auto* t = g->add_initializer();
  t->set_name("idx");
  t->set_data_type(static_cast<int>(Type::int64));
  t->add_dims(2);
  t->add_int64_data(0);
  t->add_int64_data(7);
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
  std::string e = errorOf(save(m, d / "gather.onnx"));
  expectOneLine(e, {"gather", "7"});
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(OnnxBadInput, ShapeThatContradictsTheData) {
  TempDir d;
  // raw_data of 6 floats for a [2,4] initializer.
  auto m = unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 4});
  expectOneLine(errorOf(save(m, d / "raw.onnx")), {"raw.onnx", "initializer 'w'", "raw_data has 24 bytes", "2x4"});
  // Typed field count that contradicts the dims.
  auto m2 = unaryModel("Add", 13, {1, 2, 3, 4, 5, 6}, {2, 3});
  auto* t = m2.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->add_float_data(1);
  expectOneLine(errorOf(save(m2, d / "typed.onnx")), {"typed.onnx", "initializer 'w'", "float_data holds 1"});
  // An input whose shape contradicts the model's declaration.
  auto path = save(unaryModel("Relu"), d / "relu.onnx");
  expectOneLine(errorOf(path, {{"x", TensorBase::fromVector<float>({3, 2}, {1, 2, 3, 4, 5, 6})}}),
                {"relu.onnx", "input 'x'", "contradicts"});
  expectOneLine(errorOf(path, {{"x", TensorBase::fromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})}}),
                {"relu.onnx", "input 'x'", "expected float32, got int64"});
  expectOneLine(errorOf(path, {}), {"relu.onnx", "input 'x'", "missing"});
}

}  // namespace
}  // namespace onyx
