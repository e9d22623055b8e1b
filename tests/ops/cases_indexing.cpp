// Harness cases for src/ops/indexing.cpp, plus checks of its errors and of
// the data-dependent builders (one_hot, nonzero, compress, unique). The
// references follow the ONNX definitions in plain loops over coordinates.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <onyx/ops/indexing.h>

namespace onyx {
namespace test {
namespace {

int64_t fix(double i, int64_t n) {
  int64_t v = static_cast<int64_t>(i);
  return v < 0 ? v + n : v;
}

// out[j] = x[j with j[axis] replaced by ind[j]]
Ref gatherElementsRef(const Ref& x, size_t axis, const Ref& ind) {
  Ref y = refOfShape(ind.shape);
  for(int64_t k = 0; k < y.size(); ++k) {
    Idx j = unravel(k, ind.shape);
    j[axis] = fix(ind[k], x.shape[axis]);
    y[k] = x[ravel(j, x.shape)];
  }
  return y;
}

double reduce(const std::string& red, double a, double b) {
  if(red == "add") return a + b;
  if(red == "mul") return a * b;
  if(red == "max") return std::max(a, b);
  if(red == "min") return std::min(a, b);
  return b;
}

Ref scatterElementsRef(const Ref& data, size_t axis, const Ref& ind, const Ref& upd, const std::string& red) {
  Ref y = data;
  for(int64_t k = 0; k < ind.size(); ++k) {
    Idx j = unravel(k, ind.shape);
    j[axis] = fix(ind[k], data.shape[axis]);
    double& t = y[ravel(j, data.shape)];
    t = reduce(red, t, upd[k]);
  }
  return y;
}

// GatherND by its definition: for every batch index and index tuple, the
// slice data[batch, tuple, :].
Ref gatherNdRef(const Ref& x, const Ref& ind, size_t b) {
  size_t q = ind.shape.size(), k = static_cast<size_t>(ind.shape[q - 1]);
  Idx os(ind.shape.begin(), ind.shape.end() - 1);
  os.insert(os.end(), x.shape.begin() + b + k, x.shape.end());
  Ref y = refOfShape(os);
  for(int64_t o = 0; o < y.size(); ++o) {
    Idx oi = unravel(o, os);
    Idx xi(oi.begin(), oi.begin() + b);  // batch
    Idx ti(oi.begin(), oi.begin() + (q - 1));
    for(size_t j = 0; j < k; ++j) {
      Idx ii = ti;
      ii.push_back(static_cast<int64_t>(j));
      xi.push_back(fix(ind[ravel(ii, ind.shape)], x.shape[b + j]));
    }
    xi.insert(xi.end(), oi.begin() + (q - 1), oi.end());
    y[o] = x[ravel(xi, x.shape)];
  }
  return y;
}

Ref scatterNdRef(const Ref& data, const Ref& ind, const Ref& upd, const std::string& red, size_t b) {
  size_t q = ind.shape.size(), k = static_cast<size_t>(ind.shape[q - 1]);
  Ref y = data;
  for(int64_t u = 0; u < upd.size(); ++u) {
    Idx ui = unravel(u, upd.shape);
    Idx di(ui.begin(), ui.begin() + b);
    Idx ti(ui.begin(), ui.begin() + (q - 1));
    for(size_t j = 0; j < k; ++j) {
      Idx ii = ti;
      ii.push_back(static_cast<int64_t>(j));
      di.push_back(fix(ind[ravel(ii, ind.shape)], data.shape[b + j]));
    }
    di.insert(di.end(), ui.begin() + (q - 1), ui.end());
    double& t = y[ravel(di, data.shape)];
    t = reduce(red, t, upd[u]);
  }
  return y;
}

Ref argRef(const Ref& x, size_t axis, bool keepdims, bool last, bool isMax) {
  Idx os = x.shape;
  os[axis] = 1;
  Ref y = refOfShape(os);
  for(int64_t o = 0; o < y.size(); ++o) {
    Idx i = unravel(o, os);
    int64_t best = 0;
    for(int64_t j = 0; j < x.shape[axis]; ++j) {
      Idx a = i, b = i;
      a[axis] = j;
      b[axis] = best;
      double v = x[ravel(a, x.shape)], w = x[ravel(b, x.shape)];
      bool better = isMax ? v > w : v < w;
      if(better || (last && v == w)) best = j;
    }
    y[o] = static_cast<double>(best);
  }
  if(!keepdims) os.erase(os.begin() + static_cast<int64_t>(axis));
  y.shape = os;
  return y;
}

// Selection of the k best by repeated scans (no sorting): the best remaining
// element, first index on ties.
Ref topkRef(const Ref& x, size_t axis, int64_t k, bool largest, bool values) {
  Idx os = x.shape;
  os[axis] = k;
  Ref y = refOfShape(os);
  Idx lines = x.shape;
  lines[axis] = 1;
  for(int64_t l = 0; l < refOfShape(lines).size(); ++l) {
    Idx i = unravel(l, lines);
    std::vector<bool> taken(static_cast<size_t>(x.shape[axis]));
    for(int64_t r = 0; r < k; ++r) {
      int64_t best = -1;
      for(int64_t j = 0; j < x.shape[axis]; ++j) {
        if(taken[static_cast<size_t>(j)]) continue;
        Idx a = i, b = i;
        a[axis] = j;
        b[axis] = best;
        if(best < 0 || (largest ? x[ravel(a, x.shape)] > x[ravel(b, x.shape)] : x[ravel(a, x.shape)] < x[ravel(b, x.shape)]))
          best = j;
      }
      taken[static_cast<size_t>(best)] = true;
      Idx o = i, a = i;
      o[axis] = r;
      a[axis] = best;
      y[ravel(o, os)] = values ? x[ravel(a, x.shape)] : static_cast<double>(best);
    }
  }
  return y;
}

// ---------------------------------------------------------------- gather_elements

ONYX_OP_CASE({"gather_elements", "axis1_negative_indices", {in({3, 4}), ints({3, 2}, -4, 3)},
              [](const std::vector<Expr>& x) { return gather_elements(x[0], 1, x[1]); },
              [](const std::vector<Ref>& x) { return gatherElementsRef(x[0], 1, x[1]); }});
ONYX_OP_CASE({"gather_elements", "axis0_smaller_indices", {in({3, 3}), ints({2, 3}, -3, 2)},
              [](const std::vector<Expr>& x) { return gather_elements(x[0], 0, x[1]); },
              [](const std::vector<Ref>& x) { return gatherElementsRef(x[0], 0, x[1]); }});
ONYX_OP_CASE({"gather_elements", "3d_axis_minus1_repeats", {in({2, 3, 4}), ints({2, 3, 6}, -4, 3)},
              [](const std::vector<Expr>& x) { return gather_elements(x[0], -1, x[1]); },
              [](const std::vector<Ref>& x) { return gatherElementsRef(x[0], 2, x[1]); }});
ONYX_OP_CASE({"gather_elements", "topk_values", {in({3, 5})},
              [](const std::vector<Expr>& x) { return topk(x[0], 3, 1).first; },
              [](const std::vector<Ref>& x) { return topkRef(x[0], 1, 3, true, true); }});
ONYX_OP_CASE({"gather_elements", "topk_smallest_values_axis0", {in({4, 3})},
              [](const std::vector<Expr>& x) { return topk(x[0], 2, 0, false).first; },
              [](const std::vector<Ref>& x) { return topkRef(x[0], 0, 2, false, true); }});

// ---------------------------------------------------------------- scatter_elements

ONYX_OP_CASE({"scatter_elements", "none_axis0",
              {in({3, 3}), intValues({2, 3}, {1, 0, 2, 0, 2, -2}), in({2, 3})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 0, x[1], x[2]); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 0, x[1], x[2], "none"); }});
ONYX_OP_CASE({"scatter_elements", "none_duplicates_last_wins",
              {in({2, 5}), intValues({2, 3}, {1, 1, 3, 4, -1, 0}), in({2, 3})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 1, x[1], x[2]); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 1, x[1], x[2], "none"); }});
ONYX_OP_CASE({"scatter_elements", "add_duplicates",
              {in({2, 4}), intValues({2, 3}, {1, -3, 2, 0, 0, 0}), in({2, 3})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 1, x[1], x[2], "add"); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 1, x[1], x[2], "add"); }});
ONYX_OP_CASE({"scatter_elements", "mul_with_zero",
              {in({2, 4}), intValues({2, 3}, {1, 1, 2, 3, 0, 3}), values({2, 3}, {0.5, 0.0, -1.5, 2.0, 0.7, -0.3})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 1, x[1], x[2], "mul"); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 1, x[1], x[2], "mul"); }});
ONYX_OP_CASE({"scatter_elements", "max_axis0",
              {in({3, 2}), intValues({3, 2}, {0, 1, 0, 1, 2, 2}), in({3, 2})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 0, x[1], x[2], "max"); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 0, x[1], x[2], "max"); }});
ONYX_OP_CASE({"scatter_elements", "min_axis0",
              {in({3, 2}), intValues({3, 2}, {0, 1, 0, 1, 2, 2}), in({3, 2})},
              [](const std::vector<Expr>& x) { return scatter_elements(x[0], 0, x[1], x[2], "min"); },
              [](const std::vector<Ref>& x) { return scatterElementsRef(x[0], 0, x[1], x[2], "min"); }});

// ---------------------------------------------------------------- gather_nd

ONYX_OP_CASE({"gather_nd", "tuples_of_2", {in({2, 3, 4}), intValues({3, 2}, {1, 2, -1, 0, 0, -3})},
              [](const std::vector<Expr>& x) { return gather_nd(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return gatherNdRef(x[0], x[1], 0); }});
ONYX_OP_CASE({"gather_nd", "tuples_of_1_repeats", {in({3, 4}), intValues({2, 2, 1}, {2, 0, 2, -1})},
              [](const std::vector<Expr>& x) { return gather_nd(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return gatherNdRef(x[0], x[1], 0); }});
ONYX_OP_CASE({"gather_nd", "full_tuples", {in({2, 3}), intValues({4, 2}, {0, 0, 1, 2, 1, -1, 0, 1})},
              [](const std::vector<Expr>& x) { return gather_nd(x[0], x[1]); },
              [](const std::vector<Ref>& x) { return gatherNdRef(x[0], x[1], 0); }});
ONYX_OP_CASE({"gather_nd", "batch_dims_1", {in({2, 3, 4}), intValues({2, 2, 1}, {2, 0, 1, 1})},
              [](const std::vector<Expr>& x) { return gather_nd(x[0], x[1], 1); },
              [](const std::vector<Ref>& x) { return gatherNdRef(x[0], x[1], 1); }});

// ---------------------------------------------------------------- scatter_nd

ONYX_OP_CASE({"scatter_nd", "none_rows", {in({4, 3}), intValues({2, 1}, {3, 0}), in({2, 3})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2]); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "none", 0); }});
ONYX_OP_CASE({"scatter_nd", "none_elements_duplicates",
              {in({3, 3}), intValues({3, 2}, {0, 1, 2, 2, 0, -2}), in({3})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2]); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "none", 0); }});
ONYX_OP_CASE({"scatter_nd", "add_duplicates", {in({4, 3}), intValues({3, 1}, {1, -3, 2}), in({3, 3})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2], "add"); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "add", 0); }});
ONYX_OP_CASE({"scatter_nd", "mul_with_zero",
              {in({3, 2}), intValues({3, 1}, {0, 2, 0}), values({3, 2}, {0.5, -2.0, 0.0, 1.5, 0.8, 0.6})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2], "mul"); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "mul", 0); }});
ONYX_OP_CASE({"scatter_nd", "max", {in({3, 2}), intValues({3, 1}, {1, 1, 0}), in({3, 2})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2], "max"); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "max", 0); }});
ONYX_OP_CASE({"scatter_nd", "min", {in({3, 2}), intValues({3, 1}, {1, 1, 0}), in({3, 2})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2], "min"); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "min", 0); }});
ONYX_OP_CASE({"scatter_nd", "batch_dims_1_add",
              {in({2, 3, 2}), intValues({2, 2, 1}, {2, 2, 0, 1}), in({2, 2, 2})},
              [](const std::vector<Expr>& x) { return scatter_nd(x[0], x[1], x[2], "add", 1); },
              [](const std::vector<Ref>& x) { return scatterNdRef(x[0], x[1], x[2], "add", 1); }});

// ---------------------------------------------------------------- argmax, argmin

OpCase argCase(const char* op, const char* name, InputSpec x, int axis, size_t a, bool keep, bool last) {
  bool isMax = std::string(op) == "argmax";
  OpCase c{op, name, {std::move(x)},
           [=](const std::vector<Expr>& v) { return isMax ? argmax(v[0], axis, keep, last) : argmin(v[0], axis, keep, last); },
           [=](const std::vector<Ref>& v) { return argRef(v[0], a, keep, last, isMax); }};
  c.gradcheck = false;
  return c;
}

const std::vector<double> kTies = {1, 3, 3, 0, 2, 2, -1, -1, 5, 0, 5, 4};
static CaseRegistrar kArg[] = {
    CaseRegistrar(argCase("argmax", "axis1_keepdims", in({3, 4}), 1, 1, true, false)),
    CaseRegistrar(argCase("argmax", "axis0_no_keepdims", in({3, 4, 2}), 0, 0, false, false)),
    CaseRegistrar(argCase("argmax", "negative_axis", in({2, 3, 4}), -1, 2, true, false)),
    CaseRegistrar(argCase("argmax", "ties_first", values({3, 4}, kTies), 1, 1, true, false)),
    CaseRegistrar(argCase("argmax", "ties_select_last", values({3, 4}, kTies), 1, 1, false, true)),
    CaseRegistrar(argCase("argmin", "axis1_keepdims", in({3, 4}), 1, 1, true, false)),
    CaseRegistrar(argCase("argmin", "axis0_no_keepdims", in({3, 4, 2}), 0, 0, false, false)),
    CaseRegistrar(argCase("argmin", "ties_first", values({3, 4}, kTies), 1, 1, true, false)),
    CaseRegistrar(argCase("argmin", "ties_select_last_axis0", values({3, 4}, kTies), 0, 0, true, true)),
};

// ---------------------------------------------------------------- topk_indices

OpCase topkCase(const char* name, InputSpec x, int64_t k, int axis, size_t a, bool largest) {
  OpCase c{"topk_indices", name, {std::move(x)},
           [=](const std::vector<Expr>& v) { return topk_indices(v[0], k, axis, largest); },
           [=](const std::vector<Ref>& v) { return topkRef(v[0], a, k, largest, false); }};
  c.gradcheck = false;
  return c;
}

static CaseRegistrar kTopK[] = {
    CaseRegistrar(topkCase("largest_axis1", in({3, 6}), 4, 1, 1, true)),
    CaseRegistrar(topkCase("smallest_axis0", in({5, 3}), 2, 0, 0, false)),
    CaseRegistrar(topkCase("middle_axis_all", in({2, 4, 3}), 4, -2, 1, true)),
    CaseRegistrar(topkCase("ties_keep_index_order", values({2, 6}, {1, 3, 3, 0, 3, 1, 2, 2, 2, 2, 5, 5}), 4, 1, 1,
                           true)),
    CaseRegistrar(topkCase("ties_smallest", values({2, 6}, {1, 3, 3, 0, 3, 1, 2, 2, 2, 2, 5, 5}), 3, 1, 1, false)),
};

// ---------------------------------------------------------------- errors

// Runs the graph and returns the onyx::Error's message ("" if none).
std::string forwardError(ExpressionGraph& g) {
  try {
    g.forward();
  } catch(const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Indexing, GatherElementsIndexOutOfRangeIsAnError) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromValue(1));
  auto i = g->constant({2, 2}, inits::fromVector(std::vector<int64_t>{0, 1, 2, -4}), Type::int64);
  gather_elements(x, 1, i);
  std::string msg = forwardError(*g);
  EXPECT_NE(msg.find("gather_elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index -4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 1]"), std::string::npos) << msg;
}

TEST(Indexing, ScatterIndexOutOfRangeIsAnError) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromValue(1));
  auto u = g->constant({2, 1}, inits::fromValue(1));
  auto i = g->constant({2, 1}, inits::fromVector(std::vector<int64_t>{0, 3}), Type::int64);
  scatter_elements(x, 1, i, u, "add");
  std::string msg = forwardError(*g);
  EXPECT_NE(msg.find("scatter_elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
}

TEST(Indexing, GatherNdAndScatterNdIndexOutOfRangeIsAnError) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromValue(1));
  auto i = g->constant({2, 2}, inits::fromVector(std::vector<int64_t>{1, 2, 2, 0}), Type::int64);
  gather_nd(x, i);
  std::string msg = forwardError(*g);
  EXPECT_NE(msg.find("gather_nd"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 2 at position [1, 0]"), std::string::npos) << msg;

  auto g2 = cpuGraph();
  auto y = g2->constant({2, 3}, inits::fromValue(1));
  auto j = g2->constant({1, 2}, inits::fromVector(std::vector<int64_t>{0, -7}), Type::int64);
  scatter_nd(y, j, g2->constant({1}, inits::fromValue(2)));
  msg = forwardError(*g2);
  EXPECT_NE(msg.find("scatter_nd"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index -7"), std::string::npos) << msg;
}

TEST(Indexing, BadArgumentsFailAtBuildTime) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromValue(1));
  auto i = g->constant({2, 1}, inits::fromValue(0), Type::int64);
  EXPECT_THROW(scatter_elements(x, 1, i, g->constant({2, 1}, inits::fromValue(1)), "sum"), Error);
  EXPECT_THROW(gather_elements(x, 2, i), Error);
  EXPECT_THROW(topk_indices(x, 4, 1), Error);
  EXPECT_THROW(gather_nd(x, g->constant({2, 3}, inits::fromValue(0), Type::int64)), Error);
  EXPECT_THROW(argmax(x, -3), Error);
}

// ---------------------------------------------------------------- data-dependent builders

std::vector<double> valuesOf(ExpressionGraph& g, Expr e) {
  g.forward();
  return e->val()->toVector<double>();
}

TEST(Indexing, OneHot) {
  auto g = cpuGraph();
  auto i = g->constant({2, 2}, inits::fromVector(std::vector<int64_t>{0, -1, 3, 7}), Type::int64);
  auto v = g->param("v", {2}, inits::fromVector(std::vector<float>{-1, 5}));
  auto y = one_hot(i, 4, v, 1);  // [2, 4, 2]: depth on axis 1
  ASSERT_EQ(y->shape(), (Shape{2, 4, 2}));
  auto loss = sum(y);
  g->forward();
  std::vector<double> got = y->val()->toVector<double>();
  // on at (0,0,0) [index 0], (0,3,1) [index -1 -> 3], (1,3,0) [index 3]; 7 is out of range: all off.
  for(int64_t a = 0; a < 2; ++a)
    for(int64_t d = 0; d < 4; ++d)
      for(int64_t b = 0; b < 2; ++b) {
        bool on = (a == 0 && d == 0 && b == 0) || (a == 0 && d == 3 && b == 1) || (a == 1 && d == 3 && b == 0);
        EXPECT_EQ(got[static_cast<size_t>((a * 4 + d) * 2 + b)], on ? 5 : -1) << a << " " << d << " " << b;
      }
  g->backward(loss);
  EXPECT_EQ(g->params()->get("v")->grad()->toVector<double>(), (std::vector<double>{13, 3}));
}

TEST(Indexing, NonZeroAndCompress) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromVector(std::vector<float>{0, 2, 0, -1, 0, 3}));
  auto nz = nonzero(x);
  EXPECT_EQ(valuesOf(*g, nz), (std::vector<double>{0, 1, 1, 1, 0, 2}));
  EXPECT_EQ(nz->shape(), (Shape{2, 3}));
  auto c1 = compress(x, {false, true, true}, -1);
  auto c0 = compress(x, {false, true, false, false, true});
  EXPECT_EQ(valuesOf(*g, c1), (std::vector<double>{2, 0, 0, 3}));
  EXPECT_EQ(c1->shape(), (Shape{2, 2}));
  EXPECT_EQ(valuesOf(*g, c0), (std::vector<double>{2, 0}));
  EXPECT_THROW(compress(x, {false, false, false, true}, 1), Error);
}

TEST(Indexing, Unique) {
  auto g = cpuGraph();
  auto x = g->constant({6}, inits::fromVector(std::vector<float>{2, 1, 1, 3, 4, 3}));
  UniqueResult s = unique(x);
  EXPECT_EQ(valuesOf(*g, s.values), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(valuesOf(*g, s.indices), (std::vector<double>{1, 0, 3, 4}));
  EXPECT_EQ(valuesOf(*g, s.inverse), (std::vector<double>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(valuesOf(*g, s.counts), (std::vector<double>{2, 1, 2, 1}));
  UniqueResult u = unique(x, false);
  EXPECT_EQ(valuesOf(*g, u.values), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(valuesOf(*g, u.indices), (std::vector<double>{0, 1, 3, 4}));
  EXPECT_EQ(valuesOf(*g, u.inverse), (std::vector<double>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(valuesOf(*g, u.counts), (std::vector<double>{1, 2, 2, 1}));
  // Columns of [[1, 0, 1], [2, 5, 2]]: unique columns (0,5) and (1,2).
  auto m = g->constant({2, 3}, inits::fromVector(std::vector<float>{1, 0, 1, 2, 5, 2}));
  UniqueResult c = unique(m, 1);
  EXPECT_EQ(valuesOf(*g, c.values), (std::vector<double>{0, 1, 5, 2}));
  EXPECT_EQ(c.values->shape(), (Shape{2, 2}));
  EXPECT_EQ(valuesOf(*g, c.inverse), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(valuesOf(*g, c.counts), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace test
}  // namespace onyx
