// The Trainer (train/trainer.h) used directly, as a C++ user would: the
// bundled CNN fine-tuned on the bundled "bars" data, a loop of one's own,
// checkpoints that resume bit for bit, export, gradients, bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

std::string source(const std::string& rel) { return std::string(ONYX_SOURCE_DIR) + "/" + rel; }
const std::string kCnn = source("models/onnx/tiny_cnn/model.onnx");
const std::string kMlp = source("models/onnx/tiny_mlp/model.onnx");

TrainerOptions cnnOptions() {
  TrainerOptions o;
  o.inputs = {{"x", "x"}};
  o.target = "y";
  o.output = "logits";
  o.loss = "ce";
  o.lr = 0.02;
  o.batchSize = 32;
  o.epochs = 2;
  o.seed = 3;
  return o;
}

Dataset bars(const std::string& which) { return Dataset::loadNpz(source("models/data/bars_" + which + ".npz")); }

// Bit-for-bit equality of two params lists (names, shapes, bytes).
::testing::AssertionResult sameParams(const std::vector<std::pair<std::string, Tensor>>& a,
                                      const std::vector<std::pair<std::string, Tensor>>& b) {
  if(a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " params";
  for(size_t i = 0; i < a.size(); ++i) {
    Tensor x = a[i].second->hostCopy(), y = b[i].second->hostCopy();
    if(a[i].first != b[i].first || x->shape() != y->shape() || x->type() != y->type() ||
       std::memcmp(x->raw(), y->raw(), x->bytes()) != 0)
      return ::testing::AssertionFailure() << "param '" << a[i].first << "' differs";
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::pair<std::string, Tensor>> copies(const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<std::pair<std::string, Tensor>> r;
  for(auto& [name, t] : params) r.emplace_back(name, t->hostCopy());
  return r;
}

struct TrainerTest : ::testing::Test {
  std::string dir = (std::filesystem::temp_directory_path() / ("onyx_trainer_" + std::to_string(::getpid()))).string();
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

TEST_F(TrainerTest, FitLowersTheLoss) {
  Trainer t(kCnn, cnnOptions());
  Dataset valid = bars("valid");
  t.setData(bars("train"), valid);
  const double before = t.evaluate(valid).loss;
  auto history = t.run();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(t.steps(), 2u * 512 / 32);
  EXPECT_LT(history[1].trainLoss, history[0].trainLoss);
  ASSERT_TRUE(history[1].validated);
  EXPECT_EQ(history[1].valid.samples, 256);
  EXPECT_LT(history[1].valid.loss, before);
  EXPECT_GT(history[1].valid.accuracy, 0.25);  // better than chance on 4 classes
}

TEST_F(TrainerTest, CallbacksReportEveryStepAndEpoch) {
  TrainerOptions o = cnnOptions();
  o.epochs = 1;
  o.freeze = {"fc.*"};
  std::vector<StepInfo> steps;
  std::vector<std::string> notices;
  int epochsTrained = 0, epochsEnded = 0;
  TrainerCallbacks cb;
  cb.notice = [&](const std::string& m) { notices.push_back(m); };
  cb.step = [&](const StepInfo& s) { steps.push_back(s); };
  cb.epochTrained = [&](const EpochInfo&) { ++epochsTrained; };
  cb.epochEnd = [&](const EpochInfo& e) {
    ++epochsEnded;
    EXPECT_FALSE(e.validated);
  };
  Trainer t(kCnn, o, cb);
  t.fit(bars("train"));
  ASSERT_EQ(steps.size(), 16u);
  EXPECT_EQ(steps.front().step, 1u);
  EXPECT_EQ(steps.back().epochDone, 512);
  EXPECT_EQ(steps.back().epochSize, 512);
  EXPECT_EQ(epochsTrained, 1);
  EXPECT_EQ(epochsEnded, 1);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0], "froze 2 params");
  // Frozen params keep the model's values.
  auto model = Model::load(kCnn);
  for(auto& [name, value] : t.params())
    if(name.rfind("fc.", 0) == 0) {
      EXPECT_TRUE(sameParams({{name, value}}, {{name, model->initializers().at(name)}})) << name;
    }
}

TEST_F(TrainerTest, AnOwnLoopOfSteps) {
  TrainerOptions o = cnnOptions();
  o.optimizer = "adamw";
  o.lr = 0.05;
  o.warmup = 4;
  Trainer t(kCnn, o);
  Dataset train = bars("train");
  Batch b = train.range(0, 64);  // float16 images: converted to the model's float32
  std::vector<double> losses;
  for(int i = 0; i < 12; ++i) {
    if(i < 4) {
      EXPECT_DOUBLE_EQ(t.learningRate(), 0.05 * (i + 1) / 4);  // the warmup
    }
    losses.push_back(t.step(b));
  }
  EXPECT_EQ(t.steps(), 12u);
  EXPECT_LT(losses.back(), 0.85 * losses.front()) << ::testing::PrintToString(losses);
  EvalResult e = t.evaluate({train.range(0, 32), train.range(32, 64)});
  EXPECT_EQ(e.samples, 64);
  EXPECT_GT(e.accuracy, 0.25);
}

TEST_F(TrainerTest, CheckpointRoundTripResumesBitIdentically) {
  Dataset train = bars("train");
  auto batch = [&](int i) { return train.range(i * 32, i * 32 + 32); };
  const std::string path = dir + "/ck.npz";
  Trainer a(kCnn, cnnOptions());  // Dropout draws from the graph's generator: it is saved too
  for(int i = 0; i < 3; ++i) a.step(batch(i));
  a.saveCheckpoint(path);
  for(int i = 3; i < 6; ++i) a.step(batch(i));

  Trainer b(kCnn, cnnOptions());
  b.setData(train);
  TrainState s = b.loadCheckpoint(path);
  EXPECT_EQ(s.step, 3u);
  EXPECT_EQ(b.steps(), 3u);
  for(int i = 3; i < 6; ++i) b.step(batch(i));
  EXPECT_TRUE(sameParams(a.params(), b.params()));

  // Without the checkpoint the same three steps end elsewhere.
  Trainer c(kCnn, cnnOptions());
  for(int i = 3; i < 6; ++i) c.step(batch(i));
  EXPECT_FALSE(sameParams(a.params(), c.params()));

  // Other settings than the checkpoint's are refused, naming them.
  TrainerOptions other = cnnOptions();
  other.batchSize = 16;
  Trainer d(kCnn, other);
  d.setData(train);
  try {
    d.loadCheckpoint(path);
    FAIL() << "another batch size was accepted";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("written with batch_size 32, this run has 16"), std::string::npos) << e.what();
  }
}

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

TEST_F(TrainerTest, RunResumesAfterAnInterruptionBitIdentically) {
  TrainerOptions o = cnnOptions();
  o.decay = "cosine";
  o.warmup = 3;
  Trainer whole(kCnn, o);
  whole.fit(bars("train"));

  o.checkpointDir = dir + "/ck";
  o.checkpointEvery = 5;
  TrainerCallbacks stopAt12;
  stopAt12.step = [](const StepInfo& s) {
    if(s.step == 12) throw Interrupted();
  };
  {
    Trainer first(kCnn, o, stopAt12);
    EXPECT_THROW(first.fit(bars("train")), Interrupted);
  }
  o.resume = true;
  TrainState from;
  TrainerCallbacks cb;
  cb.resumed = [&](const std::string&, const TrainState& s) { from = s; };
  Trainer resumed(kCnn, o, cb);
  resumed.fit(bars("train"));
  EXPECT_EQ(from.step, 10u);
  EXPECT_EQ(from.epoch, 1u);
  EXPECT_EQ(from.sampleOffset, 320u);
  EXPECT_EQ(resumed.steps(), whole.steps());
  EXPECT_TRUE(sameParams(whole.params(), resumed.params()));
}

TEST_F(TrainerTest, ExportedModelRunsAsTheTrainerEvaluates) {
  TrainerOptions o = cnnOptions();
  o.epochs = 1;
  Trainer t(kCnn, o);
  Dataset valid = bars("valid");
  t.fit(bars("train"));
  const std::string path = dir + "/tuned.onnx";
  ExportResult r = t.exportModel(path);
  EXPECT_GE(r.initializers, 8);  // the params, and the constants the exporter adds

  auto tuned = Model::load(path);
  for(auto& [name, value] : t.params())
    EXPECT_TRUE(sameParams({{name, value}}, {{name, tuned->initializers().at(name)}})) << name;
  Session session(tuned);
  Tensor x = convertType(*valid.array("x"), Type::float32);
  Tensor logits = session.run({{"x", x}}).at("logits");
  ASSERT_EQ(logits->shape(), Shape({256, 4}));
  std::vector<float> l;
  std::vector<int64_t> y;
  logits->get(l);
  valid.array("y")->get(y);
  int64_t correct = 0;
  for(size_t i = 0; i < y.size(); ++i)
    correct += std::max_element(l.begin() + 4 * i, l.begin() + 4 * i + 4) - (l.begin() + 4 * i) == y[i];
  EXPECT_DOUBLE_EQ(double(correct) / 256.0, t.evaluate(valid).accuracy);
}

TEST_F(TrainerTest, GradientsAreReadableAndChangeNothing) {
  TrainerOptions o = cnnOptions();
  o.freeze = {"fc.bias"};
  Trainer t(kCnn, o);
  Dataset train = bars("train");
  t.computeGradients(train.range(0, 32));
  auto before = copies(t.params());
  std::map<std::string, Tensor> grads;
  for(auto& [name, g] : t.gradients()) grads[name] = g;
  EXPECT_FALSE(grads.count("fc.bias"));         // frozen
  EXPECT_FALSE(grads.count("bn.running_mean"));  // a buffer, not trainable
  ASSERT_TRUE(grads.count("fc.weight"));
  EXPECT_EQ(grads["fc.weight"]->shape(), Shape({4, 8}));
  std::vector<double> g;
  grads["fc.weight"]->get(g);
  double norm = 0;
  for(double v : g) norm += v * v;
  EXPECT_GT(norm, 0);
  EXPECT_EQ(t.stateUpdates().size(), 2u);  // BatchNormalization's running mean and variance
  EXPECT_EQ(t.lossValue()->size(), 1);
  EXPECT_TRUE(sameParams(before, t.params()));  // nothing was updated
  EXPECT_EQ(t.steps(), 0u);
}

TEST_F(TrainerTest, GradientAccumulationMatchesTheWholeBatch) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(32 * 4), y(32 * 3, 0.f);
  for(auto& v : x) v = normal(rng);
  for(int i = 0; i < 32; ++i) y[static_cast<size_t>(i * 3 + (x[static_cast<size_t>(i * 4)] > 0))] = 1.f;
  Dataset d({{"x", TensorBase::fromVector<float>({32, 4}, x)}, {"y", TensorBase::fromVector<float>({32, 3}, y)}});
  TrainerOptions o;  // inputs by name, target "y", the first output
  o.loss = "mse";
  o.optimizer = "sgd";
  o.lr = 0.5;
  Trainer whole(kMlp, o), split(kMlp, o);
  double lw = whole.step(d.range(0, 32));
  double ls = split.stepAccumulated({d.range(0, 8), d.range(8, 32)});
  EXPECT_NEAR(ls, lw, 1e-6);
  auto pw = whole.params(), ps = split.params();
  ASSERT_EQ(pw.size(), 4u);
  for(size_t i = 0; i < pw.size(); ++i) {
    std::vector<double> a, b;
    pw[i].second->get(a);
    ps[i].second->get(b);
    for(size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << pw[i].first;
  }
  EXPECT_FALSE(sameParams(pw, copies(Trainer(kMlp, o).params())));
}

TEST_F(TrainerTest, NonFiniteLossStopsBeforeUpdating) {
  TrainerOptions o;
  o.loss = "mse";
  Trainer t(kMlp, o);
  std::vector<float> x(8, 0.5f), y(6, 0.f);
  Batch good{{"x", TensorBase::fromVector<float>({2, 4}, x)}, {"y", TensorBase::fromVector<float>({2, 3}, y)}};
  t.step(good);
  auto before = copies(t.params());
  x[3] = std::nanf("");
  Batch bad{{"x", TensorBase::fromVector<float>({2, 4}, x)}, {"y", TensorBase::fromVector<float>({2, 3}, y)}};
  try {
    t.step(bad);
    FAIL() << "a NaN loss did not stop";
  } catch(const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("nan at step 2 (epoch 1); stopped before updating"), std::string::npos) << m;
  }
  EXPECT_EQ(t.steps(), 1u);
  EXPECT_TRUE(sameParams(before, t.params()));
}

// A bad option is a one-line onyx::Error naming it (as the TrainerOptions
// field, or as the front end names it).
std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch(const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// TrainerOptions::threads sizes the parallel regions of the thread that
// runs the steps (as SessionOptions::threads does a Session's runs), and a
// step on one thread trains as one on the default.
TEST_F(TrainerTest, ThreadsSetTheStepsThreadCount) {
  const int before = host::numThreads();
  TrainerOptions o = cnnOptions();
  o.threads = 1;
  Trainer one(kCnn, o);
  Trainer dflt(kCnn, cnnOptions());
  Batch b = bars("train").range(0, 32);
  const double loss1 = one.step(b);
  EXPECT_EQ(host::numThreads(), 1);
  host::setNumThreads(before);  // as it was for the rest of the tests
  const double loss0 = dflt.step(b);
  EXPECT_EQ(host::numThreads(), before);  // threads 0 leaves the default
  EXPECT_TRUE(std::isfinite(loss1));
  EXPECT_NEAR(loss1, loss0, 1e-5 * std::fabs(loss0));
}

TEST_F(TrainerTest, BadOptionsAreOneLineErrors) {
  auto with = [](std::function<void(TrainerOptions&)> change) {
    TrainerOptions o = cnnOptions();
    change(o);
    return o;
  };
  struct Case {
    TrainerOptions options;
    std::string message;
  } cases[] = {
      {with([](TrainerOptions& o) { o.optimizer = "rmsprop"; }), "optimizer 'rmsprop': expected sgd, adagrad, adam or adamw"},
      {with([](TrainerOptions& o) { o.loss = "hinge"; }), "loss 'hinge': expected ce, mse, l1 or bce"},
      {with([](TrainerOptions& o) { o.batchSize = 0; }), "batchSize must be at least 1"},
      {with([](TrainerOptions& o) { o.resume = true; }), "resume needs checkpointDir"},
      {with([](TrainerOptions& o) { o.output = "probs"; }), "the model has no output 'probs'"},
      {with([](TrainerOptions& o) { o.inputs = {{"image", "x"}}; }), "inputs 'image=x': the model has no input 'image'"},
      {with([](TrainerOptions& o) { o.decay = "step"; }), "unknown decay 'step'"},
      {with([](TrainerOptions& o) { o.threads = -1; }), "threads = -1: must be 0 (the default) to 1024"},
  };
  for(auto& c : cases) {
    std::string m = errorOf([&] { Trainer t(kCnn, c.options); });
    EXPECT_NE(m.find(c.message), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }

  // Found when the first graph is built, named as the front end names it.
  TrainerCallbacks flags;
  flags.optionName = [](const std::string& field) { return field == "freeze" ? std::string("--freeze") : field; };
  Trainer frozen(kCnn, with([](TrainerOptions& o) { o.freeze = {"nosuch*"}; }), flags);
  EXPECT_EQ(errorOf([&] { frozen.step(bars("train").range(0, 8)); }), "--freeze 'nosuch*' matches no param");

  // A decay needs its end: from the data, or totalSteps for steps alone.
  Trainer cosine(kCnn, with([](TrainerOptions& o) { o.decay = "cosine"; }));
  EXPECT_NE(errorOf([&] { cosine.step(bars("train").range(0, 8)); }).find("needs the total number of steps"),
            std::string::npos);

  // Labels out of range name the data set and the sample.
  std::vector<int64_t> labels(512, 1);
  labels[7] = 9;
  Dataset train = bars("train");
  train.setArray("y", TensorBase::fromVector<int64_t>({512}, labels));
  Trainer t(kCnn, cnnOptions());
  t.setData(train);
  std::string m = errorOf([&] { t.run(); });
  EXPECT_NE(m.find("bars_train.npz: 'y': label 9 at index 7 is out of range for 4 classes"), std::string::npos) << m;
}

}  // namespace
}  // namespace onyx
