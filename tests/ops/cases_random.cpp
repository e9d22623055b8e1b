// Harness cases of src/ops/random.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "ops/harness.h"

#include <onyx/ops/random.h>

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

double meanOf(const Ref& r) {
  double s = 0;
  for(auto v : r.v) s += v;
  return s / double(r.size());
}
double varOf(const Ref& r) {
  double m = meanOf(r), s = 0;
  for(auto v : r.v) s += (v - m) * (v - m);
  return s / double(r.size());
}

// ------------------------------------------------------------------ random

// 20000 draws in [-2, 3): range, mean 0.5 and variance 25/12 within ~6 sigma.
ONYX_OP_CASE({"random_uniform", "range_mean_variance", {constantInput(in({100, 200}))},
              [](Xs x) { return random_uniform(x[0]->graph(), x[0]->shape(), -2, 3, x[0]->value_type()); },
              nullptr, /*gradcheck=*/false, 1e-4, 1e-5, 1e-6, /*stochastic=*/true,
              [](const Ref& out, Rs ins) {
                ASSERT_EQ(out.shape, ins[0].shape);
                for(int64_t i = 0; i < out.size(); ++i) ASSERT_TRUE(out[i] >= -2 && out[i] < 3) << out[i];
                EXPECT_NEAR(meanOf(out), 0.5, 6 * std::sqrt(25.0 / 12 / 20000));
                EXPECT_NEAR(varOf(out), 25.0 / 12, 0.08);
                // Not constant: many distinct values.
                std::vector<double> v = out.v;
                std::sort(v.begin(), v.end());
                EXPECT_GT(std::unique(v.begin(), v.end()) - v.begin(), 19000);
              }});

// 20000 normal draws: mean 1, standard deviation 2, and about 68.3% within
// one standard deviation.
ONYX_OP_CASE({"random_normal", "moments", {constantInput(in({100, 200}))},
              [](Xs x) { return random_normal(x[0]->graph(), x[0]->shape(), 1, 2, x[0]->value_type()); },
              nullptr, /*gradcheck=*/false, 1e-4, 1e-5, 1e-6, /*stochastic=*/true,
              [](const Ref& out, Rs ins) {
                ASSERT_EQ(out.shape, ins[0].shape);
                EXPECT_NEAR(meanOf(out), 1.0, 6 * 2 / std::sqrt(20000.0));
                EXPECT_NEAR(std::sqrt(varOf(out)), 2.0, 0.07);
                int64_t within = 0;
                for(auto v : out.v) within += std::fabs(v - 1) < 2;
                EXPECT_NEAR(double(within) / double(out.size()), 0.6827, 0.02);
              }});

// Seeded generators give the same values in every graph (and different
// values for another seed).
TEST(RandomOps, SeededRandomIsReproducible) {
  auto draw = [](double seed) {
    auto g = New<ExpressionGraph>();
    g->setDevice({0, DeviceType::cpu});
    g->setSeed(static_cast<uint64_t>(seed * 7 + 1));  // the graph's own seed must not matter
    Expr y = random_normal(g.get(), Shape{50}, 0, 1, Type::float32, seed);
    g->forward();
    return y->val()->toVector<float>();
  };
  EXPECT_EQ(draw(3), draw(3));
  EXPECT_NE(draw(3), draw(4));
}

// 4 rows of logits, 5000 samples each: the class frequencies follow
// softmax(row), and every index lies in [0, classes).
ONYX_OP_CASE({"multinomial", "frequencies",
              {constantInput(values({4, 3}, {0, 0, 0, 1, 2, 3, -1, 0, 5, 0, -INFINITY, 0}))},
              [](Xs x) { return multinomial(x[0], 5000, Type::int64); },
              nullptr, /*gradcheck=*/false, 1e-4, 1e-5, 1e-6, /*stochastic=*/true,
              [](const Ref& out, Rs ins) {
                ASSERT_EQ(out.shape, (std::vector<int64_t>{4, 5000}));
                for(int64_t b = 0; b < 4; ++b) {
                  double p[3], z = 0;
                  for(int k = 0; k < 3; ++k) z += p[k] = std::exp(ins[0][b * 3 + k]);
                  double count[3] = {0, 0, 0};
                  for(int64_t s = 0; s < 5000; ++s) {
                    double k = out[b * 5000 + s];
                    ASSERT_TRUE(k == 0 || k == 1 || k == 2) << k;
                    count[static_cast<int>(k)] += 1;
                  }
                  for(int k = 0; k < 3; ++k) {
                    double q = p[k] / z;
                    EXPECT_NEAR(count[k] / 5000, q, 6 * std::sqrt(q * (1 - q) / 5000) + 1e-12) << b << "," << k;
                  }
                }
              }});

}  // namespace
}  // namespace test
}  // namespace onyx
