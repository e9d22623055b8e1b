// Mixed precision training: float16/bfloat16 params with a float32 master
// copy in the optimizer, and dynamic loss scaling (GradScaler). Expected
// values are worked out here in float/double from the update rules, not
// read back from the code under test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include <onyx/onyx.h>

namespace onyx {
namespace {

// loss = sum(w * c): the gradient of w is exactly c (in w's type).
struct Linear {
  Ptr<ExpressionGraph> g = New<ExpressionGraph>();
  Type type;
  std::vector<float> init, c;
  Expr w;
  Linear(Type t, std::vector<float> w0, std::vector<float> c0) : type(t), init(std::move(w0)), c(std::move(c0)) {}
  Expr build() {
    g->clear();
    Shape s{static_cast<int64_t>(init.size())};
    w = g->param("w", s, inits::fromVector(init), type);
    return cast(sum(w * g->constant(s, inits::fromVector(c), type)), Type::float32);
  }
  void backward(Expr loss) {
    g->forward();
    g->backward(loss);
  }
};

template <class Half>
float roundTo(double v) {
  return static_cast<float>(Half(static_cast<float>(v)));
}

template <class Half>
void masterKeepsSmallUpdates(Type type, float c, int steps) {
  // Plain half updates: w = 1 - c rounds back to 1 every step.
  // With the master copy: the master walks down by c each step (in float),
  // and the param is the master rounded to the half type.
  for(bool withMaster : {true, false}) {
    Linear m(type, {1.0f}, {c});
    OptimizerOptions o;
    o.lr = 1.0;
    o.masterWeights = withMaster;
    auto opt = Optimizer<Sgd>(o);
    float cHalf = roundTo<Half>(c);
    float master = 1.0f;
    for(int s = 0; s < steps; ++s) {
      m.backward(m.build());
      opt->update(*m.g);
      master = static_cast<float>(static_cast<double>(master) - cHalf);
    }
    float got = m.w->val()->template get<float>(0);
    if(withMaster) {
      EXPECT_EQ(got, roundTo<Half>(master)) << "master " << master;
      EXPECT_LT(got, 1.0f);
      ASSERT_TRUE(opt->state().count("w/master"));
      EXPECT_EQ(opt->state()["w/master"]->type(), Type::float32);
      EXPECT_FLOAT_EQ(opt->state()["w/master"]->get<float>(0), master);
    } else {
      EXPECT_EQ(got, 1.0f) << "without a master copy the update is below the type's spacing at 1";
      EXPECT_FALSE(opt->state().count("w/master"));
    }
  }
}

TEST(MixedPrecision, Float16MasterKeepsUpdatesBelowTheSpacing) { masterKeepsSmallUpdates<float16>(Type::float16, 1e-4f, 10); }
TEST(MixedPrecision, Bfloat16MasterKeepsUpdatesBelowTheSpacing) {
  masterKeepsSmallUpdates<bfloat16>(Type::bfloat16, 1e-3f, 10);
}

TEST(MixedPrecision, MasterStartsFromTheParamAndAdamMatchesFloat32) {
  // Adam on a float16 param with a master copy follows the float32 run on
  // the same (float16-representable) values to float16 rounding.
  std::vector<float> w0{0.5f, -1.25f, 2.0f}, c{0.25f, -0.5f, 0.125f};
  Linear h(Type::float16, w0, c), f(Type::float32, w0, c);
  auto oh = Optimizer<Adam>(0.01), of = Optimizer<Adam>(0.01);
  for(int s = 0; s < 20; ++s) {
    h.backward(h.build());
    oh->update(*h.g);
    f.backward(f.build());
    of->update(*f.g);
  }
  for(int64_t i = 0; i < 3; ++i) {
    float want = f.w->val()->get<float>(i);
    EXPECT_NEAR(oh->state()["w/master"]->get<float>(i), want, 1e-6) << i;
    EXPECT_EQ(h.w->val()->get<float>(i), roundTo<float16>(oh->state()["w/master"]->get<float>(i))) << i;
    EXPECT_NE(want, w0[static_cast<size_t>(i)]);
  }
}

TEST(MixedPrecision, CheckpointResumesTheMasterCopy) {
  // 6 steps straight == 3 steps, save, load into a fresh optimizer, 3 steps:
  // the master copy (not the float16 param) carries the small updates over.
  auto run = [](int first, bool resume) {
    Linear m(Type::float16, {1.0f}, {1e-4f});
    auto opt = Optimizer<Sgd>(1.0);
    for(int s = 0; s < first; ++s) {
      m.backward(m.build());
      opt->update(*m.g);
    }
    if(resume) {
      std::string path = ::testing::TempDir() + "onyx_mixed_" + std::to_string(::getpid()) + ".npz";
      saveCheckpoint(path, *m.g, *opt, TrainState());
      opt = Optimizer<Sgd>(1.0);
      loadCheckpoint(path, *m.g, *opt);
      std::remove(path.c_str());
      EXPECT_TRUE(opt->state().count("w/master"));
      for(int s = 0; s < first; ++s) {
        m.backward(m.build());
        opt->update(*m.g);
      }
    }
    return opt->state()["w/master"]->get<float>(0);
  };
  float straight = run(6, false), resumed = run(3, true);
  EXPECT_EQ(resumed, straight);
  EXPECT_LT(straight, 1.0f - 5e-4f);
}

TEST(GradScaler, SkipsOverflowingStepsBacksOffThenStepsUnscaled) {
  // float16 gradients of a float32 loss scaled by S: S * c overflows float16
  // (max 65504) for S = 65536 (the cast's gradient itself) and S = 32768
  // (32768 * 2); S = 16384 gives finite gradients, unscaled by the step.
  Linear m(Type::float16, {1.0f, 2.0f}, {2.0f, -1.0f});
  auto opt = Optimizer<Sgd>(0.25);
  GradScaler scaler;
  EXPECT_EQ(scaler.scaleFactor(), 65536.0);
  const double wantScale[] = {32768.0, 16384.0, 16384.0};
  const bool wantStep[] = {false, false, true};
  for(int s = 0; s < 3; ++s) {
    m.backward(scaler.scale(m.build()));
    EXPECT_EQ(scaler.step(*opt, *m.g), wantStep[s]) << "step " << s;
    EXPECT_EQ(scaler.scaleFactor(), wantScale[s]) << "step " << s;
    if(!wantStep[s]) {
      EXPECT_EQ(m.w->val()->get<float>(0), 1.0f);
      EXPECT_EQ(m.w->val()->get<float>(1), 2.0f);
      EXPECT_FALSE(std::isfinite(scaler.lastNorm()));
    }
  }
  EXPECT_EQ(scaler.skippedSteps(), 2u);
  EXPECT_EQ(opt->steps(), 1u);  // skipped steps do not count (Adam's bias correction)
  EXPECT_EQ(m.w->val()->get<float>(0), 1.0f - 0.25f * 2.0f);
  EXPECT_EQ(m.w->val()->get<float>(1), 2.0f + 0.25f * 1.0f);
  EXPECT_DOUBLE_EQ(scaler.lastNorm(), std::sqrt(2.0 * 2.0 + 1.0 * 1.0));
}

TEST(GradScaler, GrowsAfterTheIntervalOfFiniteSteps) {
  Linear m(Type::float32, {1.0f}, {0.5f});
  auto opt = Optimizer<Sgd>(0.1);
  GradScalerOptions o;
  o.initScale = 8;
  o.growthInterval = 3;
  GradScaler scaler(o);
  const double want[] = {8, 8, 16, 16, 16, 32};
  for(int s = 0; s < 6; ++s) {
    m.backward(scaler.scale(m.build()));
    EXPECT_TRUE(scaler.step(*opt, *m.g));
    EXPECT_EQ(scaler.scaleFactor(), want[s]) << "step " << s;
  }
  EXPECT_NEAR(m.w->val()->get<float>(0), 1.0 - 6 * 0.1 * 0.5, 1e-6);
}

TEST(GradScaler, NanGradientSkipsAndBadOptionsAreErrors) {
  Linear m(Type::float32, {1.0f}, {std::numeric_limits<float>::quiet_NaN()});
  auto opt = Optimizer<Adam>(0.1);
  GradScaler scaler;
  m.backward(scaler.scale(m.build()));
  EXPECT_FALSE(scaler.step(*opt, *m.g));
  EXPECT_EQ(m.w->val()->get<float>(0), 1.0f);
  EXPECT_TRUE(opt->state().empty()) << "a skipped step creates no state";
  EXPECT_EQ(scaler.scaleFactor(), 32768.0);

  GradScalerOptions bad;
  bad.backoffFactor = 1.5;
  EXPECT_THROW(GradScaler{bad}, Error);
  bad = GradScalerOptions();
  bad.initScale = 0;
  EXPECT_THROW(GradScaler{bad}, Error);
}

TEST(MixedPrecision, Float16RegressionTrainsWithScalerLikeFloat32) {
  // y = x . W + b fitted in float16 (loss in float32, scaled) and in float32:
  // both reach a small loss and end near each other.
  const int n = 16, d = 3;
  std::vector<float> x(n * d), y(n);
  for(int i = 0; i < n; ++i) {
    for(int j = 0; j < d; ++j) x[i * d + j] = static_cast<float>(((i * 7 + j * 3) % 11) - 5) / 8.0f;
    y[i] = 0.5f * x[i * d] - 0.25f * x[i * d + 1] + 0.75f * x[i * d + 2] + 0.125f;
  }
  auto run = [&](Type t, bool scaled) {
    auto g = New<ExpressionGraph>();
    auto opt = Optimizer<Adam>(0.05);
    GradScaler scaler;
    double first = 0, last = 0;
    for(int s = 0; s < 150; ++s) {
      g->clear();
      auto W = g->param("W", {d, 1}, inits::zeros(), t);
      auto b = g->param("b", {1}, inits::zeros(), t);
      auto pred = cast(matmul(g->constant({n, d}, inits::fromVector(x), t), W) + b, Type::float32);
      auto loss = mseLoss(pred, g->constant({n, 1}, inits::fromVector(y)));
      g->forward();
      double l = loss->val()->scalar<float>();
      if(s == 0) first = l;
      last = l;
      if(scaled) {
        g->backward(scaler.scale(loss));
        scaler.step(*opt, *g);
      } else {
        g->backward(loss);
        opt->update(*g);
      }
    }
    return std::make_pair(first, last);
  };
  auto f32 = run(Type::float32, false);
  auto f16 = run(Type::float16, true);
  // Seen: 0.111 -> 9e-9 (float32) and -> 4e-8 (float16, its rounding).
  EXPECT_LT(f32.second, 1e-6 * f32.first);
  EXPECT_LT(f16.second, 1e-5 * f16.first);
  EXPECT_NEAR(f16.first, f32.first, 1e-3);
}

}  // namespace
}  // namespace onyx
