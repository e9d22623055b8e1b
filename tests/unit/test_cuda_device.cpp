// The GPU backend through the device interface (core/device_backend.h),
// which loads the CUDA plugin. Without a usable GPU (CI, or a build without
// the backend) the device checks below report themselves SKIPPED with the
// reason; the error paths are checked everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <map>

#include <onyx/core/device_backend.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

// The plugin loads where the build made one (also without a driver: it
// then has no device), and only then.
TEST(CudaDevice, PluginLoadsAsConfigured) {
  const std::string why = loadGpuBackend();
  EXPECT_TRUE(gpuBackendTried());
  if(ONYX_TEST_CUDA_BUILT) {
    EXPECT_EQ(why, "") << "the CUDA plugin was built but does not load";
  } else {
    EXPECT_NE(why.find("this build of Onyx has no CUDA backend"), std::string::npos) << why;
    EXPECT_EQ(gpuDeviceCount(), 0);
  }
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

// A GPU that is not there (index = the device count) is a one-line error
// naming it, from setDevice, from a session, and from memory allocation.
TEST(CudaDevice, MissingGpuIsAClearError) {
  const size_t missing = static_cast<size_t>(gpuDeviceCount());
  std::string name = "gpu" + std::to_string(missing);
  EXPECT_FALSE(gpuUnavailable(missing).empty());
  auto graph = New<ExpressionGraph>();
  try {
    graph->setDevice(gpu(missing));
    FAIL() << "setDevice(" << name << ") should fail";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("setDevice(" + name + "): "), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("no usable CUDA device") != std::string::npos ||
                msg.find("no such CUDA device") != std::string::npos ||
                msg.find("no CUDA backend") != std::string::npos)
        << msg;
  }
  try {
    TensorBase::create({4}, Type::float32, gpu(missing));
    FAIL() << "allocating on " << name << " should fail";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  // The graph is still usable on the CPU.
  EXPECT_NO_THROW(graph->setDevice(cpu()));
}

#define REQUIRE_GPU() \
  if(gpuDeviceCount() == 0) GTEST_SKIP() << "GPU check not run: " << gpuUnavailable(0)

TEST(CudaDevice, CopiesRoundTrip) {
  REQUIRE_GPU();
  std::vector<float> v{1.5f, -2.f, 3.25f, 0.f, 7.f, -0.5f};
  Tensor host = TensorBase::fromVector<float>({2, 3}, v);
  Tensor dev = TensorBase::create({2, 3}, Type::float32, gpu(0));
  dev->copyFrom(*host);
  EXPECT_EQ(dev->toVector<float>(), v);                        // device -> host through get()
  Tensor dev2 = TensorBase::create({2, 3}, Type::float32, gpu(0));
  dev2->copyFrom(*dev);                                        // device -> device
  EXPECT_EQ(dev2->hostCopy()->toVector<float>(), v);
  Tensor d64 = TensorBase::create({2, 3}, Type::float64, gpu(0));
  d64->copyFrom(*dev);                                         // converting copy
  EXPECT_EQ(d64->toVector<double>(), std::vector<double>(v.begin(), v.end()));
  Tensor i64 = TensorBase::create({3}, Type::int64, gpu(0));
  i64->set(std::vector<int64_t>{-1, 1LL << 40, 7});
  EXPECT_EQ(i64->toVector<int64_t>(), (std::vector<int64_t>{-1, 1LL << 40, 7}));
  i64->set(3.0);
  EXPECT_EQ(i64->toVector<int64_t>(), (std::vector<int64_t>{3, 3, 3}));
}

TEST(CudaDevice, WorkspaceAndParamsOnTheGpu) {
  REQUIRE_GPU();
  auto onGpu = New<ExpressionGraph>();
  onGpu->setDevice(gpu(0));
  onGpu->reserveWorkspaceMB(4);
  onGpu->setSeed(3);
  auto onCpu = New<ExpressionGraph>();
  onCpu->setSeed(3);
  Expr a = onGpu->param("w", {3, 5}, inits::glorotUniform());
  Expr b = onCpu->param("w", {3, 5}, inits::glorotUniform());
  EXPECT_EQ(a->val()->getDeviceId(), gpu(0));
  EXPECT_EQ(a->val()->toVector<float>(), b->val()->toVector<float>());
  Expr c = onGpu->constant({2, 2}, inits::fromVector(std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(c->val()->toVector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

// Random ops draw on the host (OpDef::gpuOnHost): the same seed gives the
// same values on the GPU as on the CPU.
TEST(CudaDevice, RandomDrawsMatchTheCpu) {
  REQUIRE_GPU();
  std::vector<float> draws[2];
  for(int d = 0; d < 2; ++d) {
    auto g = New<ExpressionGraph>();
    if(d == 1) g->setDevice(gpu(0));
    g->setSeed(11);
    Expr u = random_uniform(g.get(), {4, 5}, -1.0, 2.0);
    Expr m = dropout_mask(g.get(), {4, 5}, 0.25f, Type::float32);
    Expr y = u * m;
    g->forward();
    EXPECT_EQ(y->val()->getDeviceId(), d == 1 ? gpu(0) : cpu(0));
    draws[d] = y->val()->toVector<float>();
  }
  EXPECT_EQ(draws[1], draws[0]);
}

}  // namespace
}  // namespace onyx

namespace onyx {
namespace {

// A small regression trained a few steps on each device, every optimizer
// (float32, and float16 with a master copy and loss scaling): the GPU's
// params, state and scale follow the CPU's (the step's rule is one
// definition; only summation order and the GPU's math library differ).
std::map<std::string, std::vector<float>> trainSteps(DeviceId dev, const std::string& algo, Type t) {
  auto g = New<ExpressionGraph>();
  if(dev.type == DeviceType::gpu) g->setDevice(dev);
  g->setSeed(5);
  OptimizerOptions o;
  o.lr = 0.05;
  o.momentum = algo == "momentum" ? 0.9 : 0.0;
  Ptr<OptimizerBase> opt = algo == "adam"      ? Optimizer<Adam>(o)
                           : algo == "adamw"   ? Optimizer<AdamW>(o)
                           : algo == "adagrad" ? Optimizer<Adagrad>(o)
                                               : Optimizer<Sgd>(o);
  GradScaler scaler;
  std::vector<float> x(8 * 3), y(8);
  for(size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 4.0f;
  for(size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3) - 1.0f;
  for(int s = 0; s < 5; ++s) {
    g->clear();
    auto W = g->param("W", {3, 1}, inits::glorotUniform(), t);
    auto b = g->param("b", {1}, inits::zeros(), t);
    auto pred = cast(matmul(g->constant({8, 3}, inits::fromVector(x), t), W) + b, Type::float32);
    auto loss = mseLoss(pred, g->constant({8, 1}, inits::fromVector(y)));
    g->forward();
    g->backward(scaler.scale(loss));
    scaler.step(*opt, *g);
  }
  std::map<std::string, std::vector<float>> out;
  for(auto& p : *g->params()) {
    Tensor h = p->val()->onHost() ? p->val() : p->val()->hostCopy();
    std::vector<float> v;
    for(int64_t i = 0; i < h->size(); ++i) v.push_back(static_cast<float>(h->getAsDouble(i)));
    out["param " + p->name()] = v;
  }
  for(auto& kv : opt->state()) out["state " + kv.first] = kv.second->toVector<float>();
  out["scale"] = {static_cast<float>(scaler.scaleFactor())};
  return out;
}

TEST(CudaDevice, CudnnAsConfigured) {
  // cuDNN is used where the build found it, unless ONYX_CUDNN=0 says not.
  if(!ONYX_TEST_CUDA_BUILT) GTEST_SKIP() << "no CUDA plugin in this build";
  const char* env = std::getenv("ONYX_CUDNN");
  const bool off = env && std::string(env) == "0";
  const std::string d = gpuBackend().describe();
  EXPECT_EQ(d.find("cuDNN on") != std::string::npos, ONYX_TEST_CUDNN_BUILT != 0 && !off) << d;
}

// Convolutions of the shapes networks have (ResNet's 7x7 stride 2, 3x3,
// 1x1, grouped and depthwise, dilated, 1-D and 3-D), through cuDNN where it
// takes them and im2col where not (asymmetric pads), against the CPU.
TEST(CudaDevice, ConvolutionsMatchTheCpu) {
  REQUIRE_GPU();
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
  };
  const std::vector<Case> cases = {
      {{2, 3, 64, 64}, {16, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
      {{2, 32, 28, 28}, {32, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {{4, 64, 14, 14}, {128, 64, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {{2, 32, 16, 16}, {32, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4},
      {{2, 32, 16, 16}, {32, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 32},
      {{1, 8, 20, 20}, {8, 8, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
      {{1, 8, 20, 20}, {8, 8, 3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 1},  // asymmetric: im2col
      {{2, 4, 50}, {6, 4, 5}, {2}, {2, 2}, {1}, 1},
      {{1, 4, 6, 8, 8}, {4, 4, 3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 1},
  };
  for(Type t : {Type::float32, Type::float16})
    for(size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      std::vector<float> out[2];
      for(int d = 0; d < 2; ++d) {
        auto g = New<ExpressionGraph>();
        if(d == 1) g->setDevice(gpu(0));
        g->setSeed(static_cast<uint64_t>(11 + k));
        auto x = g->param("x", c.x, inits::uniform(-1, 1), t);
        auto w = g->param("w", c.w, inits::uniform(-0.5, 0.5), t);
        ConvOptions o;
        o.strides = c.strides;
        o.pads = c.pads;
        o.dilations = c.dilations;
        o.group = c.group;
        auto y = cast(conv(x, w, nullptr, o), Type::float32);
        g->forward();
        out[d] = y->val()->toVector<float>();
      }
      ASSERT_EQ(out[0].size(), out[1].size()) << "case " << k;
      const double tol = t == Type::float32 ? 1e-4 : 2e-2;
      for(size_t i = 0; i < out[0].size(); ++i)
        ASSERT_NEAR(out[1][i], out[0][i], tol * (1 + std::fabs(out[0][i]))) << "case " << k << " " << t << " at " << i;
    }
}

TEST(CudaDevice, OptimizersAndLossScalingMatchTheCpu) {
  REQUIRE_GPU();
  for(Type t : {Type::float32, Type::float16, Type::bfloat16})
    for(std::string algo : {"sgd", "momentum", "adagrad", "adam", "adamw"}) {
      auto want = trainSteps(cpu(), algo, t);
      auto got = trainSteps(gpu(0), algo, t);
      ASSERT_EQ(got.size(), want.size()) << algo << " " << t;
      for(auto& kv : want) {
        const auto& g = got[kv.first];
        ASSERT_EQ(g.size(), kv.second.size()) << kv.first;
        double tol = t == Type::float32 ? 1e-5 : 1e-2;
        for(size_t i = 0; i < g.size(); ++i)
          EXPECT_NEAR(g[i], kv.second[i], tol * (1 + std::fabs(kv.second[i])))
              << algo << " " << t << " " << kv.first << "[" << i << "]";
      }
    }
}

}  // namespace
}  // namespace onyx
