// Losses (src/train/losses.h) against plain double references written out
// here, their gradients against central differences in float64, the shape
// and label errors; the learning-rate schedule, glob patterns and freezing
// (src/train/schedule.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <onyx/onyx.h>
#include <onyx/train/losses.h>
#include <onyx/train/schedule.h>

namespace onyx {
namespace {

using Vec = std::vector<double>;

// The message of the onyx::Error thrown by fn, or "" if none.
std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch(const Error& e) {
    return e.what();
  }
  return "";
}

double valueOf(Expr e) { return e->val()->getAsDouble(0); }

// Builds loss(param "x" of shape/values, constant target), checks its value
// against `want`, and its gradient against central differences of the
// forward pass, all in float64.
void checkLoss(const Shape& shape, const Vec& x, const Vec& target, double want,
               const std::function<Expr(Expr, Expr)>& loss, double gradTol = 1e-6) {
  auto g = New<ExpressionGraph>();
  g->setDefaultElementType(Type::float64);
  Expr p = g->param("x", shape, inits::fromVector(x), Type::float64);
  Expr t = g->constant(shape, inits::fromVector(target), Type::float64);
  Expr l = loss(p, t);
  ASSERT_EQ(l->shape(), Shape());
  g->forward();
  EXPECT_NEAR(valueOf(l), want, 1e-10 * std::max(1.0, std::fabs(want)));
  g->backward(l);
  std::vector<double> grad = p->grad()->toVector<double>();
  ASSERT_EQ(grad.size(), x.size());
  double* w = p->val()->data<double>();
  const double h = 1e-6;
  for(size_t i = 0; i < x.size(); ++i) {
    double keep = w[i];
    w[i] = keep + h;
    g->forward();
    double up = valueOf(l);
    w[i] = keep - h;
    g->forward();
    double down = valueOf(l);
    w[i] = keep;
    EXPECT_NEAR(grad[i], (up - down) / (2 * h), gradTol) << "element " << i;
  }
}

const Vec kPred{0.5, -1.25, 2.0, 0.0, 3.5, -0.75};
const Vec kTarget{1.0, -1.0, 0.5, 0.25, 3.0, 1.0};

TEST(Losses, MseValueAndGradient) {
  double ref = 0;
  for(size_t i = 0; i < kPred.size(); ++i) ref += (kPred[i] - kTarget[i]) * (kPred[i] - kTarget[i]);
  ref /= static_cast<double>(kPred.size());
  checkLoss({2, 3}, kPred, kTarget, ref, mseLoss);
}

TEST(Losses, L1ValueAndGradient) {
  double ref = 0;
  for(size_t i = 0; i < kPred.size(); ++i) ref += std::fabs(kPred[i] - kTarget[i]);
  ref /= static_cast<double>(kPred.size());
  checkLoss({2, 3}, kPred, kTarget, ref, l1Loss);  // no pred == target: differentiable everywhere here
}

TEST(Losses, BceValueAndGradient) {
  Vec p{0.1, 0.9, 0.35, 0.5, 0.999, 0.02}, t{0, 1, 1, 0.3, 1, 0};
  double ref = 0;
  for(size_t i = 0; i < p.size(); ++i) ref -= t[i] * std::log(p[i]) + (1 - t[i]) * std::log(1 - p[i]);
  ref /= static_cast<double>(p.size());
  checkLoss({6}, p, t, ref, bceLoss, 1e-4);
}

TEST(Losses, BceClampsLogAtProbabilityZeroAndOne) {
  auto g = New<ExpressionGraph>();
  Expr p = g->constant({2}, inits::fromVector(Vec{0.0, 1.0}), Type::float64);
  Expr t = g->constant({2}, inits::fromVector(Vec{1.0, 0.0}), Type::float64);
  Expr l = bceLoss(p, t);
  g->forward();
  EXPECT_NEAR(valueOf(l), 100.0, 1e-9);  // each term clamped to -log = 100
}

TEST(Losses, BceWithLogitsValueGradientAndStability) {
  Vec x{-3.0, 0.0, 0.7, 2.5, -0.2, 1.0}, t{0, 1, 1, 0.25, 0, 1};
  double ref = 0;
  for(size_t i = 0; i < x.size(); ++i) {
    double s = 1 / (1 + std::exp(-x[i]));
    ref -= t[i] * std::log(s) + (1 - t[i]) * std::log(1 - s);
  }
  ref /= static_cast<double>(x.size());
  checkLoss({2, 3}, x, t, ref, bceWithLogitsLoss);

  // Large logits: the loss stays finite and exact (|x| for the wrong sign, ~0 for the right one).
  auto g = New<ExpressionGraph>();
  Expr lx = g->constant({2}, inits::fromVector(std::vector<float>{200.f, -200.f}), Type::float32);
  Expr lt = g->constant({2}, inits::fromVector(std::vector<float>{0.f, 0.f}), Type::float32);
  Expr l = bceWithLogitsLoss(lx, lt);
  g->forward();
  EXPECT_NEAR(valueOf(l), 100.0, 1e-3);
}

// -log_softmax(row)[label], in double.
double ceRef(const Vec& row, int64_t label) {
  double mx = row[0];
  for(double v : row) mx = std::max(mx, v);
  double s = 0;
  for(double v : row) s += std::exp(v - mx);
  return -(row[static_cast<size_t>(label)] - mx - std::log(s));
}

TEST(Losses, CrossEntropyLastAxis) {
  Vec logits{1.0, 2.0, 0.5, -1.0, 0.0, 3.0, 0.25, 0.25, -2.0, 4.0, 1.5, 0.0};  // 3 x 4
  std::vector<int64_t> labels{1, 3, 0};
  double ref = 0;
  for(size_t r = 0; r < 3; ++r) ref += ceRef(Vec(logits.begin() + 4 * r, logits.begin() + 4 * r + 4), labels[r]);
  ref /= 3;
  checkLoss({3, 4}, logits, Vec(12, 0.0), ref, [&](Expr x, Expr) {
    return crossEntropyLoss(x, x->graph()->indices(labels));
  });
}

TEST(Losses, CrossEntropyClassAxisOne) {
  // logits 2 x 3 x 2 (batch, classes, positions); labels 2 x 2.
  Vec logits{0.1, -0.4, 1.2, 0.8, -0.5, 2.0, 0.3, 0.0, -1.0, 1.0, 0.7, -0.2};
  std::vector<int64_t> labels{2, 0, 1, 1};
  double ref = 0;
  for(size_t b = 0; b < 2; ++b)
    for(size_t q = 0; q < 2; ++q) {
      Vec row;
      for(size_t c = 0; c < 3; ++c) row.push_back(logits[b * 6 + c * 2 + q]);
      ref += ceRef(row, labels[b * 2 + q]);
    }
  ref /= 4;
  checkLoss({2, 3, 2}, logits, Vec(12, 0.0), ref, [&](Expr x, Expr) {
    Expr l = x->graph()->constant({2, 2}, inits::fromVector(labels), Type::int64);
    return crossEntropyLoss(x, l, 1);
  });
}

TEST(Losses, WrongShapesAreErrorsNamingBothShapes) {
  auto g = New<ExpressionGraph>();
  Expr p = g->param("p", {4, 3}, inits::fromValue(0.5));
  Expr t = g->constant({4, 2}, inits::fromValue(0.0));
  EXPECT_EQ(errorOf([&] { mseLoss(p, t); }), "mse loss: prediction 4x3 and target 4x2 differ");
  EXPECT_EQ(errorOf([&] { l1Loss(p, t); }), "l1 loss: prediction 4x3 and target 4x2 differ");
  EXPECT_EQ(errorOf([&] { bceLoss(p, t); }), "bce loss: probabilities 4x3 and target 4x2 differ");
  EXPECT_EQ(errorOf([&] { bceWithLogitsLoss(p, t); }), "bce-with-logits loss: logits 4x3 and target 4x2 differ");
  Expr t64 = g->constant({4, 3}, inits::fromValue(0.0), Type::float64);
  EXPECT_NE(errorOf([&] { mseLoss(p, t64); }).find("prediction is float32 but target is float64"), std::string::npos);

  std::string e = errorOf([&] { crossEntropyLoss(p, g->indices(std::vector<int64_t>{0, 1, 2})); });
  EXPECT_NE(e.find("cross-entropy loss: labels 3 do not match logits 4x3"), std::string::npos) << e;
  EXPECT_NE(e.find("expected labels 4"), std::string::npos) << e;
  e = errorOf([&] { crossEntropyLoss(p, g->constant({4}, inits::fromValue(0.0), Type::float32)); });
  EXPECT_NE(e.find("labels must be int64"), std::string::npos) << e;
  e = errorOf([&] { crossEntropyLoss(p, g->indices(std::vector<int64_t>{0, 1, 2, 0}), 2); });
  EXPECT_NE(e.find("class axis 2 is out of range for logits 4x3"), std::string::npos) << e;
  e = errorOf([&] { crossEntropyLoss(g->scalar(1.0, Type::float32), g->indices(std::vector<int64_t>{0})); });
  EXPECT_NE(e.find("have no class axis"), std::string::npos) << e;
  e = errorOf([&] { mseLoss(Expr(), t); });
  EXPECT_NE(e.find("mse loss: the prediction is a null"), std::string::npos) << e;
}

TEST(Losses, OutOfRangeLabels) {
  // The host-side check names value, index and the class count.
  auto labels = TensorBase::create({5}, Type::int64);
  labels->set(std::vector<int64_t>{0, 4, 2, 7, 1});
  EXPECT_EQ(errorOf([&] { checkLabels(*labels, 5); }),
            "label 7 at index 3 is out of range for 5 classes; labels must be in [0, 5)");
  EXPECT_EQ(errorOf([&] { checkLabels(*labels, 8); }), "");
  labels->set(std::vector<int64_t>{0, 1, 2, 3, -1});
  EXPECT_EQ(errorOf([&] { checkLabels(*labels, 5); }),
            "label -1 at index 4 is out of range for 5 classes; labels must be in [0, 5)");
  auto two = TensorBase::create({2, 3}, Type::int32);
  two->set(std::vector<int32_t>{0, 1, 2, 0, 3, 1});
  EXPECT_EQ(errorOf([&] { checkLabels(*two, 3); }),
            "label 3 at index 4 (position [1, 1]) is out of range for 3 classes; labels must be in [0, 3)");
  auto f = TensorBase::create({2}, Type::float32);
  EXPECT_NE(errorOf([&] { checkLabels(*f, 3); }).find("integer tensor"), std::string::npos);

  // In the graph, the cross_entropy kernel rejects the label when it runs.
  auto g = New<ExpressionGraph>();
  Expr x = g->param("x", {2, 5}, inits::fromValue(0.1));
  Expr l = crossEntropyLoss(x, g->indices(std::vector<int64_t>{1, 7}));
  std::string e = errorOf([&] { g->forward(); });
  EXPECT_NE(e.find("label 7"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range for 5 classes"), std::string::npos) << e;
  (void)l;
}

// Gradient accumulation with today's API: backward() overwrites each param's
// gradient, so the caller sums them into its own tensors and writes the mean
// back into p->grad() before update(). Two half-batches then give the same
// step as the full batch.
TEST(Losses, GradientAccumulationThroughParamGradTensors) {
  Vec xs{1.0, -2.0, 0.5, 3.0}, ys{2.0, -3.0, 1.5, 5.0};
  auto run = [&](const std::vector<std::pair<size_t, size_t>>& chunks) {
    auto g = New<ExpressionGraph>();
    g->setDefaultElementType(Type::float64);
    OptimizerOptions o;
    o.lr = 0.1;
    auto opt = Optimizer<Sgd>(o);
    Tensor acc;
    Expr w;
    for(auto& c : chunks) {
      g->clear();
      w = g->param("w", {1}, inits::fromValue(0.5), Type::float64);
      size_t n = c.second - c.first;
      Expr x = g->constant({static_cast<int64_t>(n)}, inits::fromVector(Vec(xs.begin() + c.first, xs.begin() + c.second)));
      Expr y = g->constant({static_cast<int64_t>(n)}, inits::fromVector(Vec(ys.begin() + c.first, ys.begin() + c.second)));
      Expr loss = mseLoss(x * w, y);
      g->forward();
      g->backward(loss);
      if(!acc) {
        acc = TensorBase::create(w->grad()->shape(), Type::float64);
        acc->set(0.0);
      }
      for(int64_t i = 0; i < acc->size(); ++i)
        acc->data<double>()[i] += w->grad()->getAsDouble(i) / static_cast<double>(chunks.size());
    }
    w->grad()->copyFrom(*acc);
    opt->update(g);
    return w->val()->getAsDouble(0);
  };
  double full = run({{0, 4}});
  double accumulated = run({{0, 2}, {2, 4}});
  // Hand reference: w - lr * mean(2 x (x w - y)) with w = 0.5.
  double grad = 0;
  for(size_t i = 0; i < 4; ++i) grad += 2 * xs[i] * (xs[i] * 0.5 - ys[i]);
  grad /= 4;
  EXPECT_NEAR(full, 0.5 - 0.1 * grad, 1e-12);
  EXPECT_NEAR(accumulated, full, 1e-12);
}

TEST(Schedule, WarmupThenConstant) {
  LrSchedule s(0.1, 4);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.025);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.05);
  EXPECT_DOUBLE_EQ(s.lr(3), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(4), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(1000), 0.1);
  EXPECT_DOUBLE_EQ(LrSchedule(0.3).lr(0), 0.3);  // no warmup
}

TEST(Schedule, LinearDecayToFloor) {
  LrSchedule s(1.0, 2, LrSchedule::Decay::Linear, 12, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(2), 1.0);
  EXPECT_NEAR(s.lr(7), 1.0 + (0.1 - 1.0) * 0.5, 1e-15);
  EXPECT_NEAR(s.lr(11), 1.0 + (0.1 - 1.0) * 0.9, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(12), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(50), 0.1);
}

TEST(Schedule, CosineDecay) {
  LrSchedule s(0.2, 0, LrSchedule::Decay::Cosine, 8, 0.0);
  const double pi = std::acos(-1.0);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.2);
  EXPECT_NEAR(s.lr(2), 0.2 * 0.5 * (1 + std::cos(pi * 0.25)), 1e-15);
  EXPECT_NEAR(s.lr(4), 0.1, 1e-15);
  EXPECT_NEAR(s.lr(6), 0.2 * 0.5 * (1 + std::cos(pi * 0.75)), 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(8), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(9), 0.0);
  LrSchedule floor(0.2, 3, LrSchedule::Decay::Cosine, 5, 0.05);
  EXPECT_NEAR(floor.lr(4), 0.05 + 0.15 * 0.5 * (1 + std::cos(pi * 0.5)), 1e-15);
}

TEST(Schedule, BadSettingsAreErrors) {
  EXPECT_NE(errorOf([] { LrSchedule(0.1, 0, LrSchedule::Decay::Cosine, 0); }).find("needs the total number of steps"),
            std::string::npos);
  EXPECT_NE(errorOf([] { LrSchedule(0.1, 10, LrSchedule::Decay::Linear, 5); }).find("10 warmup steps exceed"),
            std::string::npos);
  EXPECT_NE(errorOf([] { LrSchedule(-1.0); }).find("must be >= 0"), std::string::npos);
  EXPECT_EQ(LrSchedule::parseDecay("cosine"), LrSchedule::Decay::Cosine);
  EXPECT_NE(errorOf([] { LrSchedule::parseDecay("step"); }).find("unknown decay 'step'"), std::string::npos);
}

TEST(Freeze, GlobPatterns) {
  EXPECT_TRUE(matchesPattern("encoder/layer1/W", "encoder/*"));
  EXPECT_TRUE(matchesPattern("encoder/layer1/W", "*/W"));
  EXPECT_TRUE(matchesPattern("layer1.bias", "layer?.bias"));
  EXPECT_FALSE(matchesPattern("layer12.bias", "layer?.bias"));
  EXPECT_TRUE(matchesPattern("abc", "*"));
  EXPECT_TRUE(matchesPattern("", "*"));
  EXPECT_FALSE(matchesPattern("", "?"));
  EXPECT_TRUE(matchesPattern("a*b", "a*b"));
  EXPECT_TRUE(matchesPattern("*x", "*"));
  EXPECT_TRUE(matchesPattern("aXbYb", "a*b"));
  EXPECT_FALSE(matchesPattern("aXbYc", "a*b"));
  EXPECT_TRUE(matchesPattern("mississippi", "m*iss*ppi"));
  EXPECT_FALSE(matchesPattern("decoder/W", "encoder/*"));
  EXPECT_FALSE(matchesPattern("encoder/W2", "encoder/W"));  // whole name
}

TEST(Freeze, FreezeParamsByPattern) {
  auto g = New<ExpressionGraph>();
  for(const char* n : {"enc/l1/W", "enc/l1/b", "enc/l2/W", "dec/W", "dec/b", "head.weight"})
    g->param(n, {2}, inits::fromValue(1.0));
  EXPECT_EQ(freezeParams(*g, {"enc/*", "*.weight"}), 4u);
  EXPECT_EQ(freezeParams(*g, {"nothing*"}), 0u);
  EXPECT_EQ(freezeParams(*g, {"*/b", "dec/?"}), 3u);  // dec/b counted once
  std::vector<std::string> trainable;
  for(const Expr& p : *g->params())
    if(p->trainable()) trainable.push_back(p->name());
  EXPECT_EQ(trainable, std::vector<std::string>{});
  auto g2 = New<ExpressionGraph>();
  for(const char* n : {"a/W", "a/b", "c/W"}) g2->param(n, {2}, inits::fromValue(1.0));
  EXPECT_EQ(freezeParams(*g2, {"*/W"}), 2u);
  trainable.clear();
  for(const Expr& p : *g2->params())
    if(p->trainable()) trainable.push_back(p->name());
  EXPECT_EQ(trainable, std::vector<std::string>{"a/b"});

  // A frozen param is left alone by the optimizer.
  g2->clear();
  Expr w = g2->param("a/W", {2}, inits::fromValue(1.0));
  Expr b = g2->param("a/b", {2}, inits::fromValue(1.0));
  Expr loss = sum(w * b);
  g2->forward();
  g2->backward(loss);
  Optimizer<Sgd>(0.5)->update(g2);
  EXPECT_EQ(w->val()->toVector<float>(), (std::vector<float>{1.f, 1.f}));
  EXPECT_EQ(b->val()->toVector<float>(), (std::vector<float>{0.5f, 0.5f}));
}

}  // namespace
}  // namespace onyx
