// ExpressionGraph::gradients(): symbolic gradients built as ordinary nodes,
// checked against hand-derived derivatives, and backward() still working on
// the same graph afterwards.
#include <gtest/gtest.h>

#include <cmath>

#include <onyx/onyx.h>

namespace onyx {
namespace {

Ptr<ExpressionGraph> newGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  g->reserveWorkspaceMB(8);
  g->setDefaultElementType(Type::float64);
  return g;
}

const std::vector<double> kA{0.5, 1.0, 2.0}, kB{3.0, -1.0, 0.25};

void expectNear(const Tensor& t, const std::vector<double>& want) {
  ASSERT_TRUE(t);
  std::vector<double> got = t->toVector<double>();
  ASSERT_EQ(got.size(), want.size());
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

TEST(Gradients, MatchHandDerivedDerivatives) {
  auto g = newGraph();
  auto a = g->param("a", {3}, inits::fromVector(kA));
  auto b = g->input("b", {3});
  auto c = g->param("c", {3}, inits::ones());  // y does not depend on c
  auto y = a * b + sin(a);
  size_t before = g->size();
  auto d = g->gradients(y, {a, b, c, y});
  ASSERT_EQ(d.size(), 4u);
  EXPECT_GT(g->size(), before);  // new nodes, nothing run
  EXPECT_FALSE(d[0]->val());
  EXPECT_EQ(d[2]->shape(), c->shape());
  b->bind(TensorBase::fromVector<double>({3}, kB));
  g->forward();
  std::vector<double> da, db;
  for(size_t i = 0; i < 3; ++i) {
    da.push_back(kB[i] + std::cos(kA[i]));  // dy/da = b + cos(a)
    db.push_back(kA[i]);                    // dy/db = a
  }
  expectNear(d[0]->val(), da);
  expectNear(d[1]->val(), db);
  expectNear(d[2]->val(), {0, 0, 0});
  expectNear(d[3]->val(), {1, 1, 1});  // dy/dy
}

TEST(Gradients, BackwardStillWorksAfterwards) {
  auto g = newGraph();
  auto a = g->param("a", {3}, inits::fromVector(kA));
  auto b = g->param("b", {3}, inits::fromVector(kB));
  auto y = a * b + sin(a);
  auto d = g->gradients(y, {a});
  size_t built = g->size();
  g->forward();
  g->backward(y);
  EXPECT_EQ(g->size(), built);  // backward's own nodes are gone, gradients' stay
  std::vector<double> da, db;
  for(size_t i = 0; i < 3; ++i) {
    da.push_back(kB[i] + std::cos(kA[i]));
    db.push_back(kA[i]);
  }
  expectNear(a->grad(), da);
  expectNear(b->grad(), db);
  // The gradient expression is still valid and recomputes with new values.
  a->val()->copyFrom(*TensorBase::fromVector<double>({3}, {0.0, 0.0, 0.0}));
  g->forward();
  expectNear(d[0]->val(), {kB[0] + 1, kB[1] + 1, kB[2] + 1});
  // backward() through the gradient expression itself: d/da sum(b + cos a) = -sin(a) = 0 at a = 0,
  // d/db sum(b + cos a) = 1.
  g->backward(sum(d[0]));
  expectNear(a->grad(), {0, 0, 0});
  expectNear(b->grad(), {1, 1, 1});
}

TEST(Gradients, SecondOrderAndBroadcast) {
  auto g = newGraph();
  auto a = g->param("a", {2, 3}, inits::fromVector(std::vector<double>{0.5, 1, 2, -1, 0.25, 3}));
  auto bias = g->param("bias", {3}, inits::fromVector(kB));
  auto y = sin(a) + bias;  // bias broadcast over 2 rows
  auto first = g->gradients(y, {a, bias});
  auto second = g->gradients(first[0], {a});  // d/da sum(cos a) = -sin(a)
  g->forward();
  std::vector<double> av = a->val()->toVector<double>(), cosA, minusSinA;
  for(double v : av) {
    cosA.push_back(std::cos(v));
    minusSinA.push_back(-std::sin(v));
  }
  expectNear(first[0]->val(), cosA);
  EXPECT_EQ(first[1]->shape(), bias->shape());
  expectNear(first[1]->val(), {2, 2, 2});  // summed over the broadcast rows
  expectNear(second[0]->val(), minusSinA);
}

TEST(Gradients, NonDifferentiableOpIsAnErrorAndRollsBack) {
  auto g = newGraph();
  auto a = g->param("a", {3}, inits::fromVector(kA));
  auto b = g->param("b", {3}, inits::fromVector(kB));
  auto y = sum(hardmax(a, 0) * b) + sum(a * b);
  size_t before = g->size();
  std::string msg;
  try {
    g->gradients(y, {a});
  } catch(const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("hardmax"), std::string::npos) << msg;
  EXPECT_EQ(g->size(), before);
  // With respect to b only, hardmax's input needs no gradient: no error.
  auto d = g->gradients(y, {b});
  g->forward();
  expectNear(d[0]->val(), {kA[0], kA[1], kA[2] + 1});  // hardmax(a) + a; a's maximum is the last
  // The failed call left no state behind: backward() w.r.t. b alone works.
  a->setTrainable(false);
  g->backward(y);
  expectNear(b->grad(), {kA[0], kA[1], kA[2] + 1});
}

TEST(Gradients, BadArgumentsAreErrors) {
  auto g = newGraph();
  auto a = g->param("a", {3}, inits::fromVector(kA));
  auto flag = gt(a, 1.0);
  EXPECT_THROW(g->gradients(flag, {a}), Error);  // bool y
  EXPECT_THROW(g->gradients(a, {Expr()}), Error);
  auto other = newGraph();
  auto x = other->param("x", {3}, inits::ones());
  EXPECT_THROW(g->gradients(a, {x}), Error);
}

}  // namespace
}  // namespace onyx
