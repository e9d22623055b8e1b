// Models built with the graph API: the MLP learns two spirals, its graph
// renders with graphviz, its params round-trip through .npz (also via numpy),
// and checkpointing a deep MLP lowers peak memory with identical gradients.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "mlp.h"

namespace onyx {
namespace {

std::string tmpPath(const std::string& name) { return ::testing::TempDir() + "onyx_" + name; }

TEST(Models, MlpLearnsTwoSpirals) {
  auto data = models::twoSpirals(200, 0.02, 1);
  models::MlpConfig cfg;
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  models::TrainOptions opt;
  double before = models::accuracy(g, data, cfg);
  double loss = models::trainMlp(g, data, cfg, opt);
  double acc = models::accuracy(g, data, cfg);
  // Stated target: at least 95% training accuracy after 300 Adam steps
  // (chance is 50%; a linear model cannot separate the spirals).
  EXPECT_GE(acc, 0.95) << "accuracy before training " << before << ", final loss " << loss;
  EXPECT_LT(loss, 0.2);

  // Params round-trip: a fresh graph that loads them scores the same.
  std::string file = tmpPath("spirals.npz");
  g->save(file);
  auto fresh = New<ExpressionGraph>();
  fresh->load(file);
  EXPECT_EQ(models::accuracy(fresh, data, cfg), acc);

  // numpy reads what we wrote, with the same values.
  auto W = g->params()->get("mlp.l0.W");
  ASSERT_TRUE(W);
  std::string cmd = "python3 -c \"import numpy as np; d = np.load('" + file +
                    "'); w = d['mlp.l0.W']; assert w.shape == (2, 32) and w.dtype == np.float32, (w.shape, w.dtype); "
                    "print(repr(float(w[1, 3])))\" > " + file + ".out";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "python3 with numpy is required (tools/dev.sh installs it)";
  std::ifstream in(file + ".out");
  double v = 0;
  in >> v;
  EXPECT_EQ(static_cast<float>(v), W->val()->toVector<float>()[1 * 32 + 3]);
}

TEST(Models, GraphvizRendersWithDot) {
  auto data = models::twoSpirals(10, 0.0, 2);
  models::MlpConfig cfg;
  auto g = New<ExpressionGraph>();
  auto x = g->constant({data.n, data.features}, inits::fromVector(data.x));
  auto loss = mean(cross_entropy(models::mlpLogits(g, x, cfg), g->indices(data.y)));
  (void)loss;
  std::string dot = tmpPath("mlp.dot"), svg = tmpPath("mlp.svg");
  std::ofstream(dot) << g->graphviz();
  ASSERT_EQ(std::system(("dot -Tsvg " + dot + " -o " + svg).c_str()), 0)
      << "graphviz 'dot' must render the output (tools/dev.sh installs graphviz)";
  std::ifstream s(svg);
  std::string content((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  EXPECT_NE(content.find("<svg"), std::string::npos);
  EXPECT_NE(content.find("affine"), std::string::npos);
  EXPECT_NE(content.find("mlp.l0.W"), std::string::npos);
}

// A deep MLP: checkpointing every 4th activation keeps fewer activations
// alive; backward recomputes the rest and gets the same gradients.
TEST(Models, CheckpointingDeepMlpLowersPeakMemory) {
  auto run = [](bool ckpt) {
    auto g = New<ExpressionGraph>();
    g->setCheckpointing(ckpt);
    g->setSeed(3);
    auto x = g->constant({128, 64}, inits::uniform(-1, 1));
    Expr h = x;
    for(int i = 0; i < 16; ++i) {
      auto W = g->param("W" + std::to_string(i), {64, 64}, inits::glorotUniform());
      auto b = g->param("b" + std::to_string(i), {1, 64}, inits::zeros());
      h = tanh(affine(h, W, b));
      if(ckpt && i % 4 == 3) h = checkpoint(h);
    }
    auto loss = mean(sum(h * h, -1));
    g->resetPeakMemory();
    g->forward();
    g->backward(loss);
    return std::make_pair(g->memoryStats().peakBytes, g->params()->get("W0")->grad()->toVector<float>());
  };
  auto plain = run(false), ckpt = run(true);
  EXPECT_EQ(plain.second, ckpt.second);
  std::printf("deep MLP peak workspace: %zu B plain, %zu B checkpointed\n", plain.first, ckpt.first);
  EXPECT_LT(double(ckpt.first), 0.75 * double(plain.first));
}

}  // namespace
}  // namespace onyx
