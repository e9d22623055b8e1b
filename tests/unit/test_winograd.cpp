// host::winogradConvForward (backend/cpu/winograd.h) against a float64
// direct convolution on nChw8c and plain tensors: odd image sizes (partial 2x2 tiles),
// pads of 0, 1 and 2 (asymmetric too), batch 2, every epilogue step it takes
// (bias, ReLU, Clip, a residual add, in place on y too), one and two threads,
// the weights kept in a slot and refreshed when W changes. Tolerance: a few
// float32 ulps of the sum of |products| per output.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/winograd.h>

namespace onyx {
namespace {

struct Case {
  int64_t N, C, M, H, W, pt, pl, pb, pr;
};

// Where element (n, c, i) of [N, C, H * W] lies: nChw8c (block 8) or plain (0).
size_t at(int block, int64_t n, int64_t c, int64_t i, int64_t C, int64_t HW) {
  return block ? size_t(((n * (C / 8) + c / 8) * HW + i) * 8 + c % 8) : size_t((n * C + c) * HW + i);
}

// plain float64 [N, C, H, W] as float32 in a layout
std::vector<float> laidOut(const std::vector<double>& p, int block, int64_t N, int64_t C, int64_t HW) {
  std::vector<float> b(p.size());
  for(int64_t n = 0; n < N; ++n)
    for(int64_t c = 0; c < C; ++c)
      for(int64_t i = 0; i < HW; ++i) b[at(block, n, c, i, C, HW)] = float(p[size_t((n * C + c) * HW + i)]);
  return b;
}

std::vector<double> rounded(const std::vector<double>& v) {
  std::vector<double> r(v.size());
  for(size_t i = 0; i < v.size(); ++i) r[i] = double(float(v[i]));
  return r;
}

using Kind = host::ConvPostOp::Kind;

void expectNearTheDirectConvolution(const Case& k, const std::vector<host::ConvPostOp>& ops, bool inPlace,
                                    uint32_t seed, int xl = 8, int yl = 8) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  const int64_t OH = k.H + k.pt + k.pb - 2, OW = k.W + k.pl + k.pr - 2;
  std::vector<double> x(size_t(k.N * k.C * k.H * k.W)), w(size_t(k.M * k.C * 9)), b(size_t(k.M)),
      r(size_t(k.N * k.M * OH * OW));
  for(auto* v : {&x, &w, &b, &r})
    for(double& e : *v) e = nd(rng);
  x = rounded(x), w = rounded(w), b = rounded(b), r = rounded(r);
  host::Spatial sp;
  sp.nd = 2;
  sp.strides = {1, 1};
  sp.dilations = {1, 1};
  sp.pads = {k.pt, k.pl, k.pb, k.pr};
  const host::ConvDims cd =
      host::convDims(Shape({k.N, k.C, k.H, k.W}), Shape({k.N, k.M, OH, OW}), {3, 3}, sp, 1);
  host::ConvEpilogue ep;
  ep.ops = ops;
  const int rl = inPlace ? yl : xl;  // a separate residual in x's layout (it may differ from y's)
  std::vector<float> xb = laidOut(x, xl, k.N, k.C, k.H * k.W), rb = laidOut(r, rl, k.N, k.M, OH * OW),
                     y(rb.size(), 7.f);
  std::vector<float> wf(w.begin(), w.end()), bf(b.begin(), b.end());
  bool sum = false;
  for(auto& op : ops) sum = sum || op.kind == Kind::Sum;
  if(sum) ep.residual = inPlace ? y.data() : rb.data();
  if(inPlace) y = rb;
  host::ConvLayouts lay;
  lay.x = xl;
  lay.y = yl;
  lay.residual = sum ? rl : 0;
  ASSERT_TRUE(host::winogradFits(cd, 2, lay, &ep));
  std::shared_ptr<void> slot;
  host::winogradConvForward(cd, xb.data(), wf.data(), bf.data(), y.data(), &ep, &slot, lay);
  double worst = 0;
  for(int64_t n = 0; n < k.N; ++n)
    for(int64_t m = 0; m < k.M; ++m)
      for(int64_t oh = 0; oh < OH; ++oh)
        for(int64_t ow = 0; ow < OW; ++ow) {
          double s = b[size_t(m)], mag = std::fabs(s);
          for(int64_t c = 0; c < k.C; ++c)
            for(int64_t i = 0; i < 3; ++i)
              for(int64_t j = 0; j < 3; ++j) {
                const int64_t h = oh + i - k.pt, ww = ow + j - k.pl;
                if(h < 0 || h >= k.H || ww < 0 || ww >= k.W) continue;
                const double p = x[size_t(((n * k.C + c) * k.H + h) * k.W + ww)] * w[size_t((m * k.C + c) * 9 + i * 3 + j)];
                s += p;
                mag += std::fabs(p);
              }
          const size_t yAt = at(yl, n, m, oh * OW + ow, k.M, OH * OW);
          for(auto& op : ops) {
            if(op.kind == Kind::Relu) s = std::max(s, 0.0);
            if(op.kind == Kind::Clip) s = std::min(std::max(s, double(op.alpha)), double(op.beta));
            if(op.kind == Kind::Sum) {
              s += r[size_t(((n * k.M + m) * OH + oh) * OW + ow)];
              mag += std::fabs(r[size_t(((n * k.M + m) * OH + oh) * OW + ow)]);
            }
          }
          const double err = std::fabs(double(y[yAt]) - s) / (mag * 1.2e-7);
          worst = std::max(worst, err);
          ASSERT_LE(err, 8.0) << "n " << n << " m " << m << " at (" << oh << ", " << ow << "): " << y[yAt] << " vs " << s;
        }
  EXPECT_GT(worst, 0.0);  // it computed in float32, not copied an answer
}

TEST(Winograd, MatchesTheDirectConvolution) {
  const int before = host::numThreads();
  const Case cases[] = {
      {1, 32, 64, 14, 14, 1, 1, 1, 1},  // ResNet-like, whole tiles
      {2, 64, 32, 9, 11, 1, 1, 1, 1},   // odd sizes: partial tiles at the bottom and right
      {1, 32, 64, 16, 14, 0, 0, 0, 0},  // no padding
      {1, 40, 64, 13, 9, 2, 1, 0, 2},   // uneven pads
  };
  const std::vector<std::vector<host::ConvPostOp>> epilogues = {
      {},
      {{Kind::Relu, 0.f, 0.f}},
      {{Kind::Sum, 0.f, 0.f}, {Kind::Relu, 0.f, 0.f}},
      {{Kind::Clip, -0.5f, 0.75f}},
  };
  uint32_t seed = 1;
  for(int threads : {1, 2}) {
    host::setNumThreads(threads);
    for(const Case& k : cases)
      for(const auto& ops : epilogues) {
        SCOPED_TRACE(testing::Message() << "threads " << threads << " case " << k.C << "->" << k.M << " " << k.H
                                        << "x" << k.W << " ops " << ops.size());
        expectNearTheDirectConvolution(k, ops, false, seed++);
        if(ops.size() == 2) expectNearTheDirectConvolution(k, ops, true, seed++);
        // Plain x, y or both (copied to and from nChw8c); the residual in
        // x's layout, or y itself.
        expectNearTheDirectConvolution(k, ops, false, seed++, 0, 8);
        expectNearTheDirectConvolution(k, ops, false, seed++, 8, 0);
        expectNearTheDirectConvolution(k, ops, ops.size() == 2, seed++, 0, 0);
      }
  }
  host::setNumThreads(before);
}

TEST(Winograd, TakesOnlyWhatItComputes) {
  host::Spatial sp;
  sp.nd = 2;
  sp.strides = {1, 1};
  sp.dilations = {1, 1};
  sp.pads = {1, 1, 1, 1};
  host::ConvLayouts lay;
  lay.x = lay.y = 8;
  const host::ConvDims ok = host::convDims(Shape({1, 64, 14, 14}), Shape({1, 64, 14, 14}), {3, 3}, sp, 1);
  ASSERT_TRUE(host::winogradFits(ok, 2, lay, nullptr));
  EXPECT_TRUE(host::winogradFits(ok, 2, host::ConvLayouts{}, nullptr));  // plain tensors: copied
  host::ConvLayouts nhwc;
  nhwc.x = nhwc.y = 1;
  EXPECT_FALSE(host::winogradFits(ok, 2, nhwc, nullptr));  // channels-last: not taken
  const host::ConvDims few = host::convDims(Shape({1, 64, 7, 7}), Shape({1, 64, 7, 7}), {3, 3}, sp, 1);
  EXPECT_FALSE(host::winogradFits(few, 2, lay, nullptr));  // 16 tiles: bound by the weights' read
  const host::ConvDims narrow = host::convDims(Shape({1, 16, 14, 14}), Shape({1, 64, 14, 14}), {3, 3}, sp, 1);
  EXPECT_FALSE(host::winogradFits(narrow, 2, lay, nullptr));
  const host::ConvDims thin = host::convDims(Shape({1, 32, 64, 64}), Shape({1, 32, 64, 64}), {3, 3}, sp, 1);
  EXPECT_FALSE(host::winogradFits(thin, 2, lay, nullptr));  // 32 both ways
  host::ConvEpilogue swish;
  swish.ops = {{Kind::Swish, 0.f, 0.f}};
  EXPECT_FALSE(host::winogradFits(ok, 2, lay, &swish));
  host::Spatial s2 = sp;
  s2.strides = {2, 2};
  const host::ConvDims strided = host::convDims(Shape({1, 64, 28, 28}), Shape({1, 64, 14, 14}), {3, 3}, s2, 1);
  EXPECT_FALSE(host::winogradFits(strided, 2, lay, nullptr));
}

}  // namespace
}  // namespace onyx
