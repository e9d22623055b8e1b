// Harness cases of src/ops/ml.cpp: tree_ensemble on two small hand-made trees,
// against a reference that walks the same trees written out as code.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

#include <onyx/ops/ml.h>

namespace onyx {
namespace test {
namespace {

// Tree A: x0 <= a ? leaf {t0: 1.0, t1: 0.5} : (x2 < b ? leaf {t0: -2} : leaf {t1: 3}).
// Tree B: x1 > 0 ? leaf {t0: 0.25} : leaf {t0: 0.75, t2: -1}.
// Thresholds a, b = 0.125, -0.25 are floats (float32 inputs then take the
// kernel's 16-byte node walk); 0.1, -0.3 are not (its double walk).
constexpr double kA = 0.125, kB = -0.25;
TreeEnsembleSpec twoTrees(int64_t outputs, double a = 0.1, double b = -0.3) {
  TreeEnsembleSpec s;
  //            node: 0  1  2   3  4  5  6  7
  s.feature = {0, 0, 2, 0, 0, 1, 0, 0};
  s.threshold = {a, 0, b, 0, 0, 0, 0, 0};
  s.mode = {0, 6, 1, 6, 6, 3, 6, 6};
  s.trueChild = {1, 0, 3, 0, 0, 6, 0, 0};
  s.falseChild = {2, 0, 4, 0, 0, 7, 0, 0};
  s.missingTrue = {0, 0, 0, 0, 0, 0, 0, 0};
  s.roots = {0, 5};
  s.weightNode = {1, 1, 3, 4, 6, 7, 7};
  s.weightId = {0, 1, 0, 1, 0, 0, 2 % outputs};
  s.weightValue = {1.0, 0.5, -2.0, 3.0, 0.25, 0.75, -1.0};
  s.outputs = outputs;
  return s;
}

// Per row: the sums per output and which outputs a leaf reached.
void referenceSums(const Ref& x, int64_t r, int64_t outputs, std::vector<double>& s, std::vector<char>& has,
                   double a = 0.1, double b = -0.3) {
  s.assign(static_cast<size_t>(outputs), 0.0);
  has.assign(static_cast<size_t>(outputs), 0);
  auto add = [&](int64_t k, double v) {
    s[static_cast<size_t>(k)] += v;
    has[static_cast<size_t>(k)] = 1;
  };
  double x0 = x[r * 3], x1 = x[r * 3 + 1], x2 = x[r * 3 + 2];
  if(x0 <= a) {
    add(0, 1.0);
    add(1, 0.5);
  } else if(x2 < b) {
    add(0, -2.0);
  } else {
    add(1, 3.0);
  }
  if(x1 > 0) {
    add(0, 0.25);
  } else {
    add(0, 0.75);
    add(2 % outputs, -1.0);
  }
}

OpCase regressorCase() {
  TreeEnsembleSpec spec = twoTrees(3, kA, kB);
  spec.baseValues = {0.5, -0.5, 2.0};
  OpCase c{"tree_ensemble", "regressor_sum_base",
           {constantInput(in({6, 3}))},
           [=](const std::vector<Expr>& v) { return tree_ensemble(v[0], spec); },
           [=](const std::vector<Ref>& v) {
             const int64_t N = v[0].shape[0];
             Ref y{{N, 3}, std::vector<double>(static_cast<size_t>(N * 3))};
             std::vector<double> s;
             std::vector<char> has;
             for(int64_t r = 0; r < N; ++r) {
               referenceSums(v[0], r, 3, s, has, kA, kB);
               // onnxruntime: an output no leaf reached is 0 (its base value dropped)
               for(int64_t k = 0; k < 3; ++k) y[r * 3 + k] = has[static_cast<size_t>(k)] ? s[static_cast<size_t>(k)] + spec.baseValues[static_cast<size_t>(k)] : 0.0;
             }
             return y;
           }};
  c.gradcheck = false;
  return c;
}

OpCase classifierCase() {
  TreeEnsembleSpec spec = twoTrees(3);
  spec.classifier = true;
  spec.post = ml::Post::softmax;
  spec.baseValues = {0.1, 0.2, 0.3};
  OpCase c{"tree_ensemble", "classifier_softmax_label",
           {constantInput(in({6, 3}))},
           [=](const std::vector<Expr>& v) { return tree_ensemble(v[0], spec); },
           [=](const std::vector<Ref>& v) {
             const int64_t N = v[0].shape[0];
             Ref y{{N, 4}, std::vector<double>(static_cast<size_t>(N * 4))};
             std::vector<double> s;
             std::vector<char> has;
             for(int64_t r = 0; r < N; ++r) {
               referenceSums(v[0], r, 3, s, has);
               for(int64_t k = 0; k < 3; ++k) s[static_cast<size_t>(k)] += spec.baseValues[static_cast<size_t>(k)];
               int64_t best = std::max_element(s.begin(), s.end()) - s.begin();
               double mx = s[static_cast<size_t>(best)], sum = 0;
               for(double e : s) sum += std::exp(e - mx);
               for(int64_t k = 0; k < 3; ++k) y[r * 4 + k] = std::exp(s[static_cast<size_t>(k)] - mx) / sum;
               y[r * 4 + 3] = static_cast<double>(best);
             }
             return y;
           }};
  c.gradcheck = false;
  return c;
}

static CaseRegistrar kTreeEnsemble[] = {CaseRegistrar(regressorCase()), CaseRegistrar(classifierCase())};

TEST(TreeEnsemble, BadTreesAreOneLineErrors) {
  auto g = cpuGraph();
  auto x = g->constant({2, 3}, inits::fromValue(0.5));
  TreeEnsembleSpec s = twoTrees(2);
  s.trueChild[0] = 42;
  try {
    tree_ensemble(x, s);
    FAIL() << "a child out of range was accepted";
  } catch(const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("true_child 42 out of range"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  s = twoTrees(2);
  s.feature[0] = 3;
  EXPECT_THROW(tree_ensemble(x, s), Error);  // reads feature 3 of 3
  // A cycle (node 2's true child is the root) would walk forever: an error
  // when the kernel first flattens the trees.
  s = twoTrees(2);
  s.trueChild[2] = 0;
  tree_ensemble(x, s);
  try {
    g->forward();
    FAIL() << "a cycle was accepted";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reached twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace test
}  // namespace onyx
