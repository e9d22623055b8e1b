// Optimizers against the update rules written out by hand (in double) for a
// param whose gradient we control: loss = sum(g0 * w) has dloss/dw = g0.
#include <gtest/gtest.h>

#include <cmath>

#include <onyx/onyx.h>

namespace onyx {
namespace {

struct Fixture {
  Ptr<ExpressionGraph> g = New<ExpressionGraph>();
  Expr w;
  std::vector<float> grad{0.5f, -2.0f, 0.0f};
  std::vector<float> init{1.0f, 2.0f, -3.0f};
  // One forward/backward; the gradient of w is exactly `grad`.
  void step(const Ptr<OptimizerBase>& opt) {
    g->clear();
    w = g->param("w", {3}, inits::fromVector(init));
    auto loss = sum(w * g->constant({3}, inits::fromVector(grad)));
    g->forward();
    g->backward(loss);
    opt->update(g);
  }
  std::vector<float> value() { return w->val()->toVector<float>(); }
};

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for(size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Optimizers, SgdWithMomentum) {
  Fixture f;
  OptimizerOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  auto opt = Optimizer<Sgd>(o);
  std::vector<double> w{1, 2, -3}, v{0, 0, 0};
  for(int s = 0; s < 3; ++s) {
    f.step(opt);
    for(int i = 0; i < 3; ++i) {
      v[i] = 0.9 * v[i] + f.grad[i];
      w[i] -= 0.1 * v[i];
    }
  }
  expectNear(f.value(), w);
}

TEST(Optimizers, Adagrad) {
  Fixture f;
  auto opt = Optimizer<Adagrad>(0.5);
  std::vector<double> w{1, 2, -3}, acc{0, 0, 0};
  for(int s = 0; s < 2; ++s) {
    f.step(opt);
    for(int i = 0; i < 3; ++i) {
      acc[i] += double(f.grad[i]) * f.grad[i];
      w[i] -= 0.5 * f.grad[i] / (std::sqrt(acc[i]) + 1e-10);
    }
  }
  expectNear(f.value(), w);
}

TEST(Optimizers, AdamBiasCorrected) {
  Fixture f;
  auto opt = Optimizer<Adam>(0.01);
  std::vector<double> w{1, 2, -3}, m{0, 0, 0}, v{0, 0, 0};
  for(int t = 1; t <= 3; ++t) {
    f.step(opt);
    for(int i = 0; i < 3; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * f.grad[i];
      v[i] = 0.999 * v[i] + 0.001 * double(f.grad[i]) * f.grad[i];
      double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
      w[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  expectNear(f.value(), w);
  // The first Adam step moves each param by about lr in the gradient's sign.
  EXPECT_NEAR(f.value()[2], -3.0, 1e-6);  // zero gradient: no move
}

TEST(Optimizers, AdamWDecouplesWeightDecay) {
  Fixture f;
  f.grad = {0, 0, 0};  // only the decay acts
  OptimizerOptions o;
  o.lr = 0.1;
  o.weightDecay = 0.5;
  auto opt = Optimizer<AdamW>(o);
  f.step(opt);
  expectNear(f.value(), {1 * (1 - 0.05), 2 * (1 - 0.05), -3 * (1 - 0.05)});
  // Plain Adam with L2 would instead move by about lr in the sign of w.
  Fixture a;
  a.grad = {0, 0, 0};
  a.step(Optimizer<Adam>(o));
  EXPECT_NEAR(a.value()[0], 1 - 0.1, 1e-4);
}

TEST(Optimizers, GlobalNormClipping) {
  Fixture f;
  f.grad = {3, 4, 0};  // norm 5
  OptimizerOptions o;
  o.lr = 1.0;
  o.clipNorm = 1.0;
  auto opt = Optimizer<Sgd>(o);
  f.step(opt);
  expectNear(f.value(), {1 - 0.6, 2 - 0.8, -3});
  EXPECT_EQ(opt->steps(), 1u);
}

TEST(Optimizers, UpdateWithoutBackwardIsAnError) {
  auto g = New<ExpressionGraph>();
  g->param("w", {2}, inits::ones());
  try {
    Optimizer<Sgd>(0.1)->update(g);
    FAIL() << "expected an error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("param 'w' has no gradient"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace onyx
