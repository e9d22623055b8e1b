// Training checkpoints: an interrupted run (save, destroy everything, rebuild,
// load, go on) ends with params bit-identical to an uninterrupted one; a bad
// file is a clear error; a failed save leaves the old checkpoint untouched.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <onyx/onyx.h>
#include <onyx/io/npz.h>
#include <onyx/train/checkpoint.h>

namespace onyx {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "onyx_ckpt_" + std::to_string(::getpid()) + "_" + name;
}

std::string readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void writeBytes(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A 2-layer MLP with dropout (so the graph's RNG matters), trained with Adam
// on fixed data, in mini-batches of 4 of 8 samples (so the loop position
// matters too).
struct Trainer {
  Ptr<ExpressionGraph> graph = New<ExpressionGraph>();
  Ptr<OptimizerBase> opt = Optimizer<Adam>(0.05);
  TrainState state;

  static constexpr int kSamples = 8, kBatch = 4, kIn = 3, kHidden = 6, kClasses = 3;

  explicit Trainer(uint64_t seed = 42) {
    graph->setSeed(seed);
    build(0);  // creates the params (their init draws from the RNG)
  }

  Expr build(uint64_t offset) {
    graph->clear();
    std::vector<float> x;
    std::vector<int64_t> y;
    for(uint64_t i = offset; i < offset + kBatch; ++i) {
      for(int j = 0; j < kIn; ++j) x.push_back(static_cast<float>((i * 7 + j * 3) % 11) / 5.f - 1.f);
      y.push_back(static_cast<int64_t>(i % kClasses));
    }
    auto W1 = graph->param("W1", {kIn, kHidden}, inits::glorotUniform());
    auto b1 = graph->param("b1", {1, kHidden}, inits::zeros());
    auto W2 = graph->param("W2", {kHidden, kClasses}, inits::glorotUniform());
    auto b2 = graph->param("b2", {1, kClasses}, inits::zeros());
    auto in = graph->constant({kBatch, kIn}, inits::fromVector(x));
    auto h = dropout(relu(affine(in, W1, b1)), 0.3f);
    auto logits = affine(h, W2, b2);
    return mean(cross_entropy(logits, graph->indices(y)));
  }

  void step() {
    auto loss = build(state.sampleOffset);
    graph->forward();
    graph->backward(loss);
    opt->update(graph);
    ++state.step;
    state.sampleOffset += kBatch;
    if(state.sampleOffset >= static_cast<uint64_t>(kSamples)) {
      state.sampleOffset = 0;
      ++state.epoch;
    }
  }

  std::vector<std::pair<std::string, std::vector<char>>> paramBytes() {
    std::vector<std::pair<std::string, std::vector<char>>> out;
    for(auto& p : *graph->params()) {
      auto& v = p->val();
      const char* b = static_cast<const char*>(v->raw());
      out.emplace_back(p->name(), std::vector<char>(b, b + v->bytes()));
    }
    return out;
  }
};

void expectBitIdentical(Trainer& a, Trainer& b) {
  auto pa = a.paramBytes(), pb = b.paramBytes();
  ASSERT_EQ(pa.size(), pb.size());
  for(size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    ASSERT_EQ(pa[i].second.size(), pb[i].second.size()) << pa[i].first;
    EXPECT_EQ(std::memcmp(pa[i].second.data(), pb[i].second.data(), pa[i].second.size()), 0)
        << "param '" << pa[i].first << "' differs";
  }
}

TEST(Checkpoint, ResumeIsBitIdentical) {
  Trainer full;
  for(int i = 0; i < 10; ++i) full.step();

  std::string path = tempPath("resume.npz");
  {
    Trainer first;
    for(int i = 0; i < 4; ++i) first.step();
    first.state.extra["note"] = "mid-run";
    saveCheckpoint(path, *first.graph, *first.opt, first.state);
  }  // everything destroyed

  Trainer resumed(7);  // another seed: the checkpoint's RNG must win
  TrainState s = loadCheckpoint(path, *resumed.graph, *resumed.opt);
  EXPECT_EQ(s.step, 4u);
  EXPECT_EQ(s.epoch, 2u);
  EXPECT_EQ(s.sampleOffset, 0u);
  EXPECT_EQ(s.extra.at("note"), "mid-run");
  EXPECT_EQ(resumed.opt->steps(), 4u);
  EXPECT_EQ(resumed.opt->state().size(), 8u);  // m and v of 4 params
  resumed.state = s;
  for(int i = 0; i < 6; ++i) resumed.step();

  EXPECT_EQ(resumed.state.step, full.state.step);
  EXPECT_EQ(resumed.opt->steps(), full.opt->steps());
  expectBitIdentical(full, resumed);
  std::remove(path.c_str());
}

TEST(Checkpoint, ResumeMidEpochIsBitIdentical) {
  Trainer full;
  for(int i = 0; i < 7; ++i) full.step();

  std::string path = tempPath("midepoch.npz");
  {
    Trainer first;
    for(int i = 0; i < 3; ++i) first.step();
    ASSERT_EQ(first.state.sampleOffset, 4u);  // in the middle of an epoch
    saveCheckpoint(path, *first.graph, *first.opt, first.state);
  }
  Trainer resumed;
  resumed.state = loadCheckpoint(path, *resumed.graph, *resumed.opt);
  EXPECT_EQ(resumed.state.sampleOffset, 4u);
  for(int i = 0; i < 4; ++i) resumed.step();
  expectBitIdentical(full, resumed);
  std::remove(path.c_str());
}

TEST(Checkpoint, RngStateMatters) {
  // Without the stored RNG (same everything else), the dropout masks differ
  // and so do the params: the resume test above is not passing by accident.
  Trainer full;
  for(int i = 0; i < 6; ++i) full.step();

  std::string path = tempPath("rng.npz");
  Trainer first;
  for(int i = 0; i < 3; ++i) first.step();
  saveCheckpoint(path, *first.graph, *first.opt, first.state);

  Trainer resumed;
  resumed.state = loadCheckpoint(path, *resumed.graph, *resumed.opt);
  resumed.graph->setSeed(99);  // throw the restored RNG away
  for(int i = 0; i < 3; ++i) resumed.step();
  auto pa = full.paramBytes(), pb = resumed.paramBytes();
  bool anyDiffers = false;
  for(size_t i = 0; i < pa.size(); ++i) anyDiffers |= pa[i].second != pb[i].second;
  EXPECT_TRUE(anyDiffers);
  std::remove(path.c_str());
}

TEST(Checkpoint, TruncatedFileIsAClearError) {
  std::string path = tempPath("trunc.npz");
  Trainer t;
  t.step();
  saveCheckpoint(path, *t.graph, *t.opt, t.state);
  std::string bytes = readBytes(path);
  ASSERT_GT(bytes.size(), 100u);
  writeBytes(path, bytes.substr(0, bytes.size() / 2));  // killed mid-write without the rename

  Trainer other;
  auto before = other.paramBytes();
  try {
    loadCheckpoint(path, *other.graph, *other.opt);
    FAIL() << "a truncated checkpoint loaded";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  auto after = other.paramBytes();
  EXPECT_EQ(before, after);  // nothing was changed
  EXPECT_EQ(other.opt->steps(), 0u);
  std::remove(path.c_str());
}

TEST(Checkpoint, MismatchedGraphIsAClearError) {
  std::string path = tempPath("mismatch.npz");
  Trainer t;
  t.step();
  saveCheckpoint(path, *t.graph, *t.opt, t.state);

  {  // a param of the file that the graph lacks
    auto g = New<ExpressionGraph>();
    g->param("W1", {Trainer::kIn, Trainer::kHidden}, inits::zeros());
    auto opt = Optimizer<Adam>(0.05);
    try {
      loadCheckpoint(path, *g, *opt);
      FAIL() << "loaded into a graph without b1/W2/b2";
    } catch(const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find("is not in the graph"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  {  // a shape mismatch
    auto g = New<ExpressionGraph>();
    g->param("W1", {Trainer::kIn, Trainer::kHidden + 1}, inits::zeros());
    g->param("b1", {1, Trainer::kHidden}, inits::zeros());
    g->param("W2", {Trainer::kHidden, Trainer::kClasses}, inits::zeros());
    g->param("b2", {1, Trainer::kClasses}, inits::zeros());
    auto opt = Optimizer<Adam>(0.05);
    try {
      loadCheckpoint(path, *g, *opt);
      FAIL() << "loaded W1 into a param of another shape";
    } catch(const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find("'W1'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("shape"), std::string::npos) << msg;
    }
    EXPECT_EQ(g->params()->get("b1")->val()->toVector<float>(), std::vector<float>(Trainer::kHidden, 0.f));
  }
  std::remove(path.c_str());
}

// A write that was killed leaves <path>.tmp.<pid>; the next write of that
// path removes it when the process is gone, and leaves a live writer's alone.
TEST(Checkpoint, StaleTemporariesOfDeadWritersAreRemoved) {
  std::string path = tempPath("stale.bin");
  auto touch = [](const std::string& p) { std::ofstream(p) << "partial"; };
  struct stat st;
  const std::string dead = path + ".tmp.999999999", live = path + ".tmp.1", other = path + ".tmp.abc";
  touch(dead);
  touch(live);
  touch(other);
  io::writeFileAtomic(path, "new");
  EXPECT_NE(::stat(dead.c_str(), &st), 0) << "a dead writer's temporary was kept";
  EXPECT_EQ(::stat(live.c_str(), &st), 0) << "a live process's (pid 1) temporary was removed";
  EXPECT_EQ(::stat(other.c_str(), &st), 0) << "a file that is no temporary of ours was removed";
  EXPECT_EQ(readBytes(path), "new");
  touch(dead);
  EXPECT_EQ(io::removeStaleTemporaries(path), std::vector<std::string>{dead});
  std::remove(live.c_str());
  std::remove(other.c_str());
}

TEST(Checkpoint, FailedSaveLeavesOldFileUntouched) {
  std::string path = tempPath("keep.npz");
  Trainer t;
  t.step();
  saveCheckpoint(path, *t.graph, *t.opt, t.state);
  std::string old = readBytes(path);
  ASSERT_FALSE(old.empty());
  t.step();

  // The temporary file cannot be created (a directory is in its way): the
  // save fails and the previous checkpoint is still there, byte for byte.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  EXPECT_THROW(saveCheckpoint(path, *t.graph, *t.opt, t.state), Error);
  ::rmdir(tmp.c_str());
  EXPECT_EQ(readBytes(path), old);

  // A folder that does not exist: an error, nothing written.
  std::string missing = tempPath("no_such_dir") + "/ckpt.npz";
  EXPECT_THROW(saveCheckpoint(missing, *t.graph, *t.opt, t.state), Error);
  EXPECT_EQ(readBytes(path), old);

  // The old checkpoint still loads.
  Trainer other;
  TrainState s = loadCheckpoint(path, *other.graph, *other.opt);
  EXPECT_EQ(s.step, 1u);
  EXPECT_EQ(other.opt->steps(), 1u);

  // A successful save replaces it and leaves no temporary file behind.
  saveCheckpoint(path, *t.graph, *t.opt, t.state);
  EXPECT_NE(readBytes(path), old);
  struct stat st;
  EXPECT_NE(::stat(tmp.c_str(), &st), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace onyx
