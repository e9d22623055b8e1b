// Harness cases for src/ops/convolution.cpp. References are direct loops over
// output positions and kernel taps in doubles (no im2col, no GEMM).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <onyx/ops/convolution.h>

#include "ops/harness.h"
#include "ops/window_refs.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// Spatial output size of conv.
V convOut(const V& in, const V& k, const Geo& g) {
  size_t nd = in.size();
  V out;
  for(size_t i = 0; i < nd; ++i) {
    int64_t span = in[i] + at(g.pads, i, 0) + at(g.pads, nd + i, 0) - (k[i] - 1) * at(g.dilations, i, 1) - 1;
    out.push_back(span / at(g.strides, i, 1) + 1);
  }
  return out;
}

Ref refConv(const Ref& x, const Ref& w, const Ref* b, const Geo& g) {
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], Cg = w.shape[1];
  V in(x.shape.begin() + 2, x.shape.end()), k(w.shape.begin() + 2, w.shape.end());
  V out = convOut(in, k, g);
  const int64_t Mg = M / g.group;
  Ref y = refOfShape(cat({N, M}, out));
  V p;
  for(int64_t n = 0; n < N; ++n)
    for(int64_t m = 0; m < M; ++m)
      forEachIndex(out, [&](const V& o) {
        double acc = b ? (*b)[m] : 0.0;
        int64_t grp = m / Mg;
        for(int64_t c = 0; c < Cg; ++c)
          forEachIndex(k, [&](const V& kk) {
            if(!tapPos(o, kk, in, g, p)) return;
            acc += w[flatAt(w.shape, cat({m, c}, kk))] * x[flatAt(x.shape, cat({n, grp * Cg + c}, p))];
          });
        y[flatAt(y.shape, cat({n, m}, o))] = acc;
      });
  (void)C;
  return y;
}

Ref refConvTranspose(const Ref& x, const Ref& w, const Ref* b, const Geo& g) {
  const int64_t N = x.shape[0], C = x.shape[1], Mg = w.shape[1], M = Mg * g.group, Cg = C / g.group;
  V in(x.shape.begin() + 2, x.shape.end()), k(w.shape.begin() + 2, w.shape.end());
  size_t nd = in.size();
  V out;
  for(size_t i = 0; i < nd; ++i)
    out.push_back(at(g.strides, i, 1) * (in[i] - 1) + at(g.outputPadding, i, 0) + (k[i] - 1) * at(g.dilations, i, 1) +
                  1 - at(g.pads, i, 0) - at(g.pads, nd + i, 0));
  Ref y = refOfShape(cat({N, M}, out));
  V p;
  for(int64_t n = 0; n < N; ++n)
    for(int64_t c = 0; c < C; ++c) {
      int64_t grp = c / Cg;
      forEachIndex(in, [&](const V& i) {
        double xv = x[flatAt(x.shape, cat({n, c}, i))];
        for(int64_t m = 0; m < Mg; ++m)
          forEachIndex(k, [&](const V& kk) {
            if(!tapPos(i, kk, out, g, p)) return;
            y[flatAt(y.shape, cat({n, grp * Mg + m}, p))] += xv * w[flatAt(w.shape, cat({c, m}, kk))];
          });
      });
    }
  if(b)
    for(int64_t i = 0; i < y.size(); ++i) {
      int64_t per = y.size() / (N * M);
      y[i] += (*b)[(i / per) % M];
    }
  return y;
}

Ref refConvGradWeight(const Ref& x, const Ref& dy, const V& k, const Geo& g) {
  const int64_t N = x.shape[0], C = x.shape[1], M = dy.shape[1], Cg = C / g.group, Mg = M / g.group;
  V in(x.shape.begin() + 2, x.shape.end()), out(dy.shape.begin() + 2, dy.shape.end());
  Ref dw = refOfShape(cat({M, Cg}, k));
  V p;
  for(int64_t m = 0; m < M; ++m)
    for(int64_t c = 0; c < Cg; ++c)
      forEachIndex(k, [&](const V& kk) {
        double acc = 0;
        for(int64_t n = 0; n < N; ++n)
          forEachIndex(out, [&](const V& o) {
            if(!tapPos(o, kk, in, g, p)) return;
            acc += dy[flatAt(dy.shape, cat({n, m}, o))] * x[flatAt(x.shape, cat({n, (m / Mg) * Cg + c}, p))];
          });
        dw[flatAt(dw.shape, cat({m, c}, kk))] = acc;
      });
  return dw;
}

ConvOptions opts(const Geo& g) {
  ConvOptions o;
  o.strides = g.strides;
  o.dilations = g.dilations;
  o.pads = g.pads;
  o.group = g.group;
  o.outputPadding = g.outputPadding;
  return o;
}

// ------------------------------------------------------------------ conv

void convCase(const char* name, V xs, V ws, bool bias, Geo g, bool gradcheck = true) {
  std::vector<InputSpec> ins{in(xs), in(ws)};
  if(bias) ins.push_back(in({ws[0]}));
  OpCase c{"conv", name, ins,
           [g, bias](Xs x) { return conv(x[0], x[1], bias ? x[2] : Expr(), opts(g)); },
           [g, bias](Rs r) { return refConv(r[0], r[1], bias ? &r[2] : nullptr, g); }};
  c.gradcheck = gradcheck;
  cases().push_back(c);
}

void convTransposeCase(const char* name, V xs, V ws, bool bias, Geo g) {
  std::vector<InputSpec> ins{in(xs), in(ws)};
  if(bias) ins.push_back(in({ws[1] * g.group}));
  cases().push_back(OpCase{"conv_transpose", name, ins,
                           [g, bias](Xs x) { return conv_transpose(x[0], x[1], bias ? x[2] : Expr(), opts(g)); },
                           [g, bias](Rs r) { return refConvTranspose(r[0], r[1], bias ? &r[2] : nullptr, g); }});
}

void convGradWeightCase(const char* name, V xs, V dys, V k, Geo g) {
  cases().push_back(OpCase{"conv_grad_weight", name, {in(xs), in(dys)},
                           [g, k](Xs x) { return conv_grad_weight(x[0], x[1], k, opts(g)); },
                           [g, k](Rs r) { return refConvGradWeight(r[0], r[1], k, g); }});
}

// ------------------------------------------------------------ fused_conv

double refActivation(const std::string& act, double a, double b, double v) {
  if(act == "relu") return std::max(v, 0.0);
  if(act == "leaky_relu") return v >= 0 ? v : a * v;
  if(act == "clip") return std::min(std::max(v, a), b);
  if(act == "hard_sigmoid") return std::max(0.0, std::min(1.0, a * v + b));
  if(act == "hard_swish") return v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
  if(act == "swish") return v / (1 + std::exp(-v));
  if(act == "gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  if(act == "gelu_tanh") return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  if(act == "sigmoid") return 1 / (1 + std::exp(-v));
  if(act == "tanh") return std::tanh(v);
  return v;
}

// fused_conv on a 2-D pad-1 conv (x [2, 3, 5, 5], W [4, 3, 3, 3]) with bias
// unless noBias, the activation, a residual when `residual`, relu after it
// when `post`.
void fusedConvCase(const std::string& act, double alpha, double beta, bool residual, bool post, bool noBias = false) {
  const Geo g{{}, {}, {1, 1, 1, 1}, 1, {}};
  const bool bias = !noBias;
  std::vector<InputSpec> ins{in({2, 3, 5, 5}), in({4, 3, 3, 3})};
  if(bias) ins.push_back(in({4}));
  if(residual) ins.push_back(in({2, 4, 5, 5}));
  std::string name = (act.empty() ? std::string("none") : act) + (residual ? "_residual" : "") + (post ? "_relu" : "") +
                     (bias ? "" : "_nobias");
  FusedConvOptions f{act, alpha, beta, post ? "relu" : ""};
  cases().push_back(OpCase{"fused_conv", name, ins,
                           [=](Xs x) {
                             return fused_conv(x[0], x[1], bias ? x[2] : Expr(), residual ? x.back() : Expr(), f,
                                               opts(g));
                           },
                           [=](Rs r) {
                             Ref y = refConv(r[0], r[1], bias ? &r[2] : nullptr, g);
                             for(int64_t i = 0; i < y.size(); ++i) {
                               double v = refActivation(act, alpha, beta, y[i]);
                               if(residual) v += r.back()[i];
                               y[i] = post ? std::max(v, 0.0) : v;
                             }
                             return y;
                           }});
}

// fused_conv's squeeze-and-excitation forms (made by the inference pass
// fuse_squeeze_excite; not differentiated): x_mean, a 1x1 conv + swish of
// x's spatial mean; x_scale, a 1x1 conv of x times s [N, C, 1, 1] plus a
// residual.
Expr fusedSe(const std::vector<Expr>& in, bool mean, bool scale, const std::string& act, bool residual) {
  const std::vector<std::pair<std::string, AttrValue>> l{{"activation", attr(act)}, {"residual", attr(int64_t(residual ? 1 : 0))},
             {"x_mean", attr(int64_t(mean ? 1 : 0))}, {"x_scale", attr(int64_t(scale ? 1 : 0))}};
  return in[0]->graph()->make(Registry::instance().get("fused_conv"), in, l);
}

void fusedSeCases() {
  const Geo g{{}, {}, {}, 1, {}};
  cases().push_back(OpCase{"fused_conv", "x_mean_swish",
                           {in({2, 6, 5, 4}), in({3, 6, 1, 1}), in({3})},
                           [](Xs x) { return fusedSe({x[0], x[1], x[2]}, true, false, "swish", false); },
                           [g](Rs r) {
                             Ref m{{2, 6, 1, 1}, std::vector<double>(12, 0.0)};
                             for(int64_t i = 0; i < 12; ++i) {
                               for(int64_t p = 0; p < 20; ++p) m[i] += r[0][i * 20 + p];
                               m[i] /= 20;
                             }
                             Ref y = refConv(m, r[1], &r[2], g);
                             for(int64_t i = 0; i < y.size(); ++i) y[i] = refActivation("swish", 0, 0, y[i]);
                             return y;
                           },
                           /*gradcheck=*/false});
  cases().push_back(OpCase{"fused_conv", "x_scale_residual",
                           {in({2, 6, 5, 4}), in({3, 6, 1, 1}), in({3}), in({2, 3, 5, 4}), in({2, 6, 1, 1})},
                           [](Xs x) { return fusedSe({x[0], x[1], x[2], x[3], x[4]}, false, true, "", true); },
                           [g](Rs r) {
                             Ref xs = r[0];
                             for(int64_t i = 0; i < xs.size(); ++i) xs[i] *= r[4][i / 20];
                             Ref y = refConv(xs, r[1], &r[2], g);
                             for(int64_t i = 0; i < y.size(); ++i) y[i] += r[3][i];
                             return y;
                           },
                           /*gradcheck=*/false});
}

// ------------------------------------------------------------------ cases

[[maybe_unused]] const bool registered = [] {
  convCase("2d_pad1_bias", {2, 2, 4, 5}, {3, 2, 3, 3}, true, {{}, {}, {1, 1, 1, 1}, 1, {}});
  convCase("2d_stride_dilation_asym_pads_group2", {1, 4, 6, 5}, {4, 2, 2, 3}, true,
           {{2, 1}, {1, 2}, {1, 0, 0, 2}, 2, {}});
  convCase("1d_stride2", {2, 3, 7}, {2, 3, 3}, false, {{2}, {}, {1, 1}, 1, {}});
  convCase("3d_pads", {1, 2, 3, 4, 3}, {2, 2, 2, 2, 2}, true, {{}, {}, {1, 0, 1, 0, 1, 0}, 1, {}});
  convCase("1x1_direct", {2, 3, 3, 4}, {4, 3, 1, 1}, true, {});
  convCase("depthwise_stride2", {1, 3, 5, 5}, {3, 1, 3, 3}, false, {{2, 2}, {}, {1, 1, 1, 1}, 3, {}});
  convCase("batch8_forward", {8, 3, 9, 9}, {5, 3, 3, 3}, true, {{1, 2}, {}, {1, 1, 0, 0}, 1, {}}, false);

  convTransposeCase("2d_bias", {1, 2, 3, 3}, {2, 3, 3, 3}, true, {});
  convTransposeCase("2d_stride_pads_outpad_dilation_group2", {2, 4, 3, 2}, {4, 1, 2, 2}, true,
                    {{2, 2}, {1, 2}, {1, 0, 0, 1}, 2, {1, 0}});
  convTransposeCase("1d_stride3_negative_end_pad", {1, 1, 3}, {1, 2, 3}, false, {{3}, {}, {0, -1}, 1, {}});
  convTransposeCase("3d", {1, 2, 2, 3, 2}, {2, 1, 2, 2, 2}, false, {{1, 2, 1}, {}, {}, 1, {}});
  convTransposeCase("1x1_direct", {2, 3, 2, 3}, {3, 2, 1, 1}, true, {});
  // kernel == stride: windows that do not overlap (the GEMM-and-scatter path)
  convTransposeCase("2d_patches_stride_eq_kernel", {2, 4, 3, 5}, {4, 3, 2, 2}, true, {{2, 2}, {}, {}, 1, {}});
  convTransposeCase("2d_patches_3x2_no_bias", {1, 3, 2, 4}, {3, 2, 3, 2}, false, {{3, 2}, {}, {}, 1, {}});
  convTransposeCase("2d_patches_2x3_bias", {1, 2, 3, 2}, {2, 2, 2, 3}, true, {{2, 3}, {}, {}, 1, {}});

  convGradWeightCase("2d_stride_pad", {2, 2, 5, 4}, {2, 3, 3, 2}, {2, 2}, {{2, 2}, {}, {1, 0, 0, 0}, 1, {}});
  convGradWeightCase("2d_group2_dilation", {1, 4, 5, 5}, {1, 2, 3, 1}, {2, 3}, {{}, {1, 2}, {}, 2, {}});
  fusedConvCase("", 0, 0, false, false);
  fusedConvCase("relu", 0, 0, false, false);
  fusedConvCase("relu", 0, 0, true, true);
  fusedConvCase("leaky_relu", 0.1, 0, false, false);
  fusedConvCase("clip", -0.5, 0.5, false, false);
  fusedConvCase("hard_sigmoid", 0.2, 0.5, false, false);
  fusedConvCase("hard_swish", 0, 0, true, false);
  fusedConvCase("swish", 0, 0, false, false);
  fusedConvCase("swish", 0, 0, true, true, true);
  fusedConvCase("gelu", 0, 0, false, false);
  fusedConvCase("gelu_tanh", 0, 0, true, false);
  fusedConvCase("sigmoid", 0, 0, false, false);
  fusedConvCase("tanh", 0, 0, true, false, true);
  fusedConvCase("", 0, 0, true, true);
  fusedConvCase("", 0, 0, true, false, true);
  fusedSeCases();
  return true;
}();

}  // namespace
}  // namespace test
}  // namespace onyx
