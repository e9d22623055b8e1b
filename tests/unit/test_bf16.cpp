// ComputePrecision::bfloat16: float32 matrix products and convolutions
// (forward and both gradients) computed on bfloat16-rounded operands with
// float32 sums. Each result is compared with two references computed in
// float64 by the portable kernels: one on the operands rounded to bfloat16
// (here, by frexp/nearbyint, not by the code under test) and one on the
// float32 operands. Where the CPU has bfloat16 instructions the result must
// sit on the first and measurably off the second; where it has none (or
// ONYX_BF16=0: ctest runs this suite a second time so), the graph computes
// in float32 and must match its own float32 results bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <onyx/onyx.h>

namespace onyx {
namespace {

// x rounded to 8 significant bits, ties to even: bfloat16's rounding.
double roundBf16(double x) {
  if(x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  double m = std::frexp(x, &e);  // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for(float& f : v) f = u(rng);
  return v;
}

Tensor hostTensor(const Shape& s, const std::vector<float>& v, Type t, bool roundToBf16) {
  Tensor out = TensorBase::create(s, t);
  for(size_t i = 0; i < v.size(); ++i) out->setFromDouble(int64_t(i), roundToBf16 ? roundBf16(v[i]) : v[i]);
  return out;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t->size()));
  for(size_t i = 0; i < v.size(); ++i) v[i] = t->getAsDouble(int64_t(i));
  return v;
}

double maxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for(size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

double maxAbs(const std::vector<double>& a) {
  double m = 0;
  for(double v : a) m = std::max(m, std::fabs(v));
  return m;
}

struct Operand {
  Shape shape;
  std::vector<float> values;
  bool rounded = true;  // whether the kernels read it in bfloat16 (a bias they do not)
};

// What a computation makes of its operands (params): outputs, and a loss
// whose gradients with respect to every operand are outputs too.
struct Made {
  std::vector<Expr> outputs;
  Expr loss;
};
using Compute = std::function<Made(const std::vector<Expr>&)>;

// f's outputs (then the operands' gradients) in a graph of type t and
// precision p; the operands rounded to bfloat16 first when asked.
std::vector<std::vector<double>> run(const Compute& f, const std::vector<Operand>& ops, Type t, ComputePrecision p,
                                     bool roundOperands) {
  auto g = New<ExpressionGraph>();
  g->setComputePrecision(p);
  std::vector<Expr> in;
  for(size_t i = 0; i < ops.size(); ++i) {
    Tensor v = hostTensor(ops[i].shape, ops[i].values, t, roundOperands && ops[i].rounded);
    in.push_back(g->param("p" + std::to_string(i), ops[i].shape, inits::fromTensor(v), t));
  }
  Made m = f(in);
  g->forward();
  std::vector<std::vector<double>> r;
  for(const Expr& o : m.outputs) r.push_back(values(o->val()));
  if(m.loss) {
    g->backward(m.loss);
    for(const Expr& x : in) r.push_back(values(x->grad()));
  }
  return r;
}

// Checks every output of f in bfloat16 against the two float64 references
// (or, without bfloat16, against float32 exactly).
void checkBf16(const std::string& what, const Compute& f, const std::vector<Operand>& ops) {
  SCOPED_TRACE(what);
  auto bf16 = run(f, ops, Type::float32, ComputePrecision::bfloat16, false);
  if(!bf16Available()) {
    auto f32 = run(f, ops, Type::float32, ComputePrecision::float32, false);
    ASSERT_EQ(bf16.size(), f32.size());
    for(size_t k = 0; k < f32.size(); ++k) EXPECT_EQ(bf16[k], f32[k]) << "output " << k;
    return;
  }
  auto onRounded = run(f, ops, Type::float64, ComputePrecision::float32, true);
  auto exact = run(f, ops, Type::float64, ComputePrecision::float32, false);
  ASSERT_EQ(bf16.size(), onRounded.size());
  for(size_t k = 0; k < bf16.size(); ++k) {
    const double scale = maxAbs(onRounded[k]);
    ASSERT_GT(scale, 0) << "output " << k;
    const double errRounded = maxAbsDiff(bf16[k], onRounded[k]);
    const double errExact = maxAbsDiff(bf16[k], exact[k]);
    // float32 sums of up to a few thousand products: far inside 1e-5 of the
    // largest value; bfloat16's rounding of the operands moves the results
    // by about 1e-3 of it.
    EXPECT_LT(errRounded, 1e-5 * scale) << "output " << k << ": not the product of the bfloat16-rounded operands";
    EXPECT_GT(errExact, 20 * errRounded) << "output " << k << ": indistinguishable from float32";
  }
}

Operand random(const Shape& s, uint32_t seed) { return {s, randomValues(size_t(s.elements()), seed)}; }
Operand bias(const Shape& s, uint32_t seed) { return {s, randomValues(size_t(s.elements()), seed), false}; }

TEST(Bf16, PrecisionNamesParse) {
  EXPECT_EQ(parseComputePrecision("bf16"), ComputePrecision::bfloat16);
  EXPECT_EQ(parseComputePrecision("bfloat16"), ComputePrecision::bfloat16);
  EXPECT_EQ(parseComputePrecision("float32"), ComputePrecision::float32);
  EXPECT_STREQ(computePrecisionName(ComputePrecision::bfloat16), "bf16");
  try {
    parseComputePrecision("fp8", "--precision");
    FAIL() << "fp8 was accepted";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision: unknown precision 'fp8'"), std::string::npos) << e.what();
  }
}

TEST(Bf16, MatrixProducts) {
  checkBf16("matmul NN", [](const std::vector<Expr>& x) { return Made{{matmul(x[0], x[1])}, nullptr}; },
            {random(Shape({48, 200}), 1), random(Shape({200, 40}), 2)});
  checkBf16("dot transA transB scaled",
            [](const std::vector<Expr>& x) { return Made{{dot(x[0], x[1], true, true, 0.5f)}, nullptr}; },
            {random(Shape({200, 48}), 3), random(Shape({40, 200}), 4)});
  checkBf16("affine (bias summed in)",
            [](const std::vector<Expr>& x) { return Made{{affine(x[0], x[1], x[2], false, true)}, nullptr}; },
            {random(Shape({64, 300}), 5), random(Shape({96, 300}), 6), bias(Shape({96}), 7)});
  checkBf16("batched matmul",
            [](const std::vector<Expr>& x) { return Made{{matmul(x[0], x[1])}, nullptr}; },
            {random(Shape({6, 32, 128}), 8), random(Shape({6, 128, 24}), 9)});
  checkBf16("batched, a broadcast",
            [](const std::vector<Expr>& x) { return Made{{matmul(x[0], x[1])}, nullptr}; },
            {random(Shape({1, 32, 128}), 10), random(Shape({5, 128, 24}), 11)});
}

TEST(Bf16, MatmulGradients) {
  // d/dA sum(A.B * R) = R.B^T, d/dB = A^T.R: matmuls of the backward, each
  // on bfloat16-rounded operands (R enters as the gradient, exactly).
  checkBf16("matmul gradients",
            [](const std::vector<Expr>& x) { return Made{{}, sum(matmul(x[0], x[1]) * x[2])}; },
            {random(Shape({40, 160}), 12), random(Shape({160, 56}), 13), random(Shape({40, 56}), 14)});
}

TEST(Bf16, Convolutions) {
  // x [2, 32, 14, 14], W [64, 32, 3, 3], pads 1.
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  checkBf16("conv, 3x3, 32 -> 64 channels, with a bias",
            [o](const std::vector<Expr>& x) { return Made{{conv(x[0], x[1], x[2], o)}, nullptr}; },
            {random(Shape({2, 32, 14, 14}), 15), random(Shape({64, 32, 3, 3}), 16), bias(Shape({64}), 17)});
  // The loss sum(conv * R) makes conv_transpose (dx) and conv_grad_weight
  // (dW) of R in backward.
  checkBf16("conv, 3x3, 32 -> 64 channels, gradients",
            [o](const std::vector<Expr>& x) {
              Expr y = conv(x[0], x[1], nullptr, o);
              return Made{{y}, sum(y * x[2])};
            },
            {random(Shape({2, 32, 14, 14}), 18), random(Shape({64, 32, 3, 3}), 19), random(Shape({2, 64, 14, 14}), 20)});
  // A stride-2 7x7 conv reading 3 channels (ResNet's first layer).
  ConvOptions s;
  s.strides = {2, 2};
  s.pads = {3, 3, 3, 3};
  checkBf16("conv, 7x7 stride 2, 3 -> 16 channels, gradients",
            [s](const std::vector<Expr>& x) {
              Expr y = conv(x[0], x[1], nullptr, s);
              return Made{{y}, sum(y * x[2])};
            },
            {random(Shape({2, 3, 32, 32}), 21), random(Shape({16, 3, 7, 7}), 22), random(Shape({2, 16, 16, 16}), 23)});
}

}  // namespace
}  // namespace onyx
