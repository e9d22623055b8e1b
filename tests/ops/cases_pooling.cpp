// Harness cases for src/ops/pooling.cpp. References are direct loops over
// output positions and window taps in doubles.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <onyx/ops/pooling.h>

#include "ops/harness.h"
#include "ops/window_refs.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

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

// max_pool's gradient: dy added at the reference's first maximum of each
// window of x (x a constant: it only selects).
void maxPoolGradCase(const char* name, V xs, PoolGeo p) {
  V dys = cat({xs[0], xs[1]}, poolOut(V(xs.begin() + 2, xs.end()), p));
  cases().push_back(OpCase{"max_pool_grad", name, {in(dys), constantInput(in(xs, -2, 2))},
                           [p](Xs x) { return max_pool_grad(x[0], x[1], p.kernel, popts(p)); },
                           [p](Rs r) {
                             Ref at = refPool(r[1], p, PoolKind::Index);
                             Ref dx = refLike(r[1]);
                             for(int64_t o = 0; o < at.size(); ++o) dx[int64_t(at[o])] += r[0][o];
                             return dx;
                           }});
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
  maxPoolCase("2d_k3_s2_pad1", {1, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}});
  maxPoolCase("2d_ceil", {1, 1, 4, 4}, {{3, 3}, {2, 2}, {}, {}, true});
  maxPoolCase("2d_dilation", {1, 2, 5, 4}, {{2, 2}, {1, 1}, {}, {2, 1}});
  // The float32 kernel reduces window rows first, then along the row; these
  // take it with rows wider than a vector, asymmetric pads and ceil_mode,
  // and a dilation along the row (the other kernel).
  maxPoolCase("2d_wide_rows_asym_pads", {1, 3, 6, 37}, {{3, 3}, {2, 2}, {0, 1, 1, 2}, {}});
  maxPoolCase("2d_wide_rows_ceil", {2, 2, 7, 19}, {{3, 2}, {2, 3}, {1, 0, 0, 1}, {}, true});
  maxPoolCase("2d_row_dilation", {1, 2, 5, 9}, {{2, 3}, {1, 2}, {}, {1, 2}});
  maxPoolCase("1d", {2, 2, 7}, {{3}, {2}, {0, 1}, {}});
  maxPoolCase("3d", {1, 1, 3, 4, 4}, {{2, 2, 2}, {1, 2, 2}, {}, {}});
  maxPoolIndicesCase("2d_pads_rowmajor", {2, 2, 5, 5}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}}, 0);
  maxPoolIndicesCase("2d_colmajor", {1, 2, 5, 4}, {{2, 2}, {2, 2}, {}, {}}, 1);
  // The float32 kernel goes tap by tap along each output row: wide rows,
  // asymmetric pads, ceil_mode, dilation along the row, and 1-D.
  maxPoolIndicesCase("2d_wide_rows_ceil_dilation", {2, 2, 7, 19}, {{3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 2}, true}, 0);
  maxPoolIndicesCase("2d_wide_rows_colmajor", {1, 3, 6, 37}, {{3, 3}, {2, 2}, {0, 1, 1, 2}, {}}, 1);
  maxPoolIndicesCase("1d", {2, 2, 7}, {{3}, {2}, {0, 1}, {}}, 0);
  {
    // Ties: the first maximum in the window's scan order wins.
    OpCase c{"max_pool_indices", "2d_ties_first_wins",
             {values({1, 1, 3, 4}, {1, 2, 2, 0, 2, 2, 1, 2, 0, 2, 2, 2})},
             [](Xs x) { return max_pool_indices(x[0], {2, 2}, popts({{2, 2}, {1, 1}, {}, {}}), 0); },
             [](Rs r) { return refPool(r[0], {{2, 2}, {1, 1}, {}, {}}, PoolKind::Index, 0); }};
    c.gradcheck = false;
    cases().push_back(c);
  }

  // The float32 kernel's row-at-a-time path (2-D: overlapping 3x3/2
  // windows with pads, wide rows, ceil_mode, dilation) and the generic one
  // (1-D, 3-D).
  maxPoolGradCase("2d_k3_s2_pad1", {2, 3, 9, 9}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}});
  maxPoolGradCase("2d_wide_rows_ceil_dilation", {1, 2, 7, 37}, {{3, 2}, {2, 3}, {1, 0, 0, 1}, {1, 2}, true});
  maxPoolGradCase("1d", {2, 2, 7}, {{3}, {2}, {0, 1}, {}});
  maxPoolGradCase("3d", {1, 1, 3, 4, 4}, {{2, 2, 2}, {1, 2, 2}, {}, {}});

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
