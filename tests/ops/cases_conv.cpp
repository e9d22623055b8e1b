// Harness cases for src/ops/conv.cpp. References are direct loops over
// output positions and kernel taps in doubles (no im2col, no GEMM).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <onyx/ops/conv.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;
using V = std::vector<int64_t>;

// Calls f(idx) for every multi-index of `dims` in row-major order.
void forEachIndex(const V& dims, const std::function<void(const V&)>& f) {
  for(auto d : dims)
    if(d == 0) return;
  V idx(dims.size(), 0);
  while(true) {
    f(idx);
    int i = int(dims.size()) - 1;
    while(i >= 0 && ++idx[size_t(i)] == dims[size_t(i)]) idx[size_t(i--)] = 0;
    if(i < 0) return;
  }
}

int64_t flatAt(const V& shape, const V& idx) {
  int64_t f = 0;
  for(size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

V cat(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Geo {
  V strides, dilations, pads;
  int64_t group = 1;
  V outputPadding;
};

int64_t at(const V& v, size_t i, int64_t def) { return v.empty() ? def : v[i]; }

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

// Input position of output o with tap kk, and whether it is inside `in`.
bool tapPos(const V& o, const V& kk, const V& in, const Geo& g, V& p) {
  size_t nd = in.size();
  p.resize(nd);
  bool inside = true;
  for(size_t i = 0; i < nd; ++i) {
    p[i] = o[i] * at(g.strides, i, 1) + kk[i] * at(g.dilations, i, 1) - at(g.pads, i, 0);
    inside = inside && p[i] >= 0 && p[i] < in[i];
  }
  return inside;
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

// ------------------------------------------------------------------ pools

struct PoolGeo {
  V kernel, strides, pads, dilations;
  bool ceil = false, includePad = false;
};

PoolOptions popts(const PoolGeo& p) {
  PoolOptions o;
  o.strides = p.strides;
  o.pads = p.pads;
  o.dilations = p.dilations;
  o.ceilMode = p.ceil;
  o.countIncludePad = p.includePad;
  return o;
}

V poolOut(const V& in, const PoolGeo& p) {
  size_t nd = in.size();
  V out;
  for(size_t i = 0; i < nd; ++i) {
    int64_t s = at(p.strides, i, 1), pb = at(p.pads, i, 0), pe = at(p.pads, nd + i, 0);
    double span = double(in[i] + pb + pe - (p.kernel[i] - 1) * at(p.dilations, i, 1) - 1);
    int64_t o = int64_t(p.ceil ? std::ceil(span / double(s)) : std::floor(span / double(s))) + 1;
    if(p.ceil && (o - 1) * s >= in[i] + pb) --o;
    out.push_back(o);
  }
  return out;
}

enum class PoolKind { Max, Index, Avg, Lp };

Ref refPool(const Ref& x, const PoolGeo& p, PoolKind kind, int storageOrder = 0, double lp = 2) {
  const int64_t N = x.shape[0], C = x.shape[1];
  V in(x.shape.begin() + 2, x.shape.end());
  size_t nd = in.size();
  V out = poolOut(in, p);
  Ref y = refOfShape(cat({N, C}, out));
  Geo g{p.strides, p.dilations, p.pads, 1, {}};
  V pos;
  for(int64_t n = 0; n < N; ++n)
    for(int64_t c = 0; c < C; ++c)
      forEachIndex(out, [&](const V& o) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0, count = 0;
        int64_t bestIdx = -1;
        forEachIndex(p.kernel, [&](const V& kk) {
          bool inside = tapPos(o, kk, in, g, pos);
          bool inPadded = true;
          for(size_t i = 0; i < nd; ++i) inPadded = inPadded && pos[i] >= -at(p.pads, i, 0) && pos[i] < in[i] + at(p.pads, nd + i, 0);
          if(kind == PoolKind::Lp ? inPadded : (p.includePad ? inPadded : inside)) count += 1;
          if(!inside) return;
          int64_t f = flatAt(x.shape, cat({n, c}, pos));
          double v = x[f];
          sum += kind == PoolKind::Lp ? std::pow(std::fabs(v), lp) : v;
          if(v > best) {
            best = v;
            if(storageOrder == 0) {
              bestIdx = f;
            } else {  // spatial dims column-major
              int64_t local = 0, mul = 1;
              for(size_t i = 0; i < nd; ++i) {
                local += pos[i] * mul;
                mul *= in[i];
              }
              bestIdx = (n * C + c) * mul + local;
            }
          }
        });
        double v = kind == PoolKind::Max ? best
                   : kind == PoolKind::Index ? double(bestIdx)
                   : kind == PoolKind::Avg ? sum / count
                   : [&] {
                       double kn = 1;
                       for(auto k : p.kernel) kn *= double(k);
                       return std::pow(sum / count * kn, 1.0 / lp);
                     }();
        y[flatAt(y.shape, cat({n, c}, o))] = v;
      });
  return y;
}

void maxPoolCase(const char* name, V xs, PoolGeo p) {
  cases().push_back(OpCase{"max_pool", name, {in(xs, -2, 2)},
                           [p](Xs x) { return max_pool(x[0], p.kernel, popts(p)); },
                           [p](Rs r) { return refPool(r[0], p, PoolKind::Max); }});
}

void maxPoolIndicesCase(const char* name, V xs, PoolGeo p, int storage) {
  OpCase c{"max_pool_indices", name, {in(xs, -2, 2)},
           [p, storage](Xs x) { return max_pool_indices(x[0], p.kernel, popts(p), storage); },
           [p, storage](Rs r) { return refPool(r[0], p, PoolKind::Index, storage); }};
  c.gradcheck = false;
  cases().push_back(c);
}

void avgPoolCase(const char* name, V xs, PoolGeo p) {
  cases().push_back(OpCase{"average_pool", name, {in(xs, -2, 2)},
                           [p](Xs x) { return average_pool(x[0], p.kernel, popts(p)); },
                           [p](Rs r) { return refPool(r[0], p, PoolKind::Avg); }});
}

// The adjoint of average_pool, checked through <dy, avgpool(e_i)>: dx[i] =
// sum over outputs o of dy[o] * avgpool(unit vector i)[o].
Ref refAvgPoolGrad(const Ref& dy, const V& xs, const PoolGeo& p) {
  Ref dx = refOfShape(xs);
  for(int64_t i = 0; i < dx.size(); ++i) {
    Ref e = refOfShape(xs);
    e[i] = 1;
    Ref y = refPool(e, p, PoolKind::Avg);
    double s = 0;
    for(int64_t o = 0; o < y.size(); ++o) s += y[o] * dy[o];
    dx[i] = s;
  }
  return dx;
}

void avgPoolGradCase(const char* name, V xs, PoolGeo p) {
  V dys = cat({xs[0], xs[1]}, poolOut(V(xs.begin() + 2, xs.end()), p));
  cases().push_back(OpCase{"average_pool_grad", name, {in(dys)},
                           [p, xs](Xs x) { return average_pool_grad(x[0], Shape(xs), p.kernel, popts(p)); },
                           [p, xs](Rs r) { return refAvgPoolGrad(r[0], xs, p); }});
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

  convGradWeightCase("2d_stride_pad", {2, 2, 5, 4}, {2, 3, 3, 2}, {2, 2}, {{2, 2}, {}, {1, 0, 0, 0}, 1, {}});
  convGradWeightCase("2d_group2_dilation", {1, 4, 5, 5}, {1, 2, 3, 1}, {2, 3}, {{}, {1, 2}, {}, 2, {}});

  maxPoolCase("2d_k3_s2_pad1", {1, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}});
  maxPoolCase("2d_ceil", {1, 1, 4, 4}, {{3, 3}, {2, 2}, {}, {}, true});
  maxPoolCase("2d_dilation", {1, 2, 5, 4}, {{2, 2}, {1, 1}, {}, {2, 1}});
  maxPoolCase("1d", {2, 2, 7}, {{3}, {2}, {0, 1}, {}});
  maxPoolCase("3d", {1, 1, 3, 4, 4}, {{2, 2, 2}, {1, 2, 2}, {}, {}});
  maxPoolIndicesCase("2d_pads_rowmajor", {2, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}}, 0);
  maxPoolIndicesCase("2d_colmajor", {1, 2, 5, 4}, {{2, 2}, {2, 2}, {}, {}}, 1);

  avgPoolCase("2d_pads_exclude", {1, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}});
  avgPoolCase("2d_pads_include", {1, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true});
  avgPoolCase("2d_ceil_overhang_include", {1, 1, 4, 5}, {{3, 2}, {2, 2}, {0, 1, 0, 1}, {}, true, true});
  avgPoolCase("1d_dilation", {2, 1, 9}, {{3}, {2}, {1, 0}, {2}});
  avgPoolCase("3d", {1, 1, 3, 4, 3}, {{2, 2, 2}, {1, 2, 1}, {}, {}});
  avgPoolGradCase("2d_ceil_pads", {1, 2, 4, 5}, {{3, 3}, {2, 2}, {1, 0, 1, 0}, {}, true, false});

  // lp_pool is a composite of average_pool: checked under its name.
  cases().push_back(OpCase{"average_pool", "lp_pool_p3_composite", {in({1, 2, 4, 5}, 0.2, 2)},
                           [](Xs x) { return lp_pool(x[0], 3, {2, 2}, popts({{2, 2}, {1, 2}, {1, 0, 0, 1}, {}})); },
                           [](Rs r) { return refPool(r[0], {{2, 2}, {1, 2}, {1, 0, 0, 1}, {}}, PoolKind::Lp, 0, 3); }});
  return true;
}();

}  // namespace
}  // namespace test
}  // namespace onyx
