// ExpressionGraph semantics: the seed example, params across clear(),
// stale expressions, CSE, inputs, errors that name the op and shapes,
// memory planning and checkpointing.
#include <gtest/gtest.h>

#include <cmath>

#include <onyx/core/device_backend.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

Ptr<ExpressionGraph> newGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  g->reserveWorkspaceMB(8);
  return g;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch(const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Graph, SeedExampleValues) {
  auto graph = newGraph();
  auto x = graph->param("x", {1, 1}, inits::fromValue(2));
  auto y = graph->constant({1, 1}, inits::fromValue(3));
  auto z = x * y + sin(x);
  graph->forward();
  EXPECT_NEAR(z->val()->scalar<double>(), 6.0 + std::sin(2.0), 1e-6);
  graph->backward();
  EXPECT_NEAR(x->grad()->scalar<double>(), 3.0 + std::cos(2.0), 1e-6);
  auto loss = abs(graph->constant({1, 1}, inits::fromValue(6)) - z);
  graph->backprop();
  Optimizer<Sgd>(0.005)->update(graph);
  EXPECT_NEAR(x->val()->scalar<double>(), 2.0 - 0.005 * (3.0 + std::cos(2.0)), 1e-6);
  (void)loss;
}

TEST(Graph, ParamsPersistAcrossClear) {
  auto g = newGraph();
  auto w = g->param("w", {2, 2}, inits::fromValue(1));
  EXPECT_EQ(g->param("w", {2, 2}, inits::fromValue(5)), w);  // same param, init ignored
  w->val()->set(3.0);
  g->clear();
  auto w2 = g->param("w", {2, 2}, inits::zeros());
  EXPECT_EQ(w2->val()->toVector<float>(), std::vector<float>(4, 3.f));
  EXPECT_EQ(g->params()->size(), 1u);
  std::string m = errorOf([&] { g->param("w", {3, 2}, inits::zeros()); });
  EXPECT_NE(m.find("param 'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("2x2"), std::string::npos) << m;
  EXPECT_NE(m.find("3x2"), std::string::npos) << m;
}

TEST(Graph, StaleExpressionAfterClearIsAnError) {
  auto g = newGraph();
  auto a = g->constant({2}, inits::ones());
  auto b = a + a;
  g->clear();
  std::string m = errorOf([&] { (void)b->shape(); });
  EXPECT_NE(m.find("cleared"), std::string::npos) << m;
  // New nodes reuse the memory, but the old handle still does not validate.
  auto c = g->constant({2}, inits::ones());
  (void)c;
  EXPECT_FALSE(b.valid());
}

TEST(Graph, CommonSubexpressionsAreShared) {
  auto g = newGraph();
  auto x = g->param("x", {3}, inits::ones());
  auto a = sin(x);
  auto b = sin(x);
  EXPECT_EQ(a, b);
  EXPECT_NE(sum(x, {0}, true), sum(x, {0}, false));  // attributes differ
}

// A chain where every step's expression is built twice (what an unrolled
// Loop body with a repeated expression does): each second build is a CSE hit
// that returns the first node and leaves the graph's size as it was, and the
// table still finds every earlier node after the hits. A hit used to rebuild
// the whole table (quadratic: a 1e5-iteration Loop took minutes to build).
TEST(Graph, CommonSubexpressionHitsKeepTheTable) {
  auto g = newGraph();
  auto x = g->constant({2}, inits::ones());
  std::vector<Expr> steps;
  Expr h = x;
  const int n = 50000;
  size_t perStep = 0;
  for(int i = 0; i < n; ++i) {
    Expr a = h * x;
    size_t size = g->size();
    Expr b = h * x;  // hit
    ASSERT_EQ(a, b) << "step " << i;
    ASSERT_EQ(g->size(), size) << "step " << i;
    h = relu(a);
    steps.push_back(h);
    if(i == 0) perStep = g->size() - 1;
  }
  for(int i = 1; i < n; i += 997) EXPECT_EQ(relu(steps[size_t(i - 1)] * x), steps[size_t(i)]) << "step " << i;
  EXPECT_EQ(g->size(), 1 + size_t(n) * perStep);  // no hit left a node behind
  g->forward();
  // h_{k+1} = relu(h_k * 1) with h_0 = 1: every step is 1.
  EXPECT_EQ(h->val()->toVector<float>(), (std::vector<float>{1.f, 1.f}));
}

TEST(Graph, GradientsAccumulateOverUses) {
  auto g = newGraph();
  auto x = g->param("x", {3}, inits::fromVector(std::vector<float>{1, 2, 3}));
  auto y = sum(x * x + x);  // dy/dx = 2x + 1
  g->forward();
  g->backward(y);
  EXPECT_EQ(x->grad()->toVector<float>(), (std::vector<float>{3, 5, 7}));
  // A second backward overwrites rather than adds.
  g->backward(y);
  EXPECT_EQ(x->grad()->toVector<float>(), (std::vector<float>{3, 5, 7}));
}

// The gradients of several gathers from one tensor along one axis (a fused
// QKV projection split by three Gathers) are one scatter_add of all their
// pairs, not one zero-filled tensor per gather and adds between them; a
// gather along another axis of the same tensor stays apart (added). The
// gradient is the same either way.
TEST(Graph, GatherGradientsFromOneTensorShareOneScatter) {
  auto g = newGraph();
  std::vector<float> w0(24);
  for(size_t i = 0; i < w0.size(); ++i) w0[i] = float(i);
  auto w = g->param("w", {3, 2, 4}, inits::fromVector(w0));
  auto pick = [&](int axis, int64_t i) { return index_select(w, axis, std::vector<int64_t>{i}); };
  // loss = sum(w[0]) + 2 sum(w[1]) + 3 sum(w[2]) + 5 sum(w[2]): dw = 1, 2, 8 on w[0], w[1], w[2].
  auto loss = sum(pick(0, 0)) + sum(pick(0, 1)) * 2.f + sum(pick(0, 2)) * 3.f + sum(pick(0, 2) * 5.f);
  Expr dw = g->gradients(loss, {w})[0];
  ASSERT_EQ(dw->op()->name, "scatter_add");
  EXPECT_EQ(dw->numChildren(), 8u);  // four pairs: each pick is a gather of its own (its own indices constant)
  dw->keepValue();
  g->forward();
  std::vector<float> want(24);
  for(size_t i = 0; i < 24; ++i) want[i] = i < 8 ? 1.f : i < 16 ? 2.f : 8.f;
  EXPECT_EQ(dw->val()->toVector<float>(), want);
  g->backward(loss);
  EXPECT_EQ(w->grad()->toVector<float>(), want);

  // Along axis 2 as well: that scatter is a separate one, added to the first.
  g->clear();
  w = g->param("w", {3, 2, 4}, inits::fromVector(w0));
  loss = sum(pick(0, 0)) + sum(pick(0, 1)) + sum(pick(2, 3)) * 4.f;
  dw = g->gradients(loss, {w})[0];
  ASSERT_EQ(dw->op()->name, "add");
  size_t scatters = 0;
  for(size_t i = 0; i < 2; ++i) {
    const Node* s = dw->child(i).get();
    if(s->op() && s->op()->name == "scatter_add") scatters += s->numChildren() / 2;
  }
  EXPECT_EQ(scatters, 3u);  // pairs: two along axis 0 in one node, one along axis 2 in the other
  dw->keepValue();
  g->forward();
  for(size_t i = 0; i < 24; ++i) want[i] = (i < 16 ? 1.f : 0.f) + (i % 4 == 3 ? 4.f : 0.f);
  EXPECT_EQ(dw->val()->toVector<float>(), want);
  g->backward(loss);
  EXPECT_EQ(w->grad()->toVector<float>(), want);
}

// A training batch norm's dx is one node (batch_moments_grad with dy and
// f: batch_normalize's part folded into the statistics' part), and equals
// the closed form dx = gamma r / n (n dy - sum dy - xhat sum(dy xhat)).
TEST(Graph, TrainingBatchNormDxIsOneNode) {
  auto g = newGraph();
  const int64_t N = 2, C = 3, HW = 5, n = N * HW;
  std::vector<float> x0(size_t(N * C * HW)), w0(x0.size()), gamma0{0.5f, -1.5f, 2.f}, beta0{0.1f, 0.2f, -0.3f};
  for(size_t i = 0; i < x0.size(); ++i) {
    x0[i] = std::sin(float(i) * 1.7f) * 2.f;
    w0[i] = std::cos(float(i) * 0.9f);
  }
  auto x = g->param("x", {N, C, HW}, inits::fromVector(x0));
  auto gamma = g->constant(TensorBase::fromVector<float>(Shape({C}), gamma0));
  auto beta = g->constant(TensorBase::fromVector<float>(Shape({C}), beta0));
  auto w = g->constant(TensorBase::fromVector<float>(Shape({N, C, HW}), w0));
  Expr m = batch_moments(x);
  Expr mu = reshape(slice(m, 0, 0, 1), std::vector<int64_t>{C}), var = reshape(slice(m, 0, 1, 2), std::vector<int64_t>{C});
  Expr y = batch_normalize(x, mu, var, gamma, beta, 1e-3);
  Expr loss = sum(y * w);  // dy = w
  Expr dx = g->gradients(loss, {x})[0];
  ASSERT_EQ(dx->op()->name, "batch_moments_grad");
  EXPECT_EQ(dx->numChildren(), 5u);
  dx->keepValue();
  g->forward();
  std::vector<float> got = dx->val()->toVector<float>();
  for(int64_t c = 0; c < C; ++c) {
    double mean = 0, v = 0, sdy = 0, sdyx = 0;
    auto at = [&](int64_t b, int64_t k) { return size_t((b * C + c) * HW + k); };
    for(int64_t b = 0; b < N; ++b)
      for(int64_t k = 0; k < HW; ++k) mean += x0[at(b, k)] / double(n);
    for(int64_t b = 0; b < N; ++b)
      for(int64_t k = 0; k < HW; ++k) v += (x0[at(b, k)] - mean) * (x0[at(b, k)] - mean) / double(n);
    const double r = 1 / std::sqrt(v + 1e-3);
    for(int64_t b = 0; b < N; ++b)
      for(int64_t k = 0; k < HW; ++k) {
        sdy += w0[at(b, k)];
        sdyx += w0[at(b, k)] * (x0[at(b, k)] - mean) * r;
      }
    for(int64_t b = 0; b < N; ++b)
      for(int64_t k = 0; k < HW; ++k) {
        const double xhat = (x0[at(b, k)] - mean) * r;
        const double want = gamma0[size_t(c)] * r / double(n) * (double(n) * w0[at(b, k)] - sdy - xhat * sdyx);
        EXPECT_NEAR(got[at(b, k)], want, 1e-4 * (1 + std::fabs(want))) << "c " << c << " b " << b << " k " << k;
      }
  }
}

// A param's gradient tensor is one object across steps: backward writes
// the new gradient into it (the node computing it writes there directly
// when nothing else holds the tensor, else it is copied in), also when two
// params receive the same gradient node or the graph is rebuilt, and a
// view's gradient (a reshape) is copied in.
TEST(Graph, ParamGradientTensorPersistsAcrossSteps) {
  auto g = newGraph();
  auto step = [&](float scale, bool useOldGrad) {
    g->clear();
    auto a = g->param("a", {2, 2}, inits::fromVector(std::vector<float>{1, 2, 3, 4}));
    auto b = g->param("b", {2, 2}, inits::fromVector(std::vector<float>{5, 6, 7, 8}));
    auto v = g->param("v", {4}, inits::fromVector(std::vector<float>{1, -1, 2, -2}));
    // d/da = d/db = scale * 2 (a + b) (one node for both); d/dv = scale (a reshape of a constant's gradient).
    Expr s = a + b;
    Expr loss = sum(s * s) * static_cast<double>(scale) + sum(reshape(v, Shape({2, 2})) * static_cast<double>(scale));
    // A constant made of a's last gradient (the same tensor): a's new
    // gradient must not overwrite it while backward reads it.
    if(useOldGrad) loss = loss + sum(a * g->constant(a->grad()));
    g->forward();
    g->backward(loss);
  };
  step(1.f, false);
  const TensorBase *ga = g->get("a")->grad().get(), *gb = g->get("b")->grad().get(), *gv = g->get("v")->grad().get();
  EXPECT_EQ(ga->toVector<float>(), (std::vector<float>{12, 16, 20, 24}));
  EXPECT_EQ(gb->toVector<float>(), (std::vector<float>{12, 16, 20, 24}));
  EXPECT_EQ(gv->toVector<float>(), (std::vector<float>{1, 1, 1, 1}));
  step(0.5f, false);  // nothing holds the tensors: written in place
  EXPECT_EQ(g->get("a")->grad().get(), ga);
  EXPECT_EQ(g->get("b")->grad().get(), gb);
  EXPECT_EQ(g->get("v")->grad().get(), gv);
  EXPECT_EQ(ga->toVector<float>(), (std::vector<float>{6, 8, 10, 12}));
  EXPECT_EQ(gb->toVector<float>(), (std::vector<float>{6, 8, 10, 12}));
  EXPECT_EQ(gv->toVector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  Tensor held = g->get("b")->grad();  // a caller's handle: copied into
  step(0.5f, true);                   // d/da gains the old gradient {6, 8, 10, 12}
  EXPECT_EQ(g->get("a")->grad().get(), ga);
  EXPECT_EQ(held.get(), gb);
  EXPECT_EQ(ga->toVector<float>(), (std::vector<float>{12, 16, 20, 24}));
  EXPECT_EQ(held->toVector<float>(), (std::vector<float>{6, 8, 10, 12}));
}

TEST(Graph, FrozenParamGetsNoGradient) {
  auto g = newGraph();
  auto w = g->param("w", {2}, inits::ones());
  auto f = g->param("f", {2}, inits::ones(), /*trainable=*/false);
  auto y = sum(w * f * 2.0);
  g->backprop();
  EXPECT_EQ(w->grad()->toVector<float>(), (std::vector<float>{2, 2}));
  EXPECT_FALSE(f->grad());
  (void)y;
}

TEST(Graph, InputsRebindBetweenRuns) {
  auto g = newGraph();
  auto x = g->input("x", {2});
  auto y = x * 2.0;
  x->bind(TensorBase::fromVector<float>({2}, {1, 2}));
  g->forward();
  EXPECT_EQ(y->val()->toVector<float>(), (std::vector<float>{2, 4}));
  g->bindInput("x", TensorBase::fromVector<float>({2}, {5, 6}));
  g->forward();
  EXPECT_EQ(y->val()->toVector<float>(), (std::vector<float>{10, 12}));
  std::string m = errorOf([&] { x->bind(TensorBase::fromVector<float>({3}, {1, 2, 3})); });
  EXPECT_NE(m.find("input 'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("shape 2"), std::string::npos) << m;
  auto g2 = newGraph();
  auto unbound = g2->input("u", {1});
  auto z = unbound + 1.0;
  (void)z;
  m = errorOf([&] { g2->forward(); });
  EXPECT_NE(m.find("input 'u' has no value"), std::string::npos) << m;
}

TEST(Graph, BadInputErrorsNameOpShapesAndFix) {
  auto g = newGraph();
  auto a = g->constant({2, 3}, inits::ones());
  auto b = g->constant({4}, inits::ones());
  std::string m = errorOf([&] { (void)(a + b); });
  EXPECT_NE(m.find("add:"), std::string::npos) << m;
  EXPECT_NE(m.find("2x3"), std::string::npos) << m;
  EXPECT_NE(m.find("must match or be 1"), std::string::npos) << m;

  m = errorOf([&] { (void)sum(a, 5); });
  EXPECT_NE(m.find("sum:"), std::string::npos) << m;
  EXPECT_NE(m.find("axis 5"), std::string::npos) << m;

  auto i = g->constant({2}, inits::ones(), Type::int64);
  m = errorOf([&] { (void)sin(i); });
  EXPECT_NE(m.find("sin:"), std::string::npos) << m;
  EXPECT_NE(m.find("int64"), std::string::npos) << m;
  EXPECT_NE(m.find("cast"), std::string::npos) << m;

  auto f64 = g->constant({2, 3}, inits::ones(), Type::float64);
  m = errorOf([&] { (void)(a * f64); });
  EXPECT_NE(m.find("float32"), std::string::npos) << m;
  EXPECT_NE(m.find("float64"), std::string::npos) << m;

  m = errorOf([&] { (void)reshape(a, Shape{4, 2}); });
  EXPECT_NE(m.find("reshape:"), std::string::npos) << m;
  EXPECT_NE(m.find("6 elements"), std::string::npos) << m;

  // A failed build leaves the graph usable.
  auto ok = a * 2.0;
  g->forward();
  EXPECT_EQ(ok->val()->toVector<float>(), std::vector<float>(6, 2.f));
}

TEST(Graph, DeviceAndBackwardMisuseAreErrors) {
  auto g = New<ExpressionGraph>();
  // A GPU that is not there (CudaDevice.* checks the message in full).
  size_t missing = static_cast<size_t>(gpuDeviceCount());
  EXPECT_NE(errorOf([&] { g->setDevice({missing, DeviceType::gpu}); }).find("setDevice(gpu"), std::string::npos);
  auto x = g->param("x", {1}, inits::ones());
  auto y = x * 2.0;
  g->setInference(true);
  EXPECT_NE(errorOf([&] { g->backward(); }).find("inference"), std::string::npos);
  (void)y;
}

TEST(Graph, GraphvizListsNodesAndEdges) {
  auto g = newGraph();
  auto x = g->param("x", {1, 1}, inits::fromValue(2));
  auto y = g->constant({1, 1}, inits::fromValue(3));
  auto z = x * y + sin(x);
  std::string dot = g->graphviz();
  EXPECT_EQ(dot.rfind("digraph ExpressionGraph {", 0), 0u);
  EXPECT_NE(dot.find("param ("), std::string::npos);
  EXPECT_NE(dot.find("sin ("), std::string::npos);
  EXPECT_NE(dot.find("add ("), std::string::npos);
  size_t edges = 0;
  for(size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 1)) ++edges;
  EXPECT_EQ(edges, 5u);  // x->mul, y->mul, x->sin, mul->add, sin->add
  (void)z;
}

// Inference frees values after their last consumer; training keeps them.
TEST(Memory, InferenceFreesIntermediates) {
  auto run = [](bool inference) {
    auto g = newGraph();
    g->setInference(inference);
    auto x = g->constant({256, 256}, inits::ones());
    Expr h = x;
    for(int i = 0; i < 20; ++i) h = sin(h) * 0.5 + 0.1 * i;
    g->resetPeakMemory();
    g->forward();
    return std::make_pair(g->memoryStats().peakBytes, h->val()->toVector<float>());
  };
  auto train = run(false), infer = run(true);
  EXPECT_EQ(train.second, infer.second);
  EXPECT_LT(infer.first * 5, train.first) << "inference peak " << infer.first << " vs training " << train.first;
}

// Checkpointing: same gradients, less memory at the peak of backward.
TEST(Memory, CheckpointingRecomputesAndSavesMemory) {
  auto run = [](bool checkpointing) {
    auto g = newGraph();
    g->setCheckpointing(checkpointing);
    auto w = g->param("w", {128, 128}, inits::uniform(-1, 1));
    Expr h = w;
    for(int i = 0; i < 40; ++i) {
      h = sin(h * 1.1) + h * 0.5;
      if(i % 8 == 7) h = checkpoint(h);
    }
    auto loss = sum(h);
    g->resetPeakMemory();
    g->forward();
    g->backward(loss);
    return std::make_pair(g->memoryStats().peakBytes, w->grad()->toVector<float>());
  };
  auto plain = run(false), ckpt = run(true);
  EXPECT_EQ(plain.second, ckpt.second);
  EXPECT_LT(ckpt.first * 2, plain.first) << "checkpointed peak " << ckpt.first << " vs " << plain.first;
}

TEST(Graph, NodeConstructionIsArenaBacked) {
  // Rebuilding the same graph reuses the node pool: ids restart, nothing leaks.
  auto g = newGraph();
  auto w = g->param("w", {4}, inits::ones());
  size_t first = 0;
  for(int step = 0; step < 3; ++step) {
    g->clear();
    auto x = g->param("w", {4}, inits::ones());
    Expr h = x;
    for(int i = 0; i < 100; ++i) h = h * 1.01 + 0.5;
    if(step == 0) first = g->size();
    EXPECT_EQ(g->size(), first);
  }
  (void)w;
}

}  // namespace
}  // namespace onyx

namespace onyx {
namespace {

// Attributes given by name (as files do) are checked, and a bad one leaves
// the graph as it was.
TEST(Graph, BadAttributeByNameIsAnErrorAndRollsBack) {
  auto g = New<ExpressionGraph>();
  auto x = g->constant({2, 3}, inits::ones());
  size_t before = g->size();
  const OpDef& s = Registry::instance().get("sum");
  try {
    g->make(s, std::vector<Expr>{x}, std::vector<std::pair<std::string, AttrValue>>{{"axis", int64_t(0)}});
    FAIL() << "expected an error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sum: unknown attribute 'axis'"), std::string::npos) << e.what();
  }
  try {
    g->make(s, std::vector<Expr>{x}, std::vector<std::pair<std::string, AttrValue>>{{"axes", std::string("0")}});
    FAIL() << "expected an error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong kind of value"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g->size(), before);
  auto y = g->make(s, std::vector<Expr>{x}, std::vector<std::pair<std::string, AttrValue>>{{"axes", attr(std::vector<int64_t>{1})}});
  g->forward();
  EXPECT_EQ(y->val()->toVector<float>(), (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace onyx

namespace onyx {
namespace {
// NaN passes through relu (PyTorch, numpy and ONNX's reference do the same),
// so a NaN in the data shows up in the loss instead of vanishing.
TEST(Elementwise, ReluKeepsNaN) {
  auto g = New<ExpressionGraph>();
  Expr y = relu(g->constant(TensorBase::fromVector<float>({3}, {std::nanf(""), -1.f, 2.f})));
  y->keepValue();
  g->forward();
  std::vector<double> v;
  y->val()->get(v);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(v[2], 2);
}
}  // namespace
}  // namespace onyx
