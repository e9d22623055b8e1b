// GradAccumulator: micro-batches weighted by their share of the step give
// the step of the whole batch.
#include <gtest/gtest.h>

#include <onyx/onyx.h>

namespace onyx {
namespace {

const std::vector<float> kX{0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 1.f, -2.f, 0.f, 0.5f, 3.f, -1.5f};  // [6, 2]
const std::vector<float> kY{1.f, -0.5f, 2.5f, 0.f, 1.f, -1.f};                                            // [6, 1]

// Adam on y = tanh(x W1) W2 after one step made of `chunks` (row ranges).
std::vector<double> oneStep(const std::vector<std::pair<int, int>>& chunks) {
  auto g = New<ExpressionGraph>();
  g->setSeed(5);
  OptimizerOptions o;
  o.lr = 0.05;
  auto opt = Optimizer<Adam>(o);
  GradAccumulator acc;
  for(auto [a, b] : chunks) {
    g->clear();
    Expr w1 = g->param("W1", {2, 3}, inits::glorotUniform());
    Expr w2 = g->param("W2", {3, 1}, inits::glorotUniform());
    Expr x = g->constant(TensorBase::fromVector<float>({b - a, 2}, std::vector<float>(kX.begin() + 2 * a, kX.begin() + 2 * b)));
    Expr y = g->constant(TensorBase::fromVector<float>({b - a, 1}, std::vector<float>(kY.begin() + a, kY.begin() + b)));
    Expr loss = mseLoss(matmul(tanh(matmul(x, w1)), w2), y);
    g->forward();
    g->backward(loss);
    acc.add(*g, double(b - a) / 6.0);
  }
  EXPECT_EQ(acc.microBatches(), chunks.size());
  acc.apply(*g);
  EXPECT_EQ(acc.microBatches(), 0u);
  opt->update(*g);
  std::vector<double> all, v;
  for(auto name : {"W1", "W2"}) {
    g->params()->get(name)->val()->get(v);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(GradAccumulator, MicroBatchesEqualTheWholeBatch) {
  auto whole = oneStep({{0, 6}});
  auto parts = oneStep({{0, 4}, {4, 6}});
  auto three = oneStep({{0, 1}, {1, 3}, {3, 6}});
  ASSERT_EQ(whole.size(), 9u);
  for(size_t i = 0; i < whole.size(); ++i) {
    EXPECT_NEAR(parts[i], whole[i], 1e-6) << i;
    EXPECT_NEAR(three[i], whole[i], 1e-6) << i;
  }
  // And the step did something: Adam moves every weight by about lr.
  auto g = New<ExpressionGraph>();
  g->setSeed(5);
  std::vector<double> init, v;
  for(auto [name, shape] : {std::make_pair("W1", Shape({2, 3})), std::make_pair("W2", Shape({3, 1}))}) {
    g->param(name, shape, inits::glorotUniform())->val()->get(v);
    init.insert(init.end(), v.begin(), v.end());
  }
  for(size_t i = 0; i < whole.size(); ++i) EXPECT_NEAR(std::abs(whole[i] - init[i]), 0.05, 0.01) << i;
}

TEST(GradAccumulator, ApplyWithoutMicroBatchesIsAnError) {
  auto g = New<ExpressionGraph>();
  GradAccumulator acc;
  EXPECT_THROW(acc.apply(*g), Error);
}

}  // namespace
}  // namespace onyx
