// Checks of src/ops/signal.cpp (composites and constants, no registry ops):
// dft and stft against transforms summed directly over std::complex<double>,
// their gradients against central differences of those references, and the
// windows / mel matrix against values worked out by hand or taken from
// numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <vector>

#include <onyx/onyx.h>
#include <onyx/ops/signal.h>

namespace onyx {
namespace {

using V = std::vector<int64_t>;
using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

Ptr<ExpressionGraph> cpuGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  g->setDefaultElementType(Type::float64);
  return g;
}

int64_t prod(const V& s) {
  int64_t p = 1;
  for(auto d : s) p *= d;
  return p;
}

struct Sig {
  V shape;
  std::vector<double> v;
};

// The reference DFT: every output line summed directly.
Sig refDft(const Sig& x, int axis, int64_t length, bool inverse, bool onesided) {
  const int r = int(x.shape.size());
  if(axis < 0) axis += r;
  const int64_t c = x.shape.back(), n = x.shape[size_t(axis)];
  const bool irfft = inverse && onesided;
  const int64_t L = length > 0 ? length : (irfft ? 2 * (n - 1) : n);
  const int64_t K = irfft ? L : (onesided ? L / 2 + 1 : L);
  Sig y;
  y.shape = x.shape;
  y.shape[size_t(axis)] = K;
  y.shape.back() = irfft ? 1 : 2;
  y.v.assign(size_t(prod(y.shape)), 0.0);
  int64_t outer = 1, inner = 1;
  for(int i = 0; i < axis; ++i) outer *= x.shape[size_t(i)];
  for(int i = axis + 1; i < r - 1; ++i) inner *= x.shape[size_t(i)];
  for(int64_t o = 0; o < outer; ++o)
    for(int64_t in = 0; in < inner; ++in) {
      // The line, cut or zero-padded to L.
      std::vector<cd> s(static_cast<size_t>(L));
      for(int64_t j = 0; j < std::min(n, L); ++j) {
        int64_t base = ((o * n + j) * inner + in) * c;
        s[size_t(j)] = cd(x.v[size_t(base)], c == 2 ? x.v[size_t(base + 1)] : 0.0);
      }
      std::vector<cd> out(static_cast<size_t>(K));
      if(irfft) {
        // Hermitian extension of the first L/2+1 bins, then the inverse.
        std::vector<cd> full(static_cast<size_t>(L));
        for(int64_t k = 0; k <= L / 2; ++k) {
          cd v = k < n ? cd(x.v[size_t(((o * n + k) * inner + in) * c)],
                            c == 2 ? x.v[size_t(((o * n + k) * inner + in) * c + 1)] : 0.0)
                       : cd(0, 0);
          full[size_t(k)] = v;
          if(k > 0 && k < L - k) full[size_t(L - k)] = std::conj(v);
        }
        for(int64_t m = 0; m < L; ++m) {
          cd acc = 0;
          for(int64_t k = 0; k < L; ++k) acc += full[size_t(k)] * std::polar(1.0, 2 * kPi * double(k * m) / double(L));
          out[size_t(m)] = acc / double(L);
        }
      } else {
        for(int64_t k = 0; k < K; ++k) {
          cd acc = 0;
          double sign = inverse ? 1 : -1;
          for(int64_t j = 0; j < L; ++j) acc += s[size_t(j)] * std::polar(1.0, sign * 2 * kPi * double(j * k) / double(L));
          out[size_t(k)] = inverse ? acc / double(L) : acc;
        }
      }
      for(int64_t k = 0; k < K; ++k) {
        int64_t base = ((o * K + k) * inner + in) * (irfft ? 1 : 2);
        y.v[size_t(base)] = out[size_t(k)].real();
        if(!irfft) y.v[size_t(base + 1)] = out[size_t(k)].imag();
      }
    }
  return y;
}

std::vector<double> ramp(int64_t n, double seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for(int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(seed * double(i + 1)) + 0.1 * double(i % 5);
  return v;
}

// Forward against the reference, and the gradient of sum(y * w) against
// central differences of the reference.
void checkDft(V shape, int axis, int64_t length, bool inverse, bool onesided) {
  SCOPED_TRACE(testing::Message() << "shape " << Shape(shape) << " axis " << axis << " length " << length
                                  << " inverse " << inverse << " onesided " << onesided);
  auto g = cpuGraph();
  Sig x{shape, ramp(prod(shape), 0.7)};
  auto xe = g->param("x", Shape(shape), inits::fromVector(x.v), Type::float64, true);
  auto y = dft(xe, axis, length, inverse, onesided);
  Sig want = refDft(x, axis, length, inverse, onesided);
  ASSERT_EQ(y->shape(), Shape(want.shape));
  std::vector<double> w = ramp(prod(want.shape), 1.3);
  auto loss = sum(y * g->constant(y->shape(), inits::fromVector(w), Type::float64));
  g->forward();
  std::vector<double> got = y->val()->toVector<double>();
  for(size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want.v[i], 1e-10) << i;
  g->backward(loss);
  std::vector<double> dx = xe->grad()->toVector<double>();
  for(size_t i = 0; i < x.v.size(); ++i) {
    auto f = [&](double h) {
      Sig xp = x;
      xp.v[i] += h;
      Sig yp = refDft(xp, axis, length, inverse, onesided);
      double s = 0;
      for(size_t k = 0; k < w.size(); ++k) s += w[k] * yp.v[k];
      return s;
    };
    ASSERT_NEAR(dx[i], (f(1e-6) - f(-1e-6)) / 2e-6, 1e-6) << i;
  }
}

TEST(Signal, DftForward) {
  checkDft({2, 5, 3, 1}, 1, 0, false, false);   // real, full
  checkDft({2, 3, 6, 2}, 2, 8, false, true);    // complex, padded, one-sided
  checkDft({2, 3, 6, 2}, -2, 4, false, false);  // cut
  checkDft({1, 7, 2, 1}, 1, 0, false, true);    // odd one-sided
}

TEST(Signal, DftInverse) {
  checkDft({1, 7, 2, 2}, 1, 4, true, false);  // complex, cut
  checkDft({2, 5, 1}, 1, 0, true, false);     // real input
  checkDft({2, 4, 2}, 1, 0, true, true);      // irfft, L = 6
  checkDft({2, 4, 3, 2}, 1, 5, true, true);   // irfft, odd L
  checkDft({3, 4, 1}, 1, 9, true, true);      // irfft of a real spectrum, padded
}

TEST(Signal, DftRoundTrip) {
  auto g = cpuGraph();
  Sig x{{2, 8, 1}, ramp(16, 0.3)};
  auto xe = g->constant(Shape(x.shape), inits::fromVector(x.v), Type::float64);
  auto back = dft(dft(xe, 1, 0, false, true), 1, 8, true, true);
  g->forward();
  std::vector<double> got = back->val()->toVector<double>();
  for(size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], x.v[i], 1e-12);
}

TEST(Signal, DftBadArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->constant({2, 4, 3}, inits::zeros());
  EXPECT_THROW(dft(x, 1), Error);  // last dim 3
  auto y = g->constant({2, 4, 2}, inits::zeros());
  EXPECT_THROW(dft(y, 2), Error);   // the (re, im) dim
  EXPECT_THROW(dft(y, -1), Error);
  EXPECT_THROW(dft(y, 3), Error);
}

// STFT reference: frames, window, one DFT per frame.
Sig refStft(const Sig& x, int64_t step, const std::vector<double>& window, int64_t L, bool onesided) {
  const int64_t B = x.shape[0], S = x.shape[1], c = x.shape[2];
  const int64_t F = 1 + (S - L) / step, K = onesided ? L / 2 + 1 : L;
  Sig y{{B, F, K, 2}, std::vector<double>(size_t(B * F * K * 2))};
  for(int64_t b = 0; b < B; ++b)
    for(int64_t f = 0; f < F; ++f)
      for(int64_t k = 0; k < K; ++k) {
        cd acc = 0;
        for(int64_t j = 0; j < L; ++j) {
          int64_t at = (b * S + f * step + j) * c;
          cd v(x.v[size_t(at)], c == 2 ? x.v[size_t(at + 1)] : 0.0);
          double wj = window.empty() ? 1.0 : window[size_t(j)];
          acc += wj * v * std::polar(1.0, -2 * kPi * double(j * k) / double(L));
        }
        y.v[size_t(((b * F + f) * K + k) * 2)] = acc.real();
        y.v[size_t(((b * F + f) * K + k) * 2 + 1)] = acc.imag();
      }
  return y;
}

TEST(Signal, Stft) {
  for(bool onesided : {true, false})
    for(bool withWindow : {true, false})
      for(int64_t c : {1, 2}) {
        SCOPED_TRACE(testing::Message() << "onesided " << onesided << " window " << withWindow << " c " << c);
        auto g = cpuGraph();
        Sig x{{2, 23, c}, ramp(2 * 23 * c, 0.45)};
        const int64_t L = 6, step = 4;
        std::vector<double> win = withWindow ? ramp(L, 0.9) : std::vector<double>{};
        auto xe = g->param("x", Shape(x.shape), inits::fromVector(x.v), Type::float64, true);
        Expr we = withWindow ? g->param("w", {L}, inits::fromVector(win), Type::float64, true) : nullptr;
        auto y = stft(xe, step, we, withWindow ? 0 : L, onesided);
        Sig want = refStft(x, step, win, L, onesided);
        ASSERT_EQ(y->shape(), Shape(want.shape));
        auto loss = sum(y * y);
        g->forward();
        std::vector<double> got = y->val()->toVector<double>();
        for(size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want.v[i], 1e-10) << i;
        g->backward(loss);
        // d sum(y^2) / d window by central differences of the reference.
        if(withWindow) {
          std::vector<double> dw = we->grad()->toVector<double>();
          for(size_t j = 0; j < win.size(); ++j) {
            auto f = [&](double h) {
              std::vector<double> wp = win;
              wp[j] += h;
              double s = 0;
              for(double v : refStft(x, step, wp, L, onesided).v) s += v * v;
              return s;
            };
            EXPECT_NEAR(dw[j], (f(1e-6) - f(-1e-6)) / 2e-6, 1e-5) << j;
          }
        }
      }
}

std::vector<double> valuesOf(ExpressionGraph& g, Expr e) {
  g.forward();
  return e->val()->toVector<double>();
}

void expectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for(size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << i;
}

TEST(Signal, Windows) {
  auto g = cpuGraph();
  expectNear(valuesOf(*g, hann_window(*g, 4)), {0, 0.5, 1, 0.5}, 1e-7);
  expectNear(valuesOf(*g, hann_window(*g, 5, false)), {0, 0.5, 1, 0.5, 0}, 1e-7);
  const double a = 25.0 / 46.0, b = 21.0 / 46.0;
  expectNear(valuesOf(*g, hamming_window(*g, 4)), {a - b, a, a + b, a}, 1e-7);
  expectNear(valuesOf(*g, hamming_window(*g, 3, false)), {a - b, a + b, a - b}, 1e-7);
  expectNear(valuesOf(*g, blackman_window(*g, 3, false)), {0, 1, 0}, 1e-7);
  // periodic 4: n = 1 gives 0.42 - 0.5 cos(pi/2) + 0.08 cos(pi) = 0.34.
  expectNear(valuesOf(*g, blackman_window(*g, 4)), {0, 0.34, 1, 0.34}, 1e-7);
  expectNear(valuesOf(*g, hann_window(*g, 1, false)), {1}, 0);
  auto d = hann_window(*g, 4, true, Type::float64);
  EXPECT_EQ(d->value_type(), Type::float64);
  auto i = hamming_window(*g, 3, false, Type::int32);
  EXPECT_EQ(i->value_type(), Type::int32);
  EXPECT_THROW(hann_window(*g, -1), Error);
}

TEST(Signal, MelWeightMatrix) {
  auto g = cpuGraph();
  // The onnx reference (numpy) for num_mel_bins 3, dft_length 16,
  // sample_rate 100, 10 .. 45 Hz: the triangle edges are bins 1, 2, 4, 5, 6.
  auto m = mel_weight_matrix(*g, 3, 16, 100, 10, 45);
  ASSERT_EQ(m->shape(), (Shape{9, 3}));
  std::vector<double> want = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0.5, 0.5, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  expectNear(valuesOf(*g, m), want, 1e-7);
  EXPECT_THROW(mel_weight_matrix(*g, 3, 16, 100, 10, 400), Error);  // past the last bin
}

}  // namespace
}  // namespace onyx
