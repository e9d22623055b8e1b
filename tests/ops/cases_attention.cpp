// Tests of src/ops/attention.cpp's composites (attention, rotary_embedding,
// linear_attention, causal_conv_with_state) against plain-loop references
// over doubles, with float64 gradient checks by central differences.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include <onyx/ops/attention.h>

namespace onyx {
namespace test {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- composite test helpers

Ref randomRef(Idx shape, uint64_t seed, double lo = -1, double hi = 1) {
  Ref r = refOfShape(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  for(auto& v : r.v) v = d(rng);
  return r;
}

struct Arg {
  Ref r;
  Type type = Type::float64;
  bool diff = true;  // gradient-checked (float64 args only)
};
using Build = std::function<Expr(const std::vector<Expr>&)>;

Ref toRef(const Tensor& t) {
  Ref r;
  r.shape = t->shape().vec();
  t->get(r.v);
  return r;
}

Ref runBuild(const Build& f, const std::vector<Arg>& args) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  std::vector<Expr> xs;
  for(auto& a : args) xs.push_back(g->constant(Shape(a.r.shape), inits::fromVector(a.r.v), a.type));
  Expr y = f(xs);
  g->forward();
  return toRef(y->val());
}

void expectNear(const Ref& got, const Ref& want, double tol, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for(int64_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
}

// Analytic gradients of sum(f(args) * w) against central differences.
void gradCheck(const Build& f, std::vector<Arg> args, uint64_t seed) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  std::vector<Expr> xs;
  for(size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    if(a.diff && a.type == Type::float64)
      xs.push_back(g->param("x" + std::to_string(i), Shape(a.r.shape), inits::fromVector(a.r.v), a.type, true));
    else
      xs.push_back(g->constant(Shape(a.r.shape), inits::fromVector(a.r.v), a.type));
  }
  Expr y = f(xs);
  Ref w = randomRef(y->shape().vec(), seed);
  Expr loss = sum(y * g->constant(y->shape(), inits::fromVector(w.v), Type::float64));
  g->forward();
  g->backward(loss);
  auto weighted = [&](const std::vector<Arg>& a) {
    Ref o = runBuild(f, a);
    double s = 0;
    for(int64_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
    return s;
  };
  int checked = 0;
  for(size_t i = 0; i < args.size(); ++i) {
    if(!args[i].diff || args[i].type != Type::float64) continue;
    Ref an = toRef(xs[i]->grad());
    for(int64_t j = 0; j < args[i].r.size(); ++j) {
      auto p = args, m = args;
      p[i].r[j] += 1e-6;
      m[i].r[j] -= 1e-6;
      double num = (weighted(p) - weighted(m)) / 2e-6;
      ASSERT_NEAR(an[j], num, 1e-6 + 1e-4 * std::fabs(num)) << "d loss / d arg" << i << "[" << j << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// ---------------------------------------------------------------- attention

struct AttnRefOpts {
  double scale = 0, softcap = 0;
  bool causal = false;
  int64_t offset = 0;
  int64_t left = -1, right = -1;
  std::vector<int64_t> lens;  // per batch, empty: none
};

// q [B,Hq,L,E], k [B,Hkv,S,E], v [B,Hkv,S,Ev]; mask [L,S'] (bool as 0/1 or
// float bias) or empty.
Ref attentionRef(const Ref& q, const Ref& k, const Ref& v, const Ref* mask, bool boolMask, const AttnRefOpts& o) {
  const int64_t B = q.shape[0], Hq = q.shape[1], L = q.shape[2], E = q.shape[3];
  const int64_t Hkv = k.shape[1], S = k.shape[2], Ev = v.shape[3];
  const double scale = o.scale ? o.scale : 1 / std::sqrt(double(E));
  Ref y = refOfShape({B, Hq, L, Ev});
  for(int64_t b = 0; b < B; ++b)
    for(int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for(int64_t i = 0; i < L; ++i) {
        std::vector<double> s(static_cast<size_t>(S));
        std::vector<bool> ok(static_cast<size_t>(S), true);
        for(int64_t j = 0; j < S; ++j) {
          double d = 0;
          for(int64_t e = 0; e < E; ++e) d += q[ravel({b, h, i, e}, q.shape)] * k[ravel({b, hk, j, e}, k.shape)];
          d *= scale;
          if(o.softcap > 0) d = o.softcap * std::tanh(d / o.softcap);
          int64_t off = o.lens.empty() ? o.offset : o.lens[static_cast<size_t>(b)] - L;
          int64_t diff = i + off - j;
          bool a = true;
          if(o.causal && diff < 0) a = false;
          if(o.left >= 0 && diff > o.left) a = false;
          if(o.right >= 0 && -diff > o.right) a = false;
          if(!o.lens.empty() && j >= o.lens[static_cast<size_t>(b)]) a = false;
          if(mask) {
            int64_t Sm = mask->shape[1];
            if(j >= Sm) a = false;
            else if(boolMask) a = a && (*mask)[i * Sm + j] != 0;
            else d += (*mask)[i * Sm + j];
          }
          ok[static_cast<size_t>(j)] = a && d > -kInf;
          s[static_cast<size_t>(j)] = d;
        }
        double m = -kInf, z = 0;
        for(int64_t j = 0; j < S; ++j)
          if(ok[static_cast<size_t>(j)]) m = std::max(m, s[static_cast<size_t>(j)]);
        for(int64_t j = 0; j < S; ++j)
          if(ok[static_cast<size_t>(j)]) z += std::exp(s[static_cast<size_t>(j)] - m);
        for(int64_t e = 0; e < Ev; ++e) {
          double acc = 0;
          for(int64_t j = 0; j < S; ++j)
            if(ok[static_cast<size_t>(j)])
              acc += std::exp(s[static_cast<size_t>(j)] - m) / z * v[ravel({b, hk, j, e}, v.shape)];
          y[ravel({b, h, i, e}, y.shape)] = acc;  // 0 for a fully masked row
        }
      }
    }
  return y;
}

TEST(Attention, GroupedHeadsBoolMaskCausalSoftcap) {
  Ref q = randomRef({2, 4, 3, 4}, 1, -2, 2), k = randomRef({2, 2, 5, 4}, 2, -2, 2), v = randomRef({2, 2, 5, 3}, 3);
  // [L, S'] = [3, 4] (padded to 5 with masked keys); row 1 masks every key.
  Ref mask{{3, 4}, {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}};
  AttentionOptions o;
  o.causal = true;
  o.offset = 2;
  o.softcap = 1.5;
  AttnRefOpts ro;
  ro.causal = true;
  ro.offset = 2;
  ro.softcap = 1.5;
  Ref want = attentionRef(q, k, v, &mask, true, ro);
  Ref got = runBuild([&](const std::vector<Expr>& x) { return attention(x[0], x[1], x[2], x[3], o); },
                     {{q}, {k}, {v}, {mask, Type::boolean, false}});
  expectNear(got, want, 1e-12, "attention");
  for(int64_t b = 0; b < 2; ++b)
    for(int64_t h = 0; h < 4; ++h)
      for(int64_t e = 0; e < 3; ++e) EXPECT_EQ(got[ravel({b, h, 1, e}, got.shape)], 0.0) << "fully masked row";
}

TEST(Attention, FloatMaskScaleGradient) {
  Ref q = randomRef({1, 2, 3, 4}, 4), k = randomRef({1, 1, 4, 4}, 5), v = randomRef({1, 1, 4, 2}, 6);
  Ref mask = randomRef({3, 4}, 7);
  mask[1] = -kInf;
  AttentionOptions o;
  o.scale = 0.7;
  AttnRefOpts ro;
  ro.scale = 0.7;
  Build f = [&](const std::vector<Expr>& x) { return attention(x[0], x[1], x[2], x[3], o); };
  std::vector<Arg> args = {{q}, {k}, {v}, {mask, Type::float64, false}};
  expectNear(runBuild(f, args), attentionRef(q, k, v, &mask, false, ro), 1e-12, "attention");
  gradCheck(f, args, 11);
}

TEST(Attention, WindowAndKeyLengths) {
  Ref q = randomRef({2, 2, 3, 4}, 8), k = randomRef({2, 2, 6, 4}, 9), v = randomRef({2, 2, 6, 3}, 10);
  Ref lens{{2}, {5, 2}};
  AttentionOptions o;
  o.causal = true;
  o.leftWindow = 2;
  AttnRefOpts ro;
  ro.causal = true;
  ro.left = 2;
  ro.lens = {5, 2};
  Ref got = runBuild(
      [&](const std::vector<Expr>& x) {
        AttentionOptions oo = o;
        oo.kvLengths = x[3];
        return attention(x[0], x[1], x[2], nullptr, oo);
      },
      {{q}, {k}, {v}, {lens, Type::int64, false}});
  expectNear(got, attentionRef(q, k, v, nullptr, false, ro), 1e-12, "attention with kvLengths");
  // Batch 1: lens 2 < L 3 gives offset -1, so query row 0 attends nothing.
  for(int64_t e = 0; e < 3; ++e) EXPECT_EQ(got[ravel({1, 0, 0, e}, got.shape)], 0.0);

  AttentionOptions w;
  w.offset = 3;
  w.leftWindow = 1;
  w.rightWindow = 1;
  AttnRefOpts rw;
  rw.offset = 3;
  rw.left = 1;
  rw.right = 1;
  Build f = [&](const std::vector<Expr>& x) { return attention(x[0], x[1], x[2], nullptr, w); };
  expectNear(runBuild(f, {{q}, {k}, {v}}), attentionRef(q, k, v, nullptr, false, rw), 1e-12, "sliding window");
  gradCheck(f, {{q}, {k}, {v}}, 12);
}

TEST(Attention, MismatchedHeadsIsAnError) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto q = g->constant({1, 3, 2, 4}, inits::fromValue(1));
  auto k = g->constant({1, 2, 2, 4}, inits::fromValue(1));
  try {
    attention(q, k, k);
    FAIL() << "3 query heads over 2 key heads was accepted";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of key/value heads"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- rotary embedding

// x [B,H,S,D]; cos/sin [B,S,R/2].
Ref rotaryRef(const Ref& x, const Ref& cs, const Ref& sn, bool interleaved, int64_t R) {
  const int64_t B = x.shape[0], H = x.shape[1], S = x.shape[2], D = x.shape[3], half = R / 2;
  Ref y = x;
  for(int64_t b = 0; b < B; ++b)
    for(int64_t h = 0; h < H; ++h)
      for(int64_t s = 0; s < S; ++s)
        for(int64_t i = 0; i < half; ++i) {
          int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          double c = cs[(b * S + s) * half + i], n = sn[(b * S + s) * half + i];
          double a = x[ravel({b, h, s, i1}, x.shape)], d = x[ravel({b, h, s, i2}, x.shape)];
          y[ravel({b, h, s, i1}, x.shape)] = c * a - n * d;
          y[ravel({b, h, s, i2}, x.shape)] = n * a + c * d;
        }
  (void)D;
  return y;
}

TEST(RotaryEmbedding, FullPartialInterleavedAndPositions) {
  Ref x = randomRef({2, 2, 3, 6}, 20);
  for(bool inter : {false, true})
    for(int64_t R : {6, 4}) {
      Ref cs = randomRef({2, 3, R / 2}, 21), sn = randomRef({2, 3, R / 2}, 22);
      Build f = [&](const std::vector<Expr>& a) {
        return rotary_embedding(a[0], a[1], a[2], nullptr, inter, R == 6 ? 0 : R);
      };
      std::vector<Arg> args = {{x}, {cs}, {sn}};
      expectNear(runBuild(f, args), rotaryRef(x, cs, sn, inter, R), 1e-12, inter ? "interleaved" : "halves");
      gradCheck(f, args, 23);
    }
  // Position ids into a [P, R/2] cache, and a 3-D [B, S, H * D] input.
  Ref cache_c = randomRef({7, 3}, 24), cache_s = randomRef({7, 3}, 25);
  Ref pos{{2, 3}, {0, 4, 6, 2, 2, 5}};
  Ref cs = refOfShape({2, 3, 3}), sn = refOfShape({2, 3, 3});
  for(int64_t p = 0; p < 6; ++p)
    for(int64_t i = 0; i < 3; ++i) {
      cs[p * 3 + i] = cache_c[int64_t(pos[p]) * 3 + i];
      sn[p * 3 + i] = cache_s[int64_t(pos[p]) * 3 + i];
    }
  Ref x3 = refOfShape({2, 3, 12});  // = x transposed to [B, S, H, D]
  for(int64_t b = 0; b < 2; ++b)
    for(int64_t h = 0; h < 2; ++h)
      for(int64_t s = 0; s < 3; ++s)
        for(int64_t d = 0; d < 6; ++d) x3[ravel({b, s, h * 6 + d}, x3.shape)] = x[ravel({b, h, s, d}, x.shape)];
  Ref want4 = rotaryRef(x, cs, sn, false, 6);
  Ref got3 = runBuild(
      [&](const std::vector<Expr>& a) { return rotary_embedding(a[0], a[1], a[2], a[3], false, 0, 2); },
      {{x3}, {cache_c}, {cache_s}, {pos, Type::int64, false}});
  ASSERT_EQ(got3.shape, (Idx{2, 3, 12}));
  for(int64_t b = 0; b < 2; ++b)
    for(int64_t h = 0; h < 2; ++h)
      for(int64_t s = 0; s < 3; ++s)
        for(int64_t d = 0; d < 6; ++d)
          EXPECT_NEAR(got3[ravel({b, s, h * 6 + d}, got3.shape)], want4[ravel({b, h, s, d}, want4.shape)], 1e-12);
}

// ---------------------------------------------------------------- linear attention

// {output [B, T, Hq*dv], final state [B, Hkv, dk, dv]}
std::pair<Ref, Ref> linearAttentionRef(const Ref& q, const Ref& k, const Ref& v, const Ref* decay, const Ref* beta,
                                       int64_t Hq, int64_t Hkv, double scale) {
  const int64_t B = q.shape[0], T = q.shape[1], dk = q.shape[2] / Hq, dv = v.shape[2] / Hkv, grp = Hq / Hkv;
  Ref st = refOfShape({B, Hkv, dk, dv});
  Ref out = refOfShape({B, T, Hq * dv});
  for(int64_t t = 0; t < T; ++t)
    for(int64_t b = 0; b < B; ++b) {
      for(int64_t h = 0; h < Hkv; ++h) {
        auto S = [&](int64_t i, int64_t j) -> double& { return st[ravel({b, h, i, j}, st.shape)]; };
        if(decay) {
          int64_t per = decay->shape[2] / Hkv;
          for(int64_t i = 0; i < dk; ++i)
            for(int64_t j = 0; j < dv; ++j)
              S(i, j) *= std::exp((*decay)[ravel({b, t, h * per + (per == 1 ? 0 : i)}, decay->shape)]);
        }
        std::vector<double> vt(static_cast<size_t>(dv));
        for(int64_t j = 0; j < dv; ++j) vt[static_cast<size_t>(j)] = v[ravel({b, t, h * dv + j}, v.shape)];
        if(beta) {
          double bt = (*beta)[ravel({b, t, beta->shape[2] == 1 ? 0 : h}, beta->shape)];
          for(int64_t j = 0; j < dv; ++j) {
            double r = 0;
            for(int64_t i = 0; i < dk; ++i) r += S(i, j) * k[ravel({b, t, h * dk + i}, k.shape)];
            vt[static_cast<size_t>(j)] = bt * (vt[static_cast<size_t>(j)] - r);
          }
        }
        for(int64_t i = 0; i < dk; ++i)
          for(int64_t j = 0; j < dv; ++j) S(i, j) += k[ravel({b, t, h * dk + i}, k.shape)] * vt[static_cast<size_t>(j)];
      }
      for(int64_t hq = 0; hq < Hq; ++hq)
        for(int64_t j = 0; j < dv; ++j) {
          double o = 0;
          for(int64_t i = 0; i < dk; ++i)
            o += q[ravel({b, t, hq * dk + i}, q.shape)] * st[ravel({b, hq / grp, i, j}, st.shape)];
          out[ravel({b, t, hq * dv + j}, out.shape)] = scale * o;
        }
    }
  return {out, st};
}

TEST(LinearAttention, RulesMatchTheRecurrence) {
  const int64_t B = 2, T = 3, Hq = 4, Hkv = 2, dk = 3, dv = 2;
  Ref q = randomRef({B, T, Hq * dk}, 30), k = randomRef({B, T, Hkv * dk}, 31), v = randomRef({B, T, Hkv * dv}, 32);
  Ref decayKey = randomRef({B, T, Hkv * dk}, 33, -0.5, 0), decayHead = randomRef({B, T, Hkv}, 34, -0.5, 0);
  Ref beta = randomRef({B, T, Hkv}, 35, 0, 1), beta1 = randomRef({B, T, 1}, 36, 0, 1);
  struct Rule {
    const char* name;
    const Ref* decay;
    const Ref* beta;
  } rules[] = {{"linear", nullptr, nullptr},
               {"gated", &decayHead, nullptr},
               {"delta", nullptr, &beta1},
               {"gated_delta", &decayKey, &beta}};
  for(const Rule& r : rules) {
    SCOPED_TRACE(r.name);
    auto want = linearAttentionRef(q, k, v, r.decay, r.beta, Hq, Hkv, 0.5);
    std::vector<Arg> args = {{q}, {k}, {v}};
    if(r.decay) args.push_back({*r.decay});
    if(r.beta) args.push_back({*r.beta});
    auto run = [&](bool state) {
      return [&, state](const std::vector<Expr>& x) {
        size_t n = 3;
        Expr d = r.decay ? x[n++] : nullptr;
        Expr b = r.beta ? x[n++] : nullptr;
        LinearAttentionResult res = linear_attention(x[0], x[1], x[2], nullptr, d, b, Hq, Hkv, 0.5, r.name);
        return state ? res.state : res.output;
      };
    };
    expectNear(runBuild(run(false), args), want.first, 1e-12, "output");
    expectNear(runBuild(run(true), args), want.second, 1e-12, "state");
    gradCheck(run(false), args, 37);
  }
}

// ---------------------------------------------------------------- causal conv with state

TEST(CausalConvWithState, PastStateBiasSilu) {
  const int64_t B = 2, C = 3, L = 4, K = 3;
  Ref x = randomRef({B, C, L}, 40), w = randomRef({C, 1, K}, 41), b = randomRef({C}, 42);
  Ref past = randomRef({B, C, K - 1}, 43);
  Ref y = refOfShape({B, C, L}), st = refOfShape({B, C, K - 1});
  for(int64_t n = 0; n < B; ++n)
    for(int64_t c = 0; c < C; ++c) {
      auto padded = [&](int64_t p) {  // position p of [past, x]
        return p < K - 1 ? past[ravel({n, c, p}, past.shape)] : x[ravel({n, c, p - (K - 1)}, x.shape)];
      };
      for(int64_t t = 0; t < L; ++t) {
        double s = b[c];
        for(int64_t j = 0; j < K; ++j) s += w[c * K + j] * padded(t + j);
        y[ravel({n, c, t}, y.shape)] = s / (1 + std::exp(-s));
      }
      for(int64_t p = 0; p < K - 1; ++p) st[ravel({n, c, p}, st.shape)] = padded(L + p);
    }
  std::vector<Arg> args = {{x}, {w}, {b}, {past}};
  auto run = [](bool state) {
    return [state](const std::vector<Expr>& a) {
      CausalConvResult r = causal_conv_with_state(a[0], a[1], a[2], a[3], "silu");
      return state ? r.state : r.y;
    };
  };
  expectNear(runBuild(run(false), args), y, 1e-12, "output");
  expectNear(runBuild(run(true), args), st, 0, "state");
  gradCheck(run(false), args, 44);
}

}  // namespace
}  // namespace test
}  // namespace onyx
