// Harness cases for src/ops/cumulative.cpp (cumsum, cumprod and cumprod's
// gradient kernel), against sums and products over each line written from
// the ONNX definitions.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <vector>

#include <onyx/ops/cumulative.h>

namespace onyx {
namespace test {
namespace {

// Whether position j of a line enters the sum (product) of position i.
bool inLine(int64_t j, int64_t i, bool exclusive, bool reverse) {
  return reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
}

Ref cumsumRef(const Ref& x, size_t axis, bool exclusive, bool reverse) {
  Ref y = refLike(x);
  for(int64_t o = 0; o < y.size(); ++o) {
    Idx i = unravel(o, x.shape);
    double s = 0;
    for(int64_t j = 0; j < x.shape[axis]; ++j) {
      Idx a = i;
      a[axis] = j;
      if(inLine(j, i[axis], exclusive, reverse)) s += x[ravel(a, x.shape)];
    }
    y[o] = s;
  }
  return y;
}

Ref cumprodRef(const Ref& x, size_t axis, bool exclusive, bool reverse) {
  Ref y = refLike(x);
  for(int64_t o = 0; o < y.size(); ++o) {
    Idx i = unravel(o, x.shape);
    double p = 1;
    for(int64_t j = 0; j < x.shape[axis]; ++j) {
      Idx a = i;
      a[axis] = j;
      if(inLine(j, i[axis], exclusive, reverse)) p *= x[ravel(a, x.shape)];
    }
    y[o] = p;
  }
  return y;
}

// dx[j] = sum_i dy[i] * prod_{u in product(i), u != j} x[u] for j in product(i).
Ref cumprodGradRef(const Ref& x, const Ref& dy, size_t axis, bool exclusive, bool reverse) {
  Ref dx = refLike(x);
  for(int64_t o = 0; o < x.size(); ++o) {
    Idx jx = unravel(o, x.shape);
    double s = 0;
    for(int64_t i = 0; i < x.shape[axis]; ++i) {
      if(!inLine(jx[axis], i, exclusive, reverse)) continue;
      double p = 1;
      for(int64_t u = 0; u < x.shape[axis]; ++u) {
        if(u == jx[axis] || !inLine(u, i, exclusive, reverse)) continue;
        Idx a = jx;
        a[axis] = u;
        p *= x[ravel(a, x.shape)];
      }
      Idx b = jx;
      b[axis] = i;
      s += dy[ravel(b, x.shape)] * p;
    }
    dx[o] = s;
  }
  return dx;
}

// ---------------------------------------------------------------- cumsum

ONYX_OP_CASE({"cumsum", "axis0", {in({4, 3})}, [](const std::vector<Expr>& x) { return cumsum(x[0], 0); },
              [](const std::vector<Ref>& x) { return cumsumRef(x[0], 0, false, false); }});
ONYX_OP_CASE({"cumsum", "axis1_exclusive", {in({3, 4})},
              [](const std::vector<Expr>& x) { return cumsum(x[0], 1, true); },
              [](const std::vector<Ref>& x) { return cumsumRef(x[0], 1, true, false); }});
ONYX_OP_CASE({"cumsum", "reverse_middle_axis", {in({2, 3, 4})},
              [](const std::vector<Expr>& x) { return cumsum(x[0], 1, false, true); },
              [](const std::vector<Ref>& x) { return cumsumRef(x[0], 1, false, true); }});
ONYX_OP_CASE({"cumsum", "reverse_exclusive_negative_axis", {in({2, 3, 4})},
              [](const std::vector<Expr>& x) { return cumsum(x[0], -1, true, true); },
              [](const std::vector<Ref>& x) { return cumsumRef(x[0], 2, true, true); }});

TEST(CumSum, AxisOutOfRangeFailsAtBuildTime) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto x = g->constant({2, 3}, inits::fromValue(1));
  EXPECT_THROW(cumsum(x, 2), Error);
}

// ---------------------------------------------------------------- cumprod

OpCase cumprodCase(const char* name, InputSpec x, int axis, size_t a, bool exclusive, bool reverse) {
  return OpCase{"cumprod", name, {std::move(x)},
                [=](const std::vector<Expr>& v) { return cumprod(v[0], axis, exclusive, reverse); },
                [=](const std::vector<Ref>& v) { return cumprodRef(v[0], a, exclusive, reverse); }};
}

static CaseRegistrar kCumProd[] = {
    CaseRegistrar(cumprodCase("axis0", in({4, 3}, -1.5, 1.5), 0, 0, false, false)),
    CaseRegistrar(cumprodCase("axis1_exclusive", in({3, 4}, -1.5, 1.5), 1, 1, true, false)),
    CaseRegistrar(cumprodCase("reverse_middle_axis", in({2, 3, 4}, -1.5, 1.5), 1, 1, false, true)),
    CaseRegistrar(cumprodCase("reverse_exclusive_negative_axis", in({2, 3, 4}, -1.5, 1.5), -1, 2, true, true)),
    // Zeros: the gradient is the product of the other elements, not a division.
    CaseRegistrar(cumprodCase("zeros", values({2, 4}, {0.5, 0, 2, -1.5, 0, 1.25, 0, 3}), 1, 1, false, false)),
    CaseRegistrar(cumprodCase("zeros_reverse_exclusive", values({2, 4}, {0.5, 0, 2, -1.5, 0, 1.25, 0, 3}), 1, 1,
                              true, true)),
};

OpCase cumprodGradCase(const char* name, InputSpec x, int axis, size_t a, bool exclusive, bool reverse) {
  InputSpec dy = x;
  dy.values.clear();
  dy.lo = -1;
  dy.hi = 1;
  OpCase c{"cumprod_grad", name, {std::move(x), std::move(dy)},
           [=](const std::vector<Expr>& v) {
             return v[0]->graph()->make(Registry::instance().get("cumprod_grad"), {v[0], v[1]},
                                        {{"axis", int64_t(axis)},
                                         {"exclusive", int64_t(exclusive)},
                                         {"reverse", int64_t(reverse)}});
           },
           [=](const std::vector<Ref>& v) { return cumprodGradRef(v[0], v[1], a, exclusive, reverse); }};
  c.gradcheck = false;
  return c;
}

static CaseRegistrar kCumProdGrad[] = {
    CaseRegistrar(cumprodGradCase("axis1", in({3, 5}, -1.5, 1.5), 1, 1, false, false)),
    CaseRegistrar(cumprodGradCase("axis0_exclusive_zeros", values({4, 2}, {0, 1, 2, 0, -1, 0, 0.5, 3}), 0, 0, true,
                                  false)),
    CaseRegistrar(cumprodGradCase("reverse", in({2, 5}, -1.5, 1.5), -1, 1, false, true)),
};

TEST(CumProd, IntegersAndGradientAtZero) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto xi = g->constant({5}, inits::fromVector(std::vector<int32_t>{2, 3, -1, 4, 5}), Type::int32);
  auto yi = cumprod(xi, 0, true);
  auto x = g->param("x", {4}, inits::fromVector(std::vector<double>{2, 0, 3, 4}), Type::float64);
  auto y = cumprod(x, 0);  // 2, 0, 0, 0
  auto loss = sum(y);
  g->forward();
  g->backward(loss);
  std::vector<double> vi, gx;
  yi->val()->get(vi);
  x->grad()->get(gx);
  EXPECT_EQ(yi->value_type(), Type::int32);
  EXPECT_EQ(vi, (std::vector<double>{1, 2, 6, -6, -24}));
  // d/dx0 = 1 + x1 + x1 x2 + x1 x2 x3 = 1; d/dx1 = x0 + x0 x2 + x0 x2 x3 = 2 + 6 + 24
  EXPECT_EQ(gx, (std::vector<double>{1, 32, 0, 0}));
}

}  // namespace
}  // namespace test
}  // namespace onyx
