// Convolutions through oneDNN (backend/cpu/dnnl_conv.h): the epilogue, which
// no graph op uses yet, against a plain reference; the weight slot; and the
// conv ops' oneDNN path against their portable kernels (ONYX_DNNL=0's) on
// random shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/backend/cpu/winograd.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

using host::ConvPostOp;
using PK = ConvPostOp::Kind;

std::vector<float> randomVec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for(float& f : v) f = u(rng);
  return v;
}

// A 2-D grouped conv written out, in double.
std::vector<double> referenceConv(const host::ConvDims& cd, const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b) {
  const host::ConvGeom& g = cd.g;
  std::vector<double> y(size_t(cd.N * cd.M * g.posSize));
  for(int64_t n = 0; n < cd.N; ++n)
    for(int64_t m = 0; m < cd.M; ++m)
      for(int64_t oh = 0; oh < g.pos[1]; ++oh)
        for(int64_t ow = 0; ow < g.pos[2]; ++ow) {
          double acc = b.empty() ? 0.0 : b[size_t(m)];
          const int64_t grp = m / cd.Mg;
          for(int64_t c = 0; c < cd.Cg; ++c)
            for(int64_t kh = 0; kh < g.k[1]; ++kh)
              for(int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1], iw = ow * g.s[2] + kw * g.d[2] - g.pb[2];
                if(ih < 0 || ih >= g.img[1] || iw < 0 || iw >= g.img[2]) continue;
                acc += double(x[size_t(((n * cd.C + grp * cd.Cg + c) * g.img[1] + ih) * g.img[2] + iw)]) *
                       w[size_t(((m * cd.Cg + c) * g.k[1] + kh) * g.k[2] + kw)];
              }
          y[size_t(((n * cd.M + m) * g.pos[1] + oh) * g.pos[2] + ow)] = acc;
        }
  return y;
}

double applyPostOp(const ConvPostOp& op, double v, double residual) {
  const double sig = 1.0 / (1.0 + std::exp(-v));
  switch(op.kind) {
    case PK::Relu: return std::max(v, 0.0);
    case PK::LeakyRelu: return v >= 0 ? v : op.alpha * v;
    case PK::Clip: return std::min(std::max(v, double(op.alpha)), double(op.beta));
    case PK::HardSwish: return v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
    case PK::HardSigmoid: return std::max(0.0, std::min(1.0, op.alpha * v + op.beta));
    case PK::Swish: return v * sig;
    case PK::GeluErf: return v / 2 * (1 + std::erf(v / std::sqrt(2.0)));
    case PK::GeluTanh: return v / 2 * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case PK::Logistic: return sig;
    case PK::Tanh: return std::tanh(v);
    case PK::Sum: return v + residual;
  }
  return v;
}

// conv 2-D: x [2, C, 9, 8] with 3x3 windows, stride 2 in h, dilation 2 in w,
// pads (1, 0) begin and (2, 1) end.
host::ConvDims smallConv(int64_t C, int64_t M, int64_t G) {
  host::Spatial sp;
  sp.nd = 2;
  sp.strides = {2, 1};
  sp.dilations = {1, 2};
  sp.pads = {1, 0, 2, 1};
  Shape x({2, C, 9, 8});
  int64_t oh = host::windowCount(9, 3, 2, 1, 1, 2, false), ow = host::windowCount(8, 3, 1, 2, 0, 1, false);
  return host::convDims(x, Shape({2, M, oh, ow}), {3, 3}, sp, G);
}

struct LayoutGuard {
  ~LayoutGuard() { host::setDnnlLayout(host::DnnlLayout::Auto); }
};

TEST(DnnlConv, EpilogueMatchesReference) {
  LayoutGuard guard;
  std::mt19937 rng(7);
  const std::vector<std::vector<ConvPostOp>> lists = {
      {{PK::Relu}},
      {{PK::LeakyRelu, 0.1f}},
      {{PK::Clip, -0.5f, 0.25f}},
      {{PK::HardSwish}},
      {{PK::HardSigmoid, 0.2f, 0.5f}},
      {{PK::Swish}},
      {{PK::GeluErf}},
      {{PK::GeluTanh}},
      {{PK::Logistic}},
      {{PK::Tanh}},
      {{PK::Sum}, {PK::Relu}},     // ResNet's residual block end
      {{PK::Clip, 0.f, 6.f}, {PK::Sum}},  // MobileNet's relu6, then a residual
  };
  for(auto layout : {host::DnnlLayout::Plain, host::DnnlLayout::Blocked})
    for(int64_t G : {int64_t(1), int64_t(2), int64_t(8)}) {
      host::setDnnlLayout(layout);
      const host::ConvDims cd = smallConv(8, 8, G);
      auto x = randomVec(size_t(cd.N * cd.C * cd.g.imgSize), rng);
      auto w = randomVec(size_t(cd.M * cd.Cg * cd.g.kSize), rng);
      auto b = randomVec(size_t(cd.M), rng);
      const std::vector<double> plain = referenceConv(cd, x, w, b);
      for(const auto& ops : lists)
        for(bool inPlace : {false, true}) {
          const bool sum = std::any_of(ops.begin(), ops.end(), [](const ConvPostOp& o) { return o.kind == PK::Sum; });
          if(inPlace && !sum) continue;
          auto residual = randomVec(plain.size(), rng);
          std::vector<float> y = inPlace ? residual : std::vector<float>(plain.size(), NAN);
          host::ConvEpilogue ep{ops, inPlace ? y.data() : residual.data()};
          ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w.data(), b.data(), y.data(), &ep));
          for(size_t i = 0; i < y.size(); ++i) {
            double want = plain[i];
            for(const ConvPostOp& op : ops) want = applyPostOp(op, want, residual[i]);
            ASSERT_NEAR(y[i], want, 1e-4 * (1 + std::abs(want)))
                << "element " << i << ", group " << G << ", first post-op " << int(ops[0].kind)
                << (inPlace ? " in place" : "") << ", layout " << int(layout);
          }
        }
    }
}

TEST(DnnlConv, TransposedEpilogue) {
  // conv_transpose with a relu: the adjoint of smallConv's conv, plus b.
  std::mt19937 rng(3);
  const host::ConvDims cd = smallConv(4, 6, 2);
  auto x = randomVec(size_t(cd.N * cd.M * cd.g.posSize), rng);  // the positions side
  auto w = randomVec(size_t(cd.M * cd.Cg * cd.g.kSize), rng);
  auto b = randomVec(size_t(cd.C), rng);
  std::vector<float> y(size_t(cd.N * cd.C * cd.g.imgSize), NAN), yr(y.size());
  host::ConvEpilogue ep{{{PK::Relu}}, nullptr};
  ASSERT_TRUE(host::dnnlConvTransposed(cd, 2, x.data(), w.data(), b.data(), y.data(), &ep));
  ASSERT_TRUE(host::dnnlConvTransposed(cd, 2, x.data(), w.data(), b.data(), yr.data()));
  for(size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(y[i], std::max(yr[i], 0.f)) << i;
  // <conv(img), pos> == <img, conv_transpose(pos)> without bias.
  auto img = randomVec(y.size(), rng);
  std::vector<float> conv(x.size()), tr(y.size());
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, img.data(), w.data(), nullptr, conv.data()));
  ASSERT_TRUE(host::dnnlConvTransposed(cd, 2, x.data(), w.data(), nullptr, tr.data()));
  double a = 0, bsum = 0;
  for(size_t i = 0; i < x.size(); ++i) a += double(conv[i]) * x[i];
  for(size_t i = 0; i < y.size(); ++i) bsum += double(img[i]) * tr[i];
  EXPECT_NEAR(a, bsum, 1e-3 * (1 + std::abs(a)));
}

TEST(DnnlConv, WeightSlotKeepsTheReorderedWeights) {
  LayoutGuard guard;
  host::setDnnlLayout(host::DnnlLayout::Blocked);  // blocked weights for sure
  std::mt19937 rng(5);
  const host::ConvDims cd = smallConv(16, 16, 1);
  auto x = randomVec(size_t(cd.N * cd.C * cd.g.imgSize), rng);
  auto w = randomVec(size_t(cd.M * cd.Cg * cd.g.kSize), rng);
  auto w2 = randomVec(w.size(), rng);
  std::vector<float> y(size_t(cd.N * cd.M * cd.g.posSize)), yRef(y.size());
  host::DnnlWeightSlot slot;
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w.data(), nullptr, y.data(), nullptr, &slot));
  ASSERT_TRUE(slot);
  void* first = slot.get();
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w.data(), nullptr, y.data(), nullptr, &slot));
  EXPECT_EQ(slot.get(), first);  // same W pointer: reused
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w.data(), nullptr, yRef.data()));
  EXPECT_EQ(y, yRef);
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w2.data(), nullptr, y.data(), nullptr, &slot));
  EXPECT_NE(slot.get(), first);  // another W: reordered again
  ASSERT_TRUE(host::dnnlConvForward(cd, 2, x.data(), w2.data(), nullptr, yRef.data()));
  EXPECT_EQ(y, yRef);
}

TEST(DnnlConv, DeclinesWhatItDoesNotTake) {
  host::ConvDims cd = smallConv(4, 4, 1);
  std::vector<float> buf(4096);
  cd.g.pb[1] = -1;  // cropping
  EXPECT_FALSE(host::dnnlConvForward(cd, 2, buf.data(), buf.data(), nullptr, buf.data()));
  cd = smallConv(4, 4, 1);
  cd.N = 0;
  EXPECT_FALSE(host::dnnlConvForward(cd, 2, buf.data(), buf.data(), nullptr, buf.data()));
  cd = smallConv(4, 4, 1);
  host::ConvEpilogue twoSums{{{PK::Sum}, {PK::Sum}}, buf.data()};
  EXPECT_FALSE(host::dnnlConvForward(cd, 2, buf.data(), buf.data(), nullptr, buf.data(), &twoSums));
}

// ------------------------------------------- the ops: oneDNN vs portable

struct EnabledGuard {
  ~EnabledGuard() { host::setDnnlEnabled(true); host::setDnnlLayout(host::DnnlLayout::Auto); }
};

enum class Op { Conv, Transpose, GradWeight };

struct Case {
  Op op;
  int nd;
  int64_t N, G, Cg, Mg;
  std::vector<int64_t> img, k;
  ConvOptions o;
  bool bias, cutDy;
  std::string describe() const {
    std::string s = op == Op::Conv ? "conv" : op == Op::Transpose ? "conv_transpose" : "conv_grad_weight";
    s += " nd " + std::to_string(nd) + " N " + std::to_string(N) + " G " + std::to_string(G) + " Cg " +
         std::to_string(Cg) + " Mg " + std::to_string(Mg) + " img/k/s/d:";
    for(int i = 0; i < nd; ++i)
      s += " " + std::to_string(img[size_t(i)]) + "/" + std::to_string(k[size_t(i)]) + "/" +
           std::to_string(o.strides[size_t(i)]) + "/" + std::to_string(o.dilations[size_t(i)]);
    s += " pads";
    for(int64_t p : o.pads) s += " " + std::to_string(p);
    for(int64_t p : o.outputPadding) s += " op" + std::to_string(p);
    return s;
  }
};

Case randomCase(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Case c;
  c.op = Op(pick(0, 2));
  c.nd = int(pick(1, 3));
  c.N = pick(1, 2);
  switch(pick(0, 2)) {
    case 0: c.G = 1; break;
    case 1: c.G = pick(2, 3); break;
    default: c.G = pick(3, 12); break;  // depthwise
  }
  c.o.group = c.G;
  const bool depthwise = c.G > 3;
  c.Cg = depthwise ? 1 : pick(1, 5);
  c.Mg = depthwise ? pick(1, 2) : pick(1, 5);
  const int64_t maxImg = c.nd == 3 ? 7 : c.nd == 2 ? 12 : 20;
  for(int i = 0; i < c.nd; ++i) {
    int64_t k = pick(1, c.nd == 3 ? 3 : 5), s = pick(1, 3), d = pick(1, 2);
    int64_t pb = pick(0, k - 1), pe = pick(0, k - 1);
    int64_t span = (k - 1) * d + 1;
    int64_t img = std::max(pick(1, maxImg), span - pb - pe);
    c.img.push_back(img);
    c.k.push_back(k);
    c.o.strides.push_back(s);
    c.o.dilations.push_back(d);
    c.o.pads.push_back(pb);
    c.o.outputPadding.push_back(pick(0, std::max(s, d) - 1));
  }
  for(int i = 0; i < c.nd; ++i) c.o.pads.push_back(c.o.pads[size_t(i)]);
  for(int i = 0; i < c.nd; ++i) {
    const int64_t span = (c.k[size_t(i)] - 1) * c.o.dilations[size_t(i)] + 1;
    c.o.pads[size_t(c.nd + i)] = std::max<int64_t>(pick(0, c.k[size_t(i)] - 1), span - c.img[size_t(i)] - c.o.pads[size_t(i)]);
  }
  if(c.op == Op::Transpose)  // img is x's (the positions'): keep y at least 1 wide
    for(int i = 0; i < c.nd; ++i) {
      size_t u = size_t(i), e = size_t(c.nd + i);
      const int64_t span = (c.k[u] - 1) * c.o.dilations[u] + 1;
      const int64_t room = c.o.strides[u] * (c.img[u] - 1) + c.o.outputPadding[u] + span - 1;
      c.o.pads[e] = std::min(c.o.pads[e], room);
      c.o.pads[u] = std::min(c.o.pads[u], room - c.o.pads[e]);
    }
  c.bias = pick(0, 1) == 1;
  c.cutDy = pick(0, 3) == 0;
  return c;
}

// Runs the case's op on fixed random data, W a constant (so the weight slot
// is used) and x an input; returns y.
std::vector<float> runCase(const Case& c, uint32_t seed) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  g->reserveWorkspaceMB(16);
  std::mt19937 rng(seed);
  auto input = [&](const Shape& s) {
    Expr e = g->input("in" + std::to_string(g->size()), s, Type::float32);
    e->bind(TensorBase::fromVector<float>(s, randomVec(size_t(s.elements()), rng)));
    return e;
  };
  auto constant = [&](const Shape& s) {
    return g->constant(TensorBase::fromVector<float>(s, randomVec(size_t(s.elements()), rng)));
  };
  const std::vector<int64_t>& spatial = c.img;
  const std::vector<int64_t>& kernel = c.k;
  const int64_t C = c.G * c.Cg, M = c.G * c.Mg;
  Expr y;
  if(c.op == Op::Conv) {
    ConvOptions o = c.o;
    o.outputPadding.clear();
    std::vector<int64_t> xs{c.N, C}, ws{M, c.Cg};
    xs.insert(xs.end(), spatial.begin(), spatial.end());
    ws.insert(ws.end(), kernel.begin(), kernel.end());
    y = conv(input(Shape(xs)), constant(Shape(ws)), c.bias ? constant(Shape({M})) : Expr(), o);
  } else if(c.op == Op::Transpose) {
    // x holds the positions: M channels, spatial dims `img`.
    std::vector<int64_t> xs{c.N, M}, ws{M, c.Cg};
    xs.insert(xs.end(), spatial.begin(), spatial.end());
    ws.insert(ws.end(), kernel.begin(), kernel.end());
    y = conv_transpose(input(Shape(xs)), constant(Shape(ws)), c.bias ? constant(Shape({C})) : Expr(), c.o);
  } else {
    ConvOptions o = c.o;
    o.outputPadding.clear();
    std::vector<int64_t> xs{c.N, C}, dys{c.N, M};
    xs.insert(xs.end(), spatial.begin(), spatial.end());
    for(int i = 0; i < c.nd; ++i) {
      size_t u = size_t(i);
      int64_t out = host::windowCount(c.img[u], c.k[u], o.strides[u], o.dilations[u], o.pads[u],
                                      o.pads[u + size_t(c.nd)], false);
      dys.push_back(c.cutDy && out > 1 ? out - 1 : out);
    }
    y = conv_grad_weight(input(Shape(xs)), input(Shape(dys)), c.k, o);
  }
  g->forward();
  return y->val()->toVector<float>();
}

TEST(DnnlConv, OpsMatchThePortableKernels) {
  EnabledGuard guard;
  std::mt19937 rng(2024);
  int taken = 0;
  for(int t = 0; t < 150; ++t) {
    Case c = randomCase(rng);
    for(auto layout : {host::DnnlLayout::Plain, host::DnnlLayout::Blocked}) {
      host::setDnnlLayout(layout);
      host::setDnnlEnabled(false);
      std::vector<float> want = runCase(c, uint32_t(t));
      host::setDnnlEnabled(true);
      const uint64_t before = host::dnnlConvRuns();
      std::vector<float> got = runCase(c, uint32_t(t));
      taken += host::dnnlConvRuns() > before;
      ASSERT_EQ(got.size(), want.size()) << c.describe();
      float scale = 1;
      for(float v : want) scale = std::max(scale, std::abs(v));
      for(size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-5f * scale * std::sqrt(float(c.Cg * c.Mg + 16)))
            << c.describe() << ", element " << i << ", layout " << int(layout);
    }
  }
  // Most cases must have gone through oneDNN, not silently fallen back.
  EXPECT_GT(taken, 250);
}

// A weight-gradient case of one group (dy the full output).
Case gradWeightCase(int nd, int64_t N, int64_t Cg, int64_t Mg, std::vector<int64_t> img, std::vector<int64_t> k,
                    std::vector<int64_t> s, std::vector<int64_t> d, std::vector<int64_t> pads) {
  Case c;
  c.op = Op::GradWeight;
  c.nd = nd;
  c.N = N;
  c.G = 1;
  c.Cg = Cg;
  c.Mg = Mg;
  c.img = std::move(img);
  c.k = std::move(k);
  c.o.strides = std::move(s);
  c.o.dilations = std::move(d);
  c.o.pads = std::move(pads);
  c.bias = false;
  c.cutDy = false;
  return c;
}

// The case's result with oneDNN on against the portable kernel's (oneDNN
// off), within relTol of the largest expected magnitude.
void expectNearThePortableKernel(const Case& c, uint32_t seed, float relTol) {
  host::setDnnlEnabled(false);
  std::vector<float> want = runCase(c, seed);
  host::setDnnlEnabled(true);
  std::vector<float> got = runCase(c, seed);
  ASSERT_EQ(got.size(), want.size()) << c.describe();
  float scale = 1;
  for(float v : want) scale = std::max(scale, std::abs(v));
  for(size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], relTol * scale) << c.describe() << ", element " << i;
}

// The oneDNN path's result of the case against the portable kernel's.
void expectPortableResult(const Case& c, uint32_t seed) {
  expectNearThePortableKernel(c, seed, 2e-5f * std::sqrt(float(c.Cg * c.Mg + 16)));
}

// The same for a weight gradient, expecting `runs` (a path's counter) to
// grow by one.
template <class Runs>
void expectPathMatchesThePortableKernel(const Case& c, uint32_t seed, Runs runs) {
  const uint64_t before = runs();
  expectNearThePortableKernel(c, seed, 1e-5f * std::sqrt(float(c.N * 64)));
  EXPECT_EQ(runs(), before + 1) << c.describe();
}

// Weight gradients over small images (at most 64 positions, enough samples
// for a product 512 deep) run as one GEMM per block of samples: 1-, 2- and
// 3-D, strides, dilations and uneven pads, and a batch of two blocks, each
// against the portable kernel (oneDNN off).
TEST(DnnlConv, GradWeightOfSmallImagesMatchesThePortableKernel) {
  EnabledGuard guard;
  const std::vector<Case> cases{
      gradWeightCase(2, 13, 6, 5, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}),          // 49 positions, one block
      gradWeightCase(2, 45, 4, 3, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}),          // blocks of 42 and 3 samples
      gradWeightCase(2, 40, 3, 4, {9, 8}, {3, 2}, {2, 1}, {1, 2}, {0, 1, 1, 0}),          // stride 2, dilation, uneven pads
      gradWeightCase(1, 50, 2, 3, {40}, {5}, {2}, {2}, {3, 1}),                          // 1-D, 18 positions
      gradWeightCase(3, 20, 2, 3, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1})};  // 3-D, 64 positions
  for(size_t i = 0; i < cases.size(); ++i)
    expectPathMatchesThePortableKernel(cases[i], uint32_t(100 + i), ops::convGradWeightGemmRuns);
}

// Weight gradients of 16 or more channels each way run as one GEMM per tap
// over a padded grid (ops/convolution.cpp, convGradWeightGrid): the
// geometries its rule admits (end pads smaller than the begin ones, no
// pads, dilation, strides, 1-D and 3-D, two blocks of samples; grids at
// most 30 % larger than the images), against the portable kernel.
TEST(DnnlConv, GradWeightOnAGridMatchesThePortableKernel) {
  EnabledGuard guard;
  const std::vector<Case> cases{
      gradWeightCase(2, 3, 16, 24, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}),     // ResNet's 3x3
      gradWeightCase(2, 25, 16, 16, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}),    // blocks of 19 and 6 samples
      gradWeightCase(2, 2, 17, 20, {40, 45}, {5, 3}, {1, 1}, {2, 1}, {4, 2, 3, 0}),     // dilation, uneven pads
      gradWeightCase(2, 2, 16, 16, {20, 21}, {3, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}),     // no pads
      gradWeightCase(1, 3, 16, 32, {60}, {7}, {1}, {1}, {3, 3}),                        // 1-D
      gradWeightCase(3, 2, 16, 16, {12, 12, 12}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}),  // 3-D
      // Strides: phase images per dim.
      gradWeightCase(2, 3, 16, 24, {28, 28}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}),     // ResNet's downsampling 3x3
      gradWeightCase(2, 2, 16, 16, {27, 25}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}),     // odd images: short phases
      gradWeightCase(2, 2, 16, 20, {30, 29}, {3, 3}, {3, 3}, {2, 2}, {2, 2, 1, 1}),     // stride 3, dilation, uneven pads
      gradWeightCase(2, 2, 17, 16, {20, 30}, {3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}),     // stride 2 by 1
      gradWeightCase(2, 3, 16, 16, {16, 16}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}),     // patches: no zeros at all
      gradWeightCase(1, 3, 16, 32, {64}, {5}, {2}, {1}, {2, 2})};                       // 1-D stride 2
  for(size_t i = 0; i < cases.size(); ++i)
    expectPathMatchesThePortableKernel(cases[i], uint32_t(200 + i), ops::convGradWeightGridRuns);
  // A stride past the kernel (x it never reads; phases no tap uses) stays
  // off the grid.
  // So do pads and dilations of 2^31 that cancel in the positions (a 3-D
  // grid of 2^93 would overflow its size).
  const int64_t big = int64_t(1) << 31;
  for(const Case& skip : {gradWeightCase(2, 2, 16, 16, {30, 30}, {2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}),
                          gradWeightCase(3, 1, 16, 16, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {big, big, big},
                                         {big, big, big, big, big, big})}) {
    const uint64_t before = ops::convGradWeightGridRuns();
    expectPortableResult(skip, 300);
    EXPECT_EQ(ops::convGradWeightGridRuns(), before) << skip.describe();
  }
}

// The grid's dy zeros meet x values: an infinite x goes to oneDNN, whose
// gradient keeps the taps the infinity does not reach finite.
TEST(DnnlConv, GradWeightOnAGridLeavesAnInfiniteXToOneDnn) {
  EnabledGuard guard;
  host::setDnnlEnabled(true);
  const int64_t N = 2, C = 16, M = 16, H = 14, W = 14;
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  std::vector<float> xv(size_t(N * C * H * W), 0.5f), dyv(size_t(N * M * H * W), 0.25f);
  xv[0] = std::numeric_limits<float>::infinity();  // x[0, 0, 0, 0]: reached by the taps (0..1, 0..1) only
  Expr x = g->input("x", Shape({N, C, H, W}), Type::float32);
  x->bind(TensorBase::fromVector<float>(Shape({N, C, H, W}), xv));
  Expr dy = g->input("dy", Shape({N, M, H, W}), Type::float32);
  dy->bind(TensorBase::fromVector<float>(Shape({N, M, H, W}), dyv));
  ConvOptions o;
  o.strides = {1, 1};
  o.dilations = {1, 1};
  o.pads = {1, 1, 1, 1};
  Expr dw = conv_grad_weight(x, dy, {3, 3}, o);
  const uint64_t before = ops::convGradWeightGridRuns();
  g->forward();
  EXPECT_EQ(ops::convGradWeightGridRuns(), before);
  std::vector<float> got = dw->val()->toVector<float>();
  // Tap (0, 0) reaches x[0, 0, 0, 0] (from dy[0, m, 1, 1]); tap (2, 2) pairs
  // dy[oh, ow] with x[oh + 1, ow + 1], never it.
  for(int64_t m = 0; m < M; ++m) {
    EXPECT_TRUE(std::isinf(got[size_t(m * C * 9)])) << "m " << m;
    EXPECT_FLOAT_EQ(got[size_t(m * C * 9 + 8)], float(N * (H - 1) * (W - 1)) * 0.125f) << "m " << m;
  }
}

// A 2-D case of one group, square kernel k, stride s, dilation 1.
Case case2d(Op op, int64_t N, int64_t C, int64_t M, int64_t H, int64_t W, int64_t k, int64_t s,
            std::vector<int64_t> pads) {
  Case c;
  c.op = op;
  c.nd = 2;
  c.N = N;
  c.G = 1;
  c.Cg = C;
  c.Mg = M;
  c.img = {H, W};
  c.k = {k, k};
  c.o.strides = {s, s};
  c.o.dilations = {1, 1};
  c.o.pads = std::move(pads);
  c.o.outputPadding = {0, 0};
  c.o.group = 1;
  c.bias = op != Op::GradWeight;
  c.cutDy = false;
  return c;
}


// 3x3 stride-1 convolutions of 32 or more channels on AVX2 run Winograd
// F(2x2, 3x3) (backend/cpu/winograd.h), forward and transposed (the
// gradient by the input: the flipped taps with pads 2 - p): odd images,
// pads of 0, 1 and 2 (uneven too), batch 2, against the portable kernels.
TEST(DnnlConv, Winograd3x3MatchesThePortableKernels) {
  EnabledGuard guard;
  const std::vector<Case> cases{case2d(Op::Conv, 2, 32, 64, 13, 11, 3, 1, {1, 1, 1, 1}),
                                case2d(Op::Conv, 1, 64, 32, 16, 17, 3, 1, {0, 0, 0, 0}),
                                case2d(Op::Conv, 1, 32, 64, 15, 14, 3, 1, {2, 1, 0, 2}),
                                case2d(Op::Transpose, 2, 32, 64, 13, 11, 3, 1, {1, 1, 1, 1}),
                                case2d(Op::Transpose, 1, 64, 40, 12, 9, 3, 1, {0, 0, 0, 0}),
                                case2d(Op::Transpose, 1, 32, 64, 14, 15, 3, 1, {2, 1, 0, 2})};
  // Without AVX2 none of them runs it (and the portable check still holds).
  const bool avx2 = host::vec::bestIsa() != host::vec::Isa::scalar;
  for(size_t i = 0; i < cases.size(); ++i) {
    const uint64_t before = host::winogradRuns();
    expectPortableResult(cases[i], uint32_t(300 + i));
    EXPECT_EQ(host::winogradRuns(), before + (avx2 ? 1 : 0)) << cases[i].describe();
  }
}

// Convolutions oneDNN runs channels-last (NHWC) on this CPU take their
// plain image and give their plain output through the library's own
// NCHW <-> NHWC transpose: the same values as the portable kernels, with
// image sizes that leave partial 8 x 8 blocks and tiles.
TEST(DnnlConv, ChannelsLastCopiesMatchThePortableKernels) {
  EnabledGuard guard;
  const uint64_t before = host::dnnlChannelsTransposes();
  // SqueezeNet's first convolution (3 channels), a 1x1 conv to a channel
  // count that is not a multiple of 16, and a small odd one.
  for(const Case& c : {case2d(Op::Conv, 1, 3, 64, 45, 39, 3, 2, {0, 0, 0, 0}),
                       case2d(Op::Conv, 2, 40, 100, 13, 13, 1, 1, {0, 0, 0, 0}),
                       case2d(Op::Conv, 1, 5, 9, 7, 11, 3, 1, {0, 0, 0, 0})})
    expectPortableResult(c, 11);
  // At least the 3-channel one goes channels-last where oneDNN has AVX-512.
  if(host::dnnlChannelBlock() == 16) {
    EXPECT_GT(host::dnnlChannelsTransposes(), before);
  }
}

// The copies between plain NCHW and oneDNN's channel blocks around a blocked
// convolution: channel counts that leave the last block padded (ShuffleNet's
// 58 and 116; ours on AVX2, not oneDNN's reorder) and ones that fill their
// blocks, in and out, for the forward, transposed and weight-gradient kernels.
TEST(DnnlConv, BlockedCopiesMatchThePortableKernels) {
  EnabledGuard guard;
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no channel-blocked kernels on this CPU";
  host::setDnnlLayout(host::DnnlLayout::Blocked);
  const uint64_t before = host::dnnlChannelsTransposes();
  // (a 1x1 conv with pads is one oneDNN runs plain: none there)
  for(const Case& c : {case2d(Op::Conv, 1, 58, 116, 14, 13, 1, 1, {0, 0, 0, 0}),
                       case2d(Op::Conv, 2, 16, 24, 9, 9, 3, 2, {1, 0, 0, 1}),
                       case2d(Op::Conv, 1, 13, 5, 7, 11, 3, 1, {1, 0, 0, 1}),
                       case2d(Op::Transpose, 2, 11, 21, 6, 7, 3, 2, {1, 0, 0, 1}),
                       case2d(Op::GradWeight, 3, 10, 19, 12, 9, 3, 1, {1, 0, 0, 1})}) {
    const uint64_t copies = host::dnnlChannelsTransposes();
    expectPortableResult(c, 12);
    // Ours on AVX2 where a block is padded (blocks that the channels fill,
    // and AVX-512's blocks of 16, are oneDNN's reorders).
    if(host::dnnlChannelBlock() == 8 && (c.Cg % 8 != 0 || c.Mg % 8 != 0)) {
      EXPECT_GT(host::dnnlChannelsTransposes(), copies) << c.describe();
    }
  }
  if(host::dnnlChannelBlock() == 8) {
    EXPECT_GT(host::dnnlChannelsTransposes(), before);
  }
}

}  // namespace
}  // namespace onyx
