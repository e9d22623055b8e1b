// Importing an ONNX model for a training step: BatchNormalization exported
// for inference trains with batch statistics and reports its running
// statistics' next values (PyTorch's train() semantics); inference imports
// are unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include <onyx/runtime/session.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

void addInit(::onnx::GraphProto* g, const std::string& name, const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(static_cast<int>(Type::float32));
  t->add_dims(static_cast<int64_t>(v.size()));
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

void addValueInfo(::onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(Type::float32));
  for(auto d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if(d < 0) dim->set_dim_param("N");
    else dim->set_dim_value(d);
  }
}

const std::vector<float> kScale{1.5f, 0.5f}, kBias{0.25f, -1.f}, kMean{0.5f, -0.5f}, kVar{2.f, 0.75f};
const double kMomentum = 0.8, kEps = 1e-3;

// y = BatchNormalization(x [N, 2]) with an inference node (no training_mode).
std::shared_ptr<Model> bnModel(const std::string& dir) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("bn");
  addValueInfo(g->add_input(), "x", {-1, 2});
  addValueInfo(g->add_output(), "y", {-1, 2});
  addInit(g, "scale", kScale);
  addInit(g, "bias", kBias);
  addInit(g, "mean", kMean);
  addInit(g, "var", kVar);
  auto* n = g->add_node();
  n->set_op_type("BatchNormalization");
  n->set_name("bn");
  for(auto i : {"x", "scale", "bias", "mean", "var"}) n->add_input(i);
  n->add_output("y");
  auto* a = n->add_attribute();
  a->set_name("momentum");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(kMomentum));
  a = n->add_attribute();
  a->set_name("epsilon");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(kEps));
  std::string path = dir + "/bn.onnx";
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  f.close();
  return Model::load(path);
}

const std::vector<float> kX{1, -2, 3, 0.5f, -1, 4, 2, 1.5f};  // [4, 2], channel c = column c

struct BnTrainImport : ::testing::Test {
  std::string dir = std::filesystem::temp_directory_path() / ("onyx_bn_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

TEST_F(BnTrainImport, BatchStatisticsAndRunningStatistics) {
  auto model = bnModel(dir);
  auto graph = New<ExpressionGraph>();
  graph->setInference(false);
  HostValues in{{"x", HostValue::of(TensorBase::fromVector<float>({4, 2}, kX))}};
  ImportedGraph g = importGraph(*model, *graph, in, true);
  ASSERT_EQ(g.stateUpdates.size(), 2u);
  Expr y = g.spec.outputs.at(0).second;
  Expr loss = sum(y * y);  // any loss: the running statistics must get no gradient
  graph->forward();
  graph->backward(loss);

  std::vector<double> got;
  y->val()->get(got);
  for(int c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for(int n = 0; n < 4; ++n) m += kX[n * 2 + c] / 4.0;
    for(int n = 0; n < 4; ++n) v += (kX[n * 2 + c] - m) * (kX[n * 2 + c] - m) / 4.0;
    for(int n = 0; n < 4; ++n)
      EXPECT_NEAR(got[n * 2 + c], (kX[n * 2 + c] - m) / std::sqrt(v + kEps) * kScale[c] + kBias[c], 1e-5)
          << "sample " << n << " channel " << c;
    // Next running statistics: momentum-weighted, with the unbiased variance.
    std::vector<double> nextMean, nextVar;
    g.stateUpdates[0].second->val()->get(nextMean);
    g.stateUpdates[1].second->val()->get(nextVar);
    EXPECT_NEAR(nextMean[c], kMean[c] * kMomentum + m * (1 - kMomentum), 1e-6) << "channel " << c;
    EXPECT_NEAR(nextVar[c], kVar[c] * kMomentum + v * 4.0 / 3.0 * (1 - kMomentum), 1e-5) << "channel " << c;
  }
  EXPECT_EQ(g.stateUpdates[0].first->name(), "mean");
  EXPECT_EQ(g.stateUpdates[1].first->name(), "var");
  EXPECT_FALSE(g.stateUpdates[0].first->trainable());
  EXPECT_FALSE(g.stateUpdates[1].first->trainable());
  EXPECT_FALSE(g.stateUpdates[0].first->grad());
  EXPECT_TRUE(graph->params()->get("scale")->grad());

  // Kept: the params take the new values; the next build sees them.
  std::vector<double> want;
  g.stateUpdates[0].second->val()->get(want);
  applyStateUpdates(g);
  std::vector<double> now;
  graph->params()->get("mean")->val()->get(now);
  EXPECT_EQ(now, want);
}

TEST_F(BnTrainImport, InferenceUsesRunningStatistics) {
  auto model = bnModel(dir);
  for(bool trainable : {false, true}) {
    auto graph = New<ExpressionGraph>();
    graph->setInference(true);  // evaluation: running statistics even with trainable params
    HostValues in{{"x", HostValue::of(TensorBase::fromVector<float>({4, 2}, kX))}};
    ImportedGraph g = importGraph(*model, *graph, in, trainable);
    EXPECT_TRUE(g.stateUpdates.empty());
    Expr y = g.spec.outputs.at(0).second;
    y->keepValue();
    graph->forward();
    std::vector<double> got;
    y->val()->get(got);
    for(int i = 0; i < 8; ++i) {
      int c = i % 2;
      EXPECT_NEAR(got[i], (kX[i] - kMean[c]) / std::sqrt(kVar[c] + kEps) * kScale[c] + kBias[c], 1e-5) << i;
    }
  }
}

TEST_F(BnTrainImport, OneValuePerChannelIsAnError) {
  auto model = bnModel(dir);
  auto graph = New<ExpressionGraph>();
  graph->setInference(false);
  HostValues in{{"x", HostValue::of(TensorBase::fromVector<float>({1, 2}, {1, 2}))}};
  try {
    importGraph(*model, *graph, in, true);
    FAIL() << "expected an error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'bn' (BatchNormalization"), std::string::npos) << msg;
    EXPECT_NE(msg.find("more than one value per channel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1x2"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace onyx
