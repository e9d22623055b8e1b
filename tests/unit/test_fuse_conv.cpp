// graph/passes/fuse_conv through Session: small ONNX models whose convolution
// epilogues fold into fused_conv, checked against the same models run
// unfused (SessionOptions::optimization none), and the chains that must not fold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <onyx/onyx.h>
#include <onyx/runtime/session.h>

namespace onyx {
namespace {

namespace fs = std::filesystem;

struct OnnxNode {
  std::string op;
  std::vector<std::string> in, out;
  std::map<std::string, float> floats;
  std::string approximate;  // Gelu's string attribute
};

void addInfo(::onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(Type::float32));
  for(int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

void addInit(::onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(static_cast<int>(Type::float32));
  for(int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for(size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * float(i) + 0.3f);
  return v;
}

// x [1, 3, 6, 6] and r (residual) inputs, W [4, 3, 3, 3] and B [4]
// initializers, then `nodes` (the first is usually Conv(x, W, B) -> c);
// `outputs` [1, 4, 6, 6] each.
std::string writeModel(const fs::path& dir, const std::string& file, const std::vector<OnnxNode>& nodes,
                       const std::vector<std::string>& outputs, std::vector<int64_t> rShape = {1, 4, 6, 6}) {
  ::onnx::ModelProto m;
  m.set_ir_version(9);
  m.add_opset_import()->set_version(20);
  auto* g = m.mutable_graph();
  g->set_name("g");
  addInfo(g->add_input(), "x", {1, 3, 6, 6});
  addInfo(g->add_input(), "r", rShape);
  addInit(g, "W", {4, 3, 3, 3}, ramp(108, 0.3f));
  addInit(g, "B", {4}, {0.1f, -0.2f, 0.05f, 0.3f});
  addInit(g, "lo", {}, {-0.4f});
  addInit(g, "hi", {}, {0.6f});
  for(const OnnxNode& n : nodes) {
    auto* p = g->add_node();
    p->set_op_type(n.op);
    for(const auto& i : n.in) p->add_input(i);
    for(const auto& o : n.out) p->add_output(o);
    for(const auto& kv : n.floats) {
      auto* a = p->add_attribute();
      a->set_name(kv.first);
      a->set_type(::onnx::AttributeProto::FLOAT);
      a->set_f(kv.second);
    }
    if(!n.approximate.empty()) {
      auto* a = p->add_attribute();
      a->set_name("approximate");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s(n.approximate);
    }
    if(n.op == "Conv") {
      auto* a = p->add_attribute();
      a->set_name("pads");
      a->set_type(::onnx::AttributeProto::INTS);
      for(int i = 0; i < 4; ++i) a->add_ints(1);
    }
  }
  for(const auto& o : outputs) addInfo(g->add_output(), o, {1, 4, 6, 6});
  std::string path = (dir / file).string();
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  return path;
}

struct Outcome {
  std::map<std::string, Tensor> out;
  std::map<std::string, int> ops;  // op nodes by type
};

Outcome runModel(const std::string& path, bool fuse, std::vector<int64_t> rShape = {1, 4, 6, 6}) {
  SessionOptions o;
  o.optimization = fuse ? OptLevel::all : OptLevel::none;
  Session s(Model::load(path), o);
  int64_t rSize = 1;
  for(int64_t d : rShape) rSize *= d;
  Outcome r;
  r.out = s.run({{"x", TensorBase::fromVector<float>({1, 3, 6, 6}, ramp(108, 1.5f))},
                 {"r", TensorBase::fromVector<float>(Shape(rShape), ramp(size_t(rSize), 0.8f))}});
  for(const Expr& e : s.lastGraph()->nodes())
    if(e->kind() == NodeKind::Op) ++r.ops[e->type()];
  return r;
}

class FuseConv : public ::testing::Test {
protected:
  fs::path dir_;
  void SetUp() override {
    char tmpl[] = "/tmp/onyx_fuse_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the model fused and unfused: same outputs within float32
  // rounding; returns the fused run.
  Outcome both(const std::vector<OnnxNode>& nodes, const std::vector<std::string>& outputs,
           std::vector<int64_t> rShape = {1, 4, 6, 6}) {
    std::string path = writeModel(dir_, "m.onnx", nodes, outputs, rShape);
    Outcome fused = runModel(path, true, rShape), plain = runModel(path, false, rShape);
    EXPECT_EQ(plain.ops.count("fused_conv"), 0u);
    for(const auto& name : outputs) {
      std::vector<float> a = fused.out.at(name)->toVector<float>(), b = plain.out.at(name)->toVector<float>();
      EXPECT_EQ(a.size(), b.size());
      for(size_t i = 0; i < a.size() && i < b.size(); ++i)
        EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-5 * std::fabs(b[i])) << name << "[" << i << "]";
    }
    return fused;
  }
};

const OnnxNode kConv{"Conv", {"x", "W", "B"}, {"c"}, {}, ""};

TEST_F(FuseConv, EachActivationFolds) {
  const std::vector<OnnxNode> acts{
      {"Relu", {"c"}, {"y"}, {}, ""},
      {"LeakyRelu", {"c"}, {"y"}, {{"alpha", 0.2f}}, ""},
      {"Clip", {"c", "lo", "hi"}, {"y"}, {}, ""},
      {"HardSigmoid", {"c"}, {"y"}, {{"alpha", 0.3f}, {"beta", 0.4f}}, ""},
      {"HardSwish", {"c"}, {"y"}, {}, ""},
      {"Sigmoid", {"c"}, {"y"}, {}, ""},
      {"Tanh", {"c"}, {"y"}, {}, ""},
      {"Gelu", {"c"}, {"y"}, {}, ""},
      {"Gelu", {"c"}, {"y"}, {}, "tanh"},
  };
  for(const OnnxNode& act : acts) {
    SCOPED_TRACE(act.op + act.approximate);
    Outcome r = both({kConv, act}, {"y"});
    EXPECT_EQ(r.ops["fused_conv"], 1);
    EXPECT_EQ(r.ops.size(), 1u);  // nothing else left
  }
}

TEST_F(FuseConv, SiluAndResidualAndReluFold) {
  Outcome r = both({kConv,
                {"Sigmoid", {"c"}, {"s"}, {}, ""},
                {"Mul", {"s", "c"}, {"a"}, {}, ""},
                {"Add", {"r", "a"}, {"z"}, {}, ""},
                {"Relu", {"z"}, {"y"}, {}, ""}},
               {"y"});
  EXPECT_EQ(r.ops["fused_conv"], 1);
  EXPECT_EQ(r.ops.size(), 1u);
  // Residual straight after the conv, no relu after it.
  r = both({kConv, {"Add", {"c", "r"}, {"y"}, {}, ""}}, {"y"});
  EXPECT_EQ(r.ops["fused_conv"], 1);
  EXPECT_EQ(r.ops.size(), 1u);
}

TEST_F(FuseConv, ValuesSeenElsewhereStay) {
  // The conv's output is a graph output: nothing folds.
  Outcome r = both({kConv, {"Relu", {"c"}, {"y"}, {}, ""}}, {"y", "c"});
  EXPECT_EQ(r.ops.count("fused_conv"), 0u);
  EXPECT_EQ(r.ops["conv"], 1);
  EXPECT_EQ(r.ops["relu"], 1);
  // The conv's output has a second consumer: nothing folds.
  r = both({kConv, {"Relu", {"c"}, {"a"}, {}, ""}, {"Add", {"a", "c"}, {"y"}, {}, ""}}, {"y"});
  EXPECT_EQ(r.ops.count("fused_conv"), 0u);
  EXPECT_EQ(r.ops["conv"], 1);
  // The activation's output is an output too: the residual add stays apart,
  // the activation folds.
  r = both({kConv, {"Tanh", {"c"}, {"a"}, {}, ""}, {"Add", {"a", "r"}, {"y"}, {}, ""}}, {"y", "a"});
  EXPECT_EQ(r.ops["fused_conv"], 1);
  EXPECT_EQ(r.ops["add"], 1);
  EXPECT_EQ(r.ops.count("tanh"), 0u);
  // sigmoid(c) with a second consumer: not SiLU, and c has two consumers,
  // so the conv stays.
  r = both({kConv,
            {"Sigmoid", {"c"}, {"s"}, {}, ""},
            {"Mul", {"s", "c"}, {"a"}, {}, ""},
            {"Add", {"a", "s"}, {"y"}, {}, ""}},
           {"y"});
  EXPECT_EQ(r.ops.count("fused_conv"), 0u);
  // A broadcast add is not a residual: the relu folds, the add stays.
  r = both({kConv, {"Relu", {"c"}, {"a"}, {}, ""}, {"Add", {"a", "r"}, {"y"}, {}, ""}}, {"y"}, {1, 4, 1, 1});
  EXPECT_EQ(r.ops["fused_conv"], 1);
  EXPECT_EQ(r.ops["add"], 1);
}

}  // namespace
}  // namespace onyx
