// The CUDA backend's device layer. Without a usable GPU (CI, or a build
// without the backend) the device checks below report themselves SKIPPED
// with the reason; the error paths are checked everywhere.
#include <gtest/gtest.h>

#include <onyx/backend/cuda/device.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

TEST(CudaDevice, CompiledAsConfigured) {
  EXPECT_EQ(cuda::compiled(), ONYX_TEST_CUDA_BUILT != 0);
  if(!cuda::compiled()) {
    EXPECT_EQ(cuda::deviceCount(), 0);
  }
}

// A GPU that is not there (index = the device count) is a one-line error
// naming it, from setDevice, from a session, and from memory allocation.
TEST(CudaDevice, MissingGpuIsAClearError) {
  const size_t missing = static_cast<size_t>(cuda::deviceCount());
  std::string name = "gpu" + std::to_string(missing);
  EXPECT_FALSE(cuda::unavailable(missing).empty());
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

#define REQUIRE_GPU()                                                                     \
  if(cuda::deviceCount() == 0) GTEST_SKIP() << "GPU check not run: " << cuda::unavailable(0)

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

// Random ops draw on the host (ops::drawOnHost): the same seed gives the
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
