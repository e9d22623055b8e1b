// Cases for the normalisation composites of src/ops/norm.cpp. They have no
// registry op of their own, so each case is filed under the registry op that
// carries its computation (layer_norm, mean, mul, ...), like
// mul/dropout_backward_uses_forward_mask; the harness still checks forward
// against a plain-loop reference and float64 gradients of every input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/harness.h"

#include <onyx/ops/norm.h>

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// Mean and population variance of x over `axes` (others kept), each
// broadcast back to x's shape: stats[0] = mean, stats[1] = var.
std::vector<Ref> refMoments(const Ref& x, const std::vector<int>& axes) {
  const size_t r = x.shape.size();
  std::vector<bool> red(r, false);
  for(int a : axes) red[static_cast<size_t>(a < 0 ? a + static_cast<int>(r) : a)] = true;
  auto st = refStrides(x.shape);
  // Group id of an element: its index with the reduced coordinates zeroed.
  auto group = [&](int64_t k) {
    int64_t g = 0;
    for(size_t i = 0; i < r; ++i)
      if(!red[i]) g += ((k / st[i]) % x.shape[i]) * st[i];
    return g;
  };
  std::vector<double> s(static_cast<size_t>(x.size()), 0), s2(s.size(), 0), cnt(s.size(), 0);
  for(int64_t k = 0; k < x.size(); ++k) {
    size_t g = static_cast<size_t>(group(k));
    s[g] += x[k];
    cnt[g] += 1;
  }
  for(int64_t k = 0; k < x.size(); ++k) {
    size_t g = static_cast<size_t>(group(k));
    double d = x[k] - s[g] / cnt[g];
    s2[g] += d * d;
  }
  Ref m = refLike(x), v = refLike(x);
  for(int64_t k = 0; k < x.size(); ++k) {
    size_t g = static_cast<size_t>(group(k));
    m[k] = s[g] / cnt[g];
    v[k] = s2[g] / cnt[g];
  }
  return {m, v};
}

// Channel (axis 1) of flat index k in `shape`.
int64_t channelOf(const std::vector<int64_t>& shape, int64_t k) {
  return (k / refStrides(shape)[1]) % shape[1];
}

// ---------------------------------------------------------------- batch norm

ONYX_OP_CASE({"mul", "batch_norm_inference",
              {in({2, 3, 2, 2}, -2, 2), in({3}, 0.5, 1.5), in({3}), in({3}), in({3}, 0.5, 1.5)},
              [](Xs x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], 1e-3); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) {
                  int64_t c = channelOf(x[0].shape, k);
                  y[k] = (x[0][k] - x[3][c]) / std::sqrt(x[4][c] + 1e-3) * x[1][c] + x[2][c];
                }
                return y;
              }});

Ref refChannelAffine(Rs x) {
  Ref y = refLike(x[0]);
  for(int64_t k = 0; k < y.size(); ++k) {
    int64_t c = channelOf(x[0].shape, k);
    y[k] = x[0][k] * x[1][c] + x[2][c];
  }
  return y;
}

ONYX_OP_CASE({"channel_affine", "nchw", {in({2, 3, 2, 2}, -2, 2), in({3}), in({3})},
              [](Xs x) { return channel_affine(x[0], x[1], x[2]); }, refChannelAffine});
ONYX_OP_CASE({"channel_affine", "rank2", {in({4, 3}, -2, 2), in({3}), in({3})},
              [](Xs x) { return channel_affine(x[0], x[1], x[2]); }, refChannelAffine});

// The fuse_channel_affine pass's forms: relu after the affine, and x given as
// parts joined along axis 1 (a concatenation read in place).
Ref refChannelAffineOfParts(Rs x, size_t parts, bool relu) {
  std::vector<int64_t> shape = x[0].shape;
  for(size_t i = 1; i < parts; ++i) shape[1] += x[i].shape[1];
  Ref y = refOfShape(shape);
  const int64_t inner = refStrides(shape)[1];
  for(int64_t k = 0; k < y.size(); ++k) {
    const int64_t n = k / (shape[1] * inner), c = channelOf(shape, k), p = k % inner;
    int64_t ci = c;
    size_t i = 0;
    while(ci >= x[i].shape[1]) ci -= x[i++].shape[1];
    const double z = x[i][(n * x[i].shape[1] + ci) * inner + p] * x[parts][c] + x[parts + 1][c];
    y[k] = relu && z < 0 ? 0.0 : z;
  }
  return y;
}

ONYX_OP_CASE({"channel_affine", "relu", {in({2, 3, 2, 2}, -2, 2), in({3}), in({3})},
              [](Xs x) { return channel_affine(x[0], x[1], x[2], true); },
              [](Rs x) { return refChannelAffineOfParts(x, 1, true); }});
ONYX_OP_CASE({"channel_affine", "parts", {in({2, 2, 3}, -2, 2), in({2, 3, 3}, -2, 2), in({2, 1, 3}, -2, 2),
                                          in({6}), in({6})},
              [](Xs x) { return channel_affine({x[0], x[1], x[2]}, x[3], x[4]); },
              [](Rs x) { return refChannelAffineOfParts(x, 3, false); }});
ONYX_OP_CASE({"channel_affine", "parts_relu", {in({2, 2, 2, 2}, -2, 2), in({2, 3, 2, 2}, -2, 2), in({5}), in({5})},
              [](Xs x) { return channel_affine({x[0], x[1]}, x[2], x[3], true); },
              [](Rs x) { return refChannelAffineOfParts(x, 2, true); }});

Ref refBatchTrain(Rs x, double eps, int which) {
  auto mv = refMoments(x[0], {0, 2});
  if(which == 0) {
    Ref y = refLike(x[0]);
    for(int64_t k = 0; k < y.size(); ++k) {
      int64_t c = channelOf(x[0].shape, k);
      y[k] = (x[0][k] - mv[0][k]) / std::sqrt(mv[1][k] + eps) * x[1][c] + x[2][c];
    }
    return y;
  }
  Ref s = refOfShape({x[0].shape[1]});
  for(int64_t k = 0; k < x[0].size(); ++k) s[channelOf(x[0].shape, k)] = mv[which - 1][k];
  return s;
}

// batch_norm_train runs as batch_moments and batch_normalize on the CPU.
ONYX_OP_CASE({"batch_normalize", "batch_norm_train_y", {in({4, 3, 2}, -2, 2), in({3}, 0.5, 1.5), in({3})},
              [](Xs x) { return batch_norm_train(x[0], x[1], x[2], 1e-5).y; },
              [](Rs x) { return refBatchTrain(x, 1e-5, 0); }});
ONYX_OP_CASE({"batch_moments", "batch_norm_train_mean", {in({4, 3, 2}, -2, 2), in({3}, 0.5, 1.5), in({3})},
              [](Xs x) { return batch_norm_train(x[0], x[1], x[2]).mean; },
              [](Rs x) { return refBatchTrain(x, 1e-5, 1); }});
ONYX_OP_CASE({"batch_moments", "batch_norm_train_var", {in({4, 3, 2}, -2, 2), in({3}, 0.5, 1.5), in({3})},
              [](Xs x) { return batch_norm_train(x[0], x[1], x[2]).var; },
              [](Rs x) { return refBatchTrain(x, 1e-5, 2); }});
// The same through the ONNX-style statistics over a 4-D x (an image batch):
// y's gradient runs through both ops and the two gradient ops.
ONYX_OP_CASE({"batch_normalize", "batch_norm_train_nchw", {in({3, 2, 2, 3}, -2, 2), in({2}, 0.5, 1.5), in({2})},
              [](Xs x) { return batch_norm_train(x[0], x[1], x[2], 1e-3).y; },
              [](Rs x) {
                auto mv = refMoments(x[0], {0, 2, 3});
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) {
                  int64_t c = channelOf(x[0].shape, k);
                  y[k] = (x[0][k] - mv[0][k]) / std::sqrt(mv[1][k] + 1e-3) * x[1][c] + x[2][c];
                }
                return y;
              }});

// [mean; var] per channel as a [2, C] reference.
Ref refChannelMoments(const Ref& x) {
  std::vector<int> axes{0};
  for(int a = 2; a < static_cast<int>(x.shape.size()); ++a) axes.push_back(a);
  auto mv = refMoments(x, axes);
  const int64_t C = x.shape[1];
  Ref m = refOfShape({2, C});
  for(int64_t k = 0; k < x.size(); ++k) {
    int64_t c = channelOf(x.shape, k);
    m[c] = mv[0][k];
    m[C + c] = mv[1][k];
  }
  return m;
}

ONYX_OP_CASE({"batch_moments", "nchw", {in({2, 3, 2, 3}, -2, 2)}, [](Xs x) { return batch_moments(x[0]); },
              [](Rs x) { return refChannelMoments(x[0]); }});
ONYX_OP_CASE({"batch_moments", "rank2", {in({5, 4}, -2, 2)}, [](Xs x) { return batch_moments(x[0]); },
              [](Rs x) { return refChannelMoments(x[0]); }});

// batch_normalize with mean and var as inputs of their own: its gradients
// w.r.t. them are checked as well as those of x, scale and bias.
ONYX_OP_CASE({"batch_normalize", "given_statistics",
              {in({2, 3, 2, 2}, -2, 2), in({3}), in({3}, 0.5, 1.5), in({3}, 0.5, 1.5), in({3})},
              [](Xs x) { return batch_normalize(x[0], x[1], x[2], x[3], x[4], 1e-2); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) {
                  int64_t c = channelOf(x[0].shape, k);
                  y[k] = (x[0][k] - x[1][c]) / std::sqrt(x[2][c] + 1e-2) * x[3][c] + x[4][c];
                }
                return y;
              }});

// batch_moments_grad's reference: (dm[0, c] + 2 dm[1, c] (x - m[0, c])) /
// count, plus dy * f[c] when the inputs hold dy and f.
Ref refMomentsGrad(Rs x) {
  const int64_t C = x[0].shape[1];
  const double count = double(x[0].size() / C);
  Ref y = refLike(x[0]);
  for(int64_t k = 0; k < y.size(); ++k) {
    int64_t c = channelOf(x[0].shape, k);
    y[k] = (x.size() > 3 ? x[3][k] * x[4][c] : 0.0) + (x[2][c] + 2 * x[2][C + c] * (x[0][k] - x[1][c])) / count;
  }
  return y;
}

ONYX_OP_CASE({"batch_moments_grad", "nchw", {in({2, 3, 2, 2}, -2, 2), in({2, 3}), in({2, 3})},
              [](Xs x) { return batch_moments_grad(x[0], x[1], x[2]); }, refMomentsGrad,
              /*gradcheck=*/false});

// With dy and f: dy * f[c] added (a training batch norm's whole dx, as
// GradCtx::add folds it); f as [C, 1, 1], the shape it has there.
ONYX_OP_CASE({"batch_moments_grad", "with_dy",
              {in({2, 3, 2, 2}, -2, 2), in({2, 3}), in({2, 3}), in({2, 3, 2, 2}), in({3, 1, 1})},
              [](Xs x) {
                return x[0]->graph()->make(Registry::instance().get("batch_moments_grad"), x, {});
              },
              refMomentsGrad, /*gradcheck=*/false});

ONYX_OP_CASE({"batch_norm_grad_sums", "nchw", {in({2, 3, 2, 2}), in({2, 3, 2, 2}, -2, 2), in({3})},
              [](Xs x) { return batch_norm_grad_sums(x[0], x[1], x[2]); },
              [](Rs x) {
                const int64_t C = x[1].shape[1];
                Ref s = refOfShape({2, C});
                for(int64_t k = 0; k < x[1].size(); ++k) {
                  int64_t c = channelOf(x[1].shape, k);
                  s[c] += x[0][k];
                  s[C + c] += x[0][k] * (x[1][k] - x[2][c]);
                }
                return s;
              },
              /*gradcheck=*/false});

// ------------------------------------------------------- instance/group norm

ONYX_OP_CASE({"layer_norm", "instance_norm", {in({2, 3, 2, 3}, -2, 2), in({3}, 0.5, 1.5), in({3})},
              [](Xs x) { return instance_norm(x[0], x[1], x[2], 1e-4); },
              [](Rs x) {
                auto mv = refMoments(x[0], {2, 3});
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) {
                  int64_t c = channelOf(x[0].shape, k);
                  y[k] = (x[0][k] - mv[0][k]) / std::sqrt(mv[1][k] + 1e-4) * x[1][c] + x[2][c];
                }
                return y;
              }});

// 4 channels in 2 groups: statistics over (2 channels x 3 positions).
ONYX_OP_CASE({"layer_norm", "group_norm", {in({2, 4, 3}, -2, 2), in({4}, 0.5, 1.5), in({4})},
              [](Xs x) { return group_norm(x[0], 2, x[1], x[2], 1e-5); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t n = 0; n < 2; ++n)
                  for(int64_t g = 0; g < 2; ++g) {
                    int64_t base = n * 12 + g * 6;  // 6 consecutive elements per (n, group)
                    double m = 0, v = 0;
                    for(int64_t j = 0; j < 6; ++j) m += x[0][base + j] / 6;
                    for(int64_t j = 0; j < 6; ++j) v += (x[0][base + j] - m) * (x[0][base + j] - m) / 6;
                    for(int64_t j = 0; j < 6; ++j) {
                      int64_t c = g * 2 + j / 3;
                      y[base + j] = (x[0][base + j] - m) / std::sqrt(v + 1e-5) * x[1][c] + x[2][c];
                    }
                  }
                return y;
              }});

// ------------------------------------------------------------------ rms norm

ONYX_OP_CASE({"mean", "rms_norm_last_axis", {in({3, 4}, -2, 2), in({4}, 0.5, 1.5)},
              [](Xs x) { return rms_norm(x[0], x[1], -1, 1e-5); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t r = 0; r < 3; ++r) {
                  double ms = 0;
                  for(int64_t j = 0; j < 4; ++j) ms += x[0][r * 4 + j] * x[0][r * 4 + j] / 4;
                  for(int64_t j = 0; j < 4; ++j) y[r * 4 + j] = x[0][r * 4 + j] / std::sqrt(ms + 1e-5) * x[1][j];
                }
                return y;
              }});
ONYX_OP_CASE({"mean", "rms_norm_axis1_3d", {in({2, 3, 2}, -2, 2), in({3, 2}, 0.5, 1.5)},
              [](Xs x) { return rms_norm(x[0], x[1], 1, 1e-3); },
              [](Rs x) {
                Ref y = refLike(x[0]);
                for(int64_t r = 0; r < 2; ++r) {
                  double ms = 0;
                  for(int64_t j = 0; j < 6; ++j) ms += x[0][r * 6 + j] * x[0][r * 6 + j] / 6;
                  for(int64_t j = 0; j < 6; ++j) y[r * 6 + j] = x[0][r * 6 + j] / std::sqrt(ms + 1e-3) * x[1][j];
                }
                return y;
              }});

// --------------------------------------------------------- lp normalisation

Ref refLp(const Ref& x, int p) {
  // x of shape [a, b], normalised along axis 0.
  Ref y = refLike(x);
  int64_t a = x.shape[0], b = x.shape[1];
  for(int64_t j = 0; j < b; ++j) {
    double n = 0;
    for(int64_t i = 0; i < a; ++i) n += p == 2 ? x[i * b + j] * x[i * b + j] : std::fabs(x[i * b + j]);
    if(p == 2) n = std::sqrt(n);
    for(int64_t i = 0; i < a; ++i) y[i * b + j] = x[i * b + j] / n;
  }
  return y;
}

ONYX_OP_CASE({"l2_norm", "lp_normalize_p2_axis0", {in({3, 4}, 0.2, 2)},
              [](Xs x) { return lp_normalize(x[0], 0, 2); },
              [](Rs x) { return refLp(x[0], 2); }});
ONYX_OP_CASE({"abs", "lp_normalize_p1_axis0", {in({3, 4}, 0.2, 2)},
              [](Xs x) { return lp_normalize(x[0], 0, 1); },
              [](Rs x) { return refLp(x[0], 1); }});

// ------------------------------------------------ mean-variance normalisation

ONYX_OP_CASE({"mean", "mean_variance_norm_default_axes", {in({2, 3, 2, 2}, -2, 2)},
              [](Xs x) { return mean_variance_norm(x[0]); },
              [](Rs x) {
                auto mv = refMoments(x[0], {0, 2, 3});
                Ref y = refLike(x[0]);
                for(int64_t k = 0; k < y.size(); ++k) y[k] = (x[0][k] - mv[0][k]) / (std::sqrt(mv[1][k]) + 1e-9);
                return y;
              }});

// ----------------------------------------------------------------------- lrn

// Even and odd window sizes: the window is [c - (size-1)/2, c + size/2].
Ref refLrn(const Ref& x, int64_t size, double alpha, double beta, double bias) {
  Ref y = refLike(x);
  const int64_t C = x.shape[1];
  const int64_t inner = refStrides(x.shape)[1];
  for(int64_t k = 0; k < x.size(); ++k) {
    int64_t c = channelOf(x.shape, k);
    double s = 0;
    for(int64_t cc = c - (size - 1) / 2; cc <= c + size / 2; ++cc)
      if(cc >= 0 && cc < C) s += x[k + (cc - c) * inner] * x[k + (cc - c) * inner];
    y[k] = x[k] / std::pow(bias + alpha / double(size) * s, beta);
  }
  return y;
}

// lrn is a padded average pool over the channels of a [N, 1, C, rest] view.
ONYX_OP_CASE({"average_pool", "lrn_size3", {in({2, 5, 2, 2}, -2, 2)},
              [](Xs x) { return lrn(x[0], 3, 0.5, 0.75, 1.5); },
              [](Rs x) { return refLrn(x[0], 3, 0.5, 0.75, 1.5); }});
ONYX_OP_CASE({"average_pool", "lrn_size4", {in({1, 6, 3}, -2, 2)},
              [](Xs x) { return lrn(x[0], 4, 0.3, 0.5, 2.0); },
              [](Rs x) { return refLrn(x[0], 4, 0.3, 0.5, 2.0); }});
ONYX_OP_CASE({"average_pool", "lrn_window_wider_than_channels", {in({2, 3, 2}, -2, 2)},
              [](Xs x) { return lrn(x[0], 11, 0.2, 0.75, 1.0); },
              [](Rs x) { return refLrn(x[0], 11, 0.2, 0.75, 1.0); }});

// ---------------------------------------------------------------- user errors

TEST(NormOps, BadArgumentsAreErrors) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 4, 3}, inits::ones());
  auto c4 = g->constant({4}, inits::ones());
  auto c3 = g->constant({3}, inits::ones());
  EXPECT_THROW(group_norm(x, 3, c4, c4), Error);  // 4 channels do not split into 3 groups
  EXPECT_THROW(batch_norm(x, c3, c4, c4, c4), Error);
  EXPECT_THROW(instance_norm(g->constant({2, 4}, inits::ones()), c4, c4), Error);
  EXPECT_THROW(lp_normalize(x, 0, 3), Error);
  EXPECT_THROW(lrn(x, 0), Error);
}

}  // namespace
}  // namespace test
}  // namespace onyx
