// backend/cpu/vecmath.h against the std:: functions in double: every body the
// CPU runs (AVX-512, AVX2, scalar), over inputs from subnormal to overflow,
// signed zeros, infinities and NaN, at array lengths that leave every tail.
// The bounds are the ones vecmath.h states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <onyx/backend/cpu/vecmath.h>

namespace onyx {
namespace {

namespace vec = host::vec;

// Inputs: specials, a log sweep of both signs from 1e-40 (subnormal) to
// FLT_MAX, and a dense sweep of [-12, 12] where the activations bend.
std::vector<float> inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), FLT_MAX, -FLT_MAX,
                          FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 1.f, -1.f, 0.5f, -0.5f, 88.7f, -88.7f, 89.f, -89.f,
                          -87.5f, -103.9f, -104.f, 3.f, -3.f};
  for(double e = -40; e <= 38.5; e += 0.0125) {
    v.push_back(static_cast<float>(std::pow(10.0, e)));
    v.push_back(-static_cast<float>(std::pow(10.0, e)));
  }
  for(int i = -24000; i <= 24000; ++i) v.push_back(static_cast<float>(i * 0.0005));
  return v;
}

// Error of y against the exact value r, in units in the last place of r as
// a float; infinities count as one ULP past FLT_MAX.
double ulpError(float y, double r) {
  if(std::isnan(r)) return std::isnan(y) ? 0 : INFINITY;
  if(std::isnan(y)) return INFINITY;
  const double top = std::ldexp(1.0, 104);  // ULP at FLT_MAX
  auto clampInf = [&](double v) { return std::fabs(v) > FLT_MAX + top ? std::copysign(FLT_MAX + top, v) : v; };
  double yy = clampInf(y), rr = clampInf(r);
  if(yy == rr) return 0;
  double mag = std::fmin(std::fabs(rr), FLT_MAX);
  int e;
  std::frexp(mag, &e);  // mag in [2^(e-1), 2^e)
  double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(yy - rr) / ulp;
}

struct Case {
  std::string name;
  std::function<void(const float*, float*, int64_t)> f;
  std::function<double(double)> ref;
  double ulps;       // bound in ULP
  double relAtX;     // plus relAtX * FLT_EPSILON * |x| absolute (cancellation in the formula)
  double lo = -INFINITY, hi = INFINITY;  // the domain tested
};

double sigmoidRef(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
double softplusRef(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double clamp01(double v) { return std::fmax(0.0, std::fmin(1.0, v)); }

std::vector<Case> cases() {
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;  // selu's
  return {
      {"exp", vec::exp, [](double x) { return std::exp(x); }, 1.0, 0},
      {"expm1", vec::expm1, [](double x) { return std::expm1(x); }, 1.0, 0},
      {"log", vec::log, [](double x) { return std::log(x); }, 1.0, 0},
      {"sqrt", vec::sqrt, [](double x) { return std::sqrt(x); }, 0.5, 0},
      {"reciprocal", vec::reciprocal, [](double x) { return 1 / x; }, 0.5, 0},
      {"sin", vec::sin, [](double x) { return std::sin(x); }, 1.0, 0},
      {"cos", vec::cos, [](double x) { return std::cos(x); }, 1.0, 0},
      {"tan", vec::tan, [](double x) { return std::tan(x); }, 1.0, 0},
      {"asin", vec::asin, [](double x) { return std::asin(x); }, 1.0, 0},
      {"acos", vec::acos, [](double x) { return std::acos(x); }, 1.0, 0},
      {"atan", vec::atan, [](double x) { return std::atan(x); }, 1.0, 0},
      {"atanh", vec::atanh, [](double x) { return std::atanh(x); }, 1.0, 0},
      {"tanh", vec::tanh, [](double x) { return std::tanh(x); }, 1.0, 0},
      {"erf", vec::erf, [](double x) { return std::erf(x); }, 1.0, 0},
      {"sigmoid", vec::sigmoid, sigmoidRef, 3.0, 0},
      {"silu", vec::silu, [](double x) { return x * sigmoidRef(x); }, 3.5, 0},
      {"softplus", vec::softplus, softplusRef, 3.0, 0},
      {"mish", vec::mish, [](double x) { return x * std::tanh(softplusRef(x)); }, 4.0, 0},
      {"gelu_erf", vec::geluErf, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, 4.0, 4},
      {"gelu_tanh", vec::geluTanh,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }, 4.0, 4},
      {"softsign", vec::softsign, [](double x) { return x / (1 + std::fabs(x)); }, 2.0, 0},
      {"relu", vec::relu, [](double x) { return x < 0 ? 0.0 : x; }, 0, 0},
      {"hard_swish", vec::hardSwish, [](double x) { return x * clamp01(x / 6 + 0.5); }, 2.0, 2},
      {"elu", [](const float* x, float* y, int64_t n) { vec::elu(x, y, n, 1.f, 1.f); },
       [](double x) { return x > 0 ? x : std::expm1(x); }, 2.0, 0},
      {"selu", [=](const float* x, float* y, int64_t n) { vec::elu(x, y, n, float(alpha), float(gamma)); },
       [=](double x) { return double(float(gamma)) * (x > 0 ? x : double(float(alpha)) * std::expm1(x)); }, 3.0, 0},
      {"celu", [](const float* x, float* y, int64_t n) { vec::celu(x, y, n, 2.f); },
       [](double x) { return x > 0 ? x : 2 * std::expm1(x / 2); }, 2.0, 0},
      {"leaky_relu", [](const float* x, float* y, int64_t n) { vec::leakyRelu(x, y, n, 0.1f); },
       [](double x) { return x > 0 ? x : x * double(0.1f); }, 0.5, 0},
      {"hard_sigmoid", [](const float* x, float* y, int64_t n) { vec::hardSigmoid(x, y, n, 0.2f, 0.5f); },
       [](double x) { return std::isnan(x) ? 1.0 : clamp01(double(0.2f) * x + 0.5); }, 2.0, 2},
      {"clip", [](const float* x, float* y, int64_t n) { vec::clip(x, y, n, -1.5f, 6.f); },
       [](double x) { return std::isnan(x) ? x : std::fmin(std::fmax(x, -1.5), 6.0); }, 0, 0},
  };
}

// The bodies this CPU runs.
std::vector<vec::Isa> bodies() {
  std::vector<vec::Isa> out;
  vec::Isa saved = vec::activeIsa();
  for(vec::Isa isa : {vec::Isa::avx512, vec::Isa::avx2, vec::Isa::scalar})
    if(vec::setIsa(isa)) out.push_back(isa);
  vec::setIsa(saved);
  return out;
}

// Restores the body in use when a test ends.
struct IsaGuard {
  vec::Isa saved = vec::activeIsa();
  ~IsaGuard() { vec::setIsa(saved); }
};

TEST(VecMath, PicksTheBestBodyOnce) {
  EXPECT_EQ(vec::activeIsa(), vec::bestIsa());
  EXPECT_TRUE(vec::setIsa(vec::Isa::scalar));  // every CPU runs the scalar body
  EXPECT_FALSE(vec::accelerated());
  EXPECT_TRUE(vec::setIsa(vec::bestIsa()));
#if defined(__x86_64__)
  if(__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(vec::bestIsa(), vec::Isa::avx512);
  } else if(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(vec::bestIsa(), vec::Isa::avx2);
  }
#endif
}

TEST(VecMath, UnaryWithinStatedUlp) {
  IsaGuard guard;
  const std::vector<float> x = inputs();
  std::vector<float> y(x.size());
  for(vec::Isa isa : bodies()) {
    ASSERT_TRUE(vec::setIsa(isa));
    for(const Case& c : cases()) {
      // The scalar body is glibc's float functions (tanhf: 2 ULP) in the same
      // formulas.
      double bound = isa == vec::Isa::scalar ? std::max(c.ulps, 1.0) + 2.5 : c.ulps;
      c.f(x.data(), y.data(), static_cast<int64_t>(x.size()));
      double worst = 0;
      float worstX = 0;
      for(size_t i = 0; i < x.size(); ++i) {
        double r = c.ref(x[i]);
        double err = ulpError(y[i], r);
        double ulp = err > 0 ? std::fabs(double(y[i]) - r) / err : 0;
        // Absolute slack: results below FLT_MIN, and the formula's own
        // cancellation (gelu, hard sigmoid near its corners).
        double slack = std::fmax(FLT_MIN, c.relAtX * FLT_EPSILON * std::fabs(double(x[i])));
        bool ok = err <= bound + 1e-6 || (std::isfinite(err) && std::fabs(double(y[i]) - r) <= slack);
        if(!ok) {
          ADD_FAILURE() << vec::isaName(isa) << " " << c.name << "(" << x[i] << ") = " << y[i] << ", want " << r
                        << " (" << err << " ULP, ulp " << ulp << ")";
          break;
        }
        if(err > worst && std::isfinite(err) && err <= bound) {
          worst = err;
          worstX = x[i];
        }
      }
      std::printf("  %-7s %-12s max %.3f ULP (at %g)\n", vec::isaName(isa), c.name.c_str(), worst, worstX);
    }
  }
}

// The masked tail and the full registers give the same bits, in place too.
TEST(VecMath, TailsAndInPlace) {
  IsaGuard guard;
  const std::vector<float> x = inputs();
  for(vec::Isa isa : bodies()) {
    ASSERT_TRUE(vec::setIsa(isa));
    for(const Case& c : cases()) {
      std::vector<float> whole(40), part(40);
      c.f(x.data() + 1000, whole.data(), 40);
      for(int64_t n = 0; n <= 33; ++n) {
        std::fill(part.begin(), part.end(), -7.f);
        c.f(x.data() + 1000, part.data(), n);
        for(int64_t i = 0; i < 40; ++i) {
          if(i < n) ASSERT_EQ(std::memcmp(&part[i], &whole[i], 4), 0) << vec::isaName(isa) << " " << c.name << " n=" << n;
          else ASSERT_EQ(part[i], -7.f) << vec::isaName(isa) << " " << c.name << " wrote past n=" << n;
        }
      }
      std::vector<float> inPlace(x.begin() + 1000, x.begin() + 1040);
      c.f(inPlace.data(), inPlace.data(), 40);
      EXPECT_EQ(std::memcmp(inPlace.data(), whole.data(), 40 * 4), 0) << vec::isaName(isa) << " " << c.name;
    }
  }
}

TEST(VecMath, BinaryMatchesFloatArithmetic) {
  IsaGuard guard;
  const std::vector<float> all = inputs();
  const size_t n = 1003;  // a tail in every body
  std::vector<float> a(all.begin() + 5000, all.begin() + 5000 + n), b(all.begin() + 20000, all.begin() + 20000 + n);
  for(size_t i = 0; i < 24; ++i) b[i * 37] = all[i];  // specials against sweep values
  using Op = vec::Bin;
  auto exact = [](Op op, float u, float w) -> float {
    switch(op) {
      case Op::add: return u + w;
      case Op::sub: return u - w;
      case Op::mul: return u * w;
      case Op::div: return u / w;
      case Op::max: return u < w ? w : u;
      case Op::min: return w < u ? w : u;
      default: return 0;
    }
  };
  for(vec::Isa isa : bodies()) {
    ASSERT_TRUE(vec::setIsa(isa));
    for(Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::max, Op::min, Op::pow}) {
      for(int mode = 0; mode < 4; ++mode) {
        int64_t sa = mode & 1 ? 0 : 1, sb = mode & 2 ? 0 : 1;
        std::vector<float> y(n);
        vec::binary(op, a.data(), sa, b.data(), sb, y.data(), static_cast<int64_t>(n));
        for(size_t i = 0; i < n; ++i) {
          float u = a[i * sa], w = b[i * sb];
          if(op == Op::pow) {
            // SLEEF's powf: 1 ULP (glibc's in the scalar body: within 1 too).
            double err = ulpError(y[i], std::pow(double(u), double(w)));
            ASSERT_TRUE(err <= 1.0 || std::fabs(y[i] - std::pow(double(u), double(w))) <= FLT_MIN)
                << vec::isaName(isa) << " pow(" << u << ", " << w << ") = " << y[i] << " (" << err << " ULP)";
          } else {
            float want = exact(op, u, w);
            ASSERT_TRUE(std::memcmp(&y[i], &want, 4) == 0 || (std::isnan(y[i]) && std::isnan(want)))
                << vec::isaName(isa) << " op " << int(op) << " mode " << mode << " (" << u << ", " << w
                << ") = " << y[i] << ", want " << want;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace onyx
