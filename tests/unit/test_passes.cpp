// Graph passes (graph/passes/passes.h) on small graphs: each rewrite fires
// where it is legal, leaves the graph alone where it is not, and the
// rewritten graph computes what the graph as built computes. And the op
// profiler (graph/profiler.h): what it records and writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

// A graph built by `build` (which returns its output) twice: once as built,
// once rewritten by `pass`. Returns the number the pass reported and checks
// that both give the same output within `tol` (relative to max |y|).
struct Built {
  Ptr<ExpressionGraph> g;
  Expr y;
};

Built make(const std::function<Expr(ExpressionGraph&)>& build, bool inference = true) {
  Built b;
  b.g = New<ExpressionGraph>();
  b.g->setInference(inference);
  b.g->setSeed(7);
  b.y = build(*b.g);
  b.y->keepValue();
  return b;
}

std::vector<double> values(Expr y) {
  std::vector<double> v;
  y->val()->get(v);
  return v;
}

// Op counts by friendly name over the graph's live op nodes.
std::map<std::string, int> opCounts(const ExpressionGraph& g) {
  std::map<std::string, int> m;
  for(const Expr& e : g.nodes())
    if(e->kind() == NodeKind::Op) ++m[e->op()->name];
  return m;
}

// How many rewrites `pass` made in an optimizeGraph run (0: it did not fire).
size_t firedCount(const PassCounts& fired, const std::string& pass) {
  for(const auto& kv : fired)
    if(kv.first == pass) return kv.second;
  return 0;
}

using Pass = size_t (*)(ExpressionGraph&, const std::vector<Expr>&);

size_t checkPass(const std::function<Expr(ExpressionGraph&)>& build, Pass pass, double tol,
                 std::map<std::string, int>* after = nullptr) {
  Built ref = make(build), opt = make(build);
  size_t n = pass(*opt.g, {opt.y});
  opt.g->prune({opt.y});
  ref.g->forward();
  opt.g->forward();
  std::vector<double> a = values(ref.y), b = values(opt.y);
  EXPECT_EQ(a.size(), b.size());
  double scale = 0;
  for(double v : a) scale = std::max(scale, std::fabs(v));
  for(size_t i = 0; i < a.size() && i < b.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol * std::max(scale, 1.0)) << "element " << i;
  if(after) *after = opCounts(*opt.g);
  return n;
}

Expr randomConst(ExpressionGraph& g, const Shape& s, double lo = -1, double hi = 1) {
  return g.constant(s, inits::uniform(static_cast<float>(lo), static_cast<float>(hi)));
}

// An input x bound to value(i) at each flat index i.
Expr boundInput(ExpressionGraph& g, const Shape& s, const std::function<float(float)>& value) {
  Expr x = g.input("x", s);
  std::vector<float> v(static_cast<size_t>(s.elements()));
  for(size_t i = 0; i < v.size(); ++i) v[i] = value(static_cast<float>(i));
  x->bind(TensorBase::fromVector<float>(s, v));
  return x;
}

// ---- levels

TEST(Passes, OptLevelNames) {
  EXPECT_EQ(parseOptLevel("none"), OptLevel::none);
  EXPECT_EQ(parseOptLevel("basic"), OptLevel::basic);
  EXPECT_EQ(parseOptLevel("all"), OptLevel::all);
  EXPECT_STREQ(optLevelName(OptLevel::basic), "basic");
  try {
    parseOptLevel("fast");
    FAIL() << "no error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none, basic or all"), std::string::npos) << e.what();
  }
}

// ---- fold_constants

TEST(Passes, FoldConstantsComputesConstantSubgraphsOnce) {
  std::map<std::string, int> ops;
  auto build = [](ExpressionGraph& g) {
    Expr x = g.input("x", {3, 4});
    x->bind(TensorBase::fromVector<float>(Shape({3, 4}), std::vector<float>(12, 0.25f)));
    Expr w = randomConst(g, {4, 3});
    Expr wt = transpose(w, {1, 0});  // constant: folded
    Expr s = exp(randomConst(g, {4}));  // constant: folded
    return (x * s) + wt;
  };
  size_t n = checkPass(build, foldConstants, 0, &ops);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(ops.count("transpose"), 0u);
  EXPECT_EQ(ops.count("exp"), 0u);
  EXPECT_EQ(ops["mul"], 1);
  EXPECT_EQ(ops["add"], 1);
}

TEST(Passes, FoldConstantsLeavesRandomAndLargeExpansions) {
  std::map<std::string, int> ops;
  Built b = make([](ExpressionGraph& g) {
    Expr r = random_uniform(&g, Shape({4}));                          // stochastic: never folded
    Expr big = expand(g.scalar(1.0, Type::float32), Shape({1024, 1024}));  // 4 MiB from 4 bytes
    return sum(big, {0, 1}, false) + sum(r, {0}, false);
  });
  EXPECT_EQ(foldConstants(*b.g, {b.y}), 0u);
  ops = opCounts(*b.g);
  EXPECT_EQ(ops["random_uniform"], 1);
  EXPECT_EQ(ops["expand"], 1);
  b.g->forward();
  EXPECT_GE(values(b.y)[0], 1024.0 * 1024.0);
}

// ---- eliminate_noops

TEST(Passes, EliminateNoOpsDropsIdentitiesAndMergesChains) {
  std::map<std::string, int> ops;
  auto build = [](ExpressionGraph& g) {
    const Registry& r = Registry::instance();
    Expr x = boundInput(g, {2, 3, 4}, [](float i) { return i - 7.5f; });
    Expr a = g.make(r.get("reshape"), {x}, {{"shape", attr(std::vector<int64_t>{2, 3, 4})}});  // same shape
    Expr b = g.make(r.get("cast"), {a}, {{"to", int64_t(Type::float32)}});                     // same type
    Expr c = g.make(r.get("transpose"), {b}, {{"perm", attr(std::vector<int>{0, 1, 2})}});     // identity
    Expr d = transpose(transpose(c, {1, 0, 2}), {1, 0, 2});                                    // cancel
    Expr e = transpose(transpose(d, {2, 0, 1}), {0, 2, 1});                                    // one transpose
    Expr f = reshape(reshape(e, Shape({24})), Shape({6, 4}));                                  // one reshape
    return sin(f);
  };
  size_t n = checkPass(build, eliminateNoOps, 0, &ops);
  EXPECT_GE(n, 6u);
  EXPECT_EQ(ops.count("cast"), 0u);
  EXPECT_EQ(ops["transpose"], 1);
  EXPECT_EQ(ops["reshape"], 1);
  EXPECT_EQ(ops["sin"], 1);
}

TEST(Passes, EliminateNoOpsKeepsAGraphOutput) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = g.input("x", {2, 2});
    x->bind(TensorBase::fromVector<float>(Shape({2, 2}), std::vector<float>{1, 2, 3, 4}));
    return g.make(Registry::instance().get("reshape"), {x}, {{"shape", attr(std::vector<int64_t>{2, 2})}});
  });
  EXPECT_EQ(eliminateNoOps(*b.g, {b.y}), 0u);
  EXPECT_EQ(opCounts(*b.g)["reshape"], 1);
}

// ---- fuse_gelu: the three associations exporters write

Expr geluInput(ExpressionGraph& g) {
  return boundInput(g, {4, 8}, [](float i) { return 0.37f * (i - 15.f); });
}

TEST(Passes, FuseGeluMatchesEachAssociation) {
  std::vector<std::function<Expr(ExpressionGraph&)>> forms = {
      [](ExpressionGraph& g) { Expr x = geluInput(g); return (x * (1.0 + erf(x / std::sqrt(2.0)))) * 0.5; },
      [](ExpressionGraph& g) { Expr x = geluInput(g); return x * ((erf(x * std::sqrt(0.5)) + 1.0) * 0.5); },
      [](ExpressionGraph& g) { Expr x = geluInput(g); return (x * 0.5) * (1.0 + erf(x / std::sqrt(2.0))); },
  };
  for(size_t i = 0; i < forms.size(); ++i) {
    std::map<std::string, int> ops;
    EXPECT_EQ(checkPass(forms[i], fuseGelu, 1e-6, &ops), 1u) << "form " << i;
    EXPECT_EQ(ops["gelu"], 1) << "form " << i;
    EXPECT_EQ(ops.count("erf"), 0u) << "form " << i;
    EXPECT_EQ(ops.count("mul"), 0u) << "form " << i;
  }
}

TEST(Passes, FuseGeluNotWhenAnIntermediateIsReadElsewhereOrConstantsDiffer) {
  // erf's value is read by a second consumer: it must stay.
  Built b = make([](ExpressionGraph& g) {
    Expr x = geluInput(g);
    Expr e = erf(x / std::sqrt(2.0));
    return (x * (1.0 + e)) * 0.5 + e;
  });
  EXPECT_EQ(fuseGelu(*b.g, {b.y}), 0u);
  // 0.45 instead of 0.5 is not GELU.
  Built c = make([](ExpressionGraph& g) {
    Expr x = geluInput(g);
    return (x * (1.0 + erf(x / std::sqrt(2.0)))) * 0.45;
  });
  EXPECT_EQ(fuseGelu(*c.g, {c.y}), 0u);
}

// ---- fuse_matmul_add

TEST(Passes, FuseMatmulAddMakesAffine) {
  std::map<std::string, int> ops;
  auto build = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {2, 3, 8}, [](float i) { return std::sin(i); });
    return randomConst(g, {5}) + matmul(x, randomConst(g, {8, 5}));
  };
  EXPECT_EQ(checkPass(build, fuseMatmulAdd, 1e-6, &ops), 1u);
  EXPECT_EQ(ops["affine"], 1);
  EXPECT_EQ(ops.count("matmul"), 0u);
  EXPECT_EQ(ops.count("add"), 0u);
}

TEST(Passes, FuseMatmulAddNotForBatchedWeightsOrWideningBias) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {2, 3, 8});
    Expr w = randomConst(g, {2, 8, 5});  // batched W: affine takes a 2-D one
    return matmul(x, w) + randomConst(g, {5});
  });
  EXPECT_EQ(fuseMatmulAdd(*b.g, {b.y}), 0u);
  Built c = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {3, 8});
    return matmul(x, randomConst(g, {8, 5})) + randomConst(g, {2, 3, 5});  // the add widens the product
  });
  EXPECT_EQ(fuseMatmulAdd(*c.g, {c.y}), 0u);
  Built d = make([](ExpressionGraph& g) {
    Expr m = matmul(randomConst(g, {3, 8}), randomConst(g, {8, 5}));
    return (m + randomConst(g, {5})) * m;  // the product is read twice
  });
  EXPECT_EQ(fuseMatmulAdd(*d.g, {d.y}), 0u);
}

// ---- fuse_transpose_matmul

TEST(Passes, FuseTransposeMatmulFoldsSwapsIntoTheFlags) {
  std::map<std::string, int> ops;
  auto build = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {2, 3, 8}, [](float i) { return std::sin(0.7f * i); });
    // x . w^T with w [2, 5, 8], then (u^T) . that with u [2, 3, 4]: both
    // swaps become flags.
    Expr xw = matmul(x, transpose(randomConst(g, {2, 5, 8}), {0, 2, 1}));
    return matmul(transpose(randomConst(g, {2, 3, 4}), {0, 2, 1}), xw);
  };
  EXPECT_EQ(checkPass(build, fuseTransposeMatmul, 1e-6, &ops), 2u);
  EXPECT_EQ(ops["matmul"], 2);
  EXPECT_EQ(ops.count("transpose"), 0u);
  // A 2-D transpose with the default (reversing) perm, under transB already:
  // the flag flips back.
  auto twice = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {4, 6}, [](float i) { return std::cos(0.3f * i); });
    return dot(x, transpose(randomConst(g, {6, 3})), false, true);
  };
  Built b = make(twice);
  EXPECT_EQ(fuseTransposeMatmul(*b.g, {b.y}), 1u);
  EXPECT_EQ(b.y->attrs().i("transB"), 0);
  EXPECT_EQ(checkPass(twice, fuseTransposeMatmul, 1e-6), 1u);
}

TEST(Passes, FuseTransposeMatmulNotForOtherPermsOrSharedTransposes) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {2, 3, 8});
    return matmul(transpose(randomConst(g, {3, 2, 8}), {1, 0, 2}), transpose(x, {0, 2, 1}));  // batch swap: no
  });
  EXPECT_EQ(fuseTransposeMatmul(*b.g, {b.y}), 1u);  // only the second operand
  Built c = make([](ExpressionGraph& g) {
    Expr t = transpose(randomConst(g, {5, 8}));
    return matmul(randomConst(g, {3, 8}), t) + sum(t);  // the transpose is read twice
  });
  EXPECT_EQ(fuseTransposeMatmul(*c.g, {c.y}), 0u);
  Built d = make([](ExpressionGraph& g) {
    Expr t = transpose(randomConst(g, {4, 4}));
    return matmul(t, t);  // one transpose, both operands
  });
  EXPECT_EQ(fuseTransposeMatmul(*d.g, {d.y}), 0u);
}

// optimizeTrainingGraph fuses a GELU chain, a transposed weight and a bias
// add in a graph built for training; the loss and the params' gradients
// are those of the graph as built, and a name no pass has is an error.
TEST(Passes, OptimizeTrainingGraphKeepsTheGradients) {
  auto build = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {4, 8}, [](float i) { return std::sin(0.37f * i); });
    Expr w = g.param("w", {5, 8}, inits::uniform(-0.5f, 0.5f));
    Expr b = g.param("b", {5}, inits::uniform(-0.5f, 0.5f));
    Expr h = matmul(x, transpose(w)) + b;
    Expr y = (h * (1.0 + erf(h / std::sqrt(2.0)))) * 0.5;
    return y;
  };
  Built plain = make(build, false), fused = make(build, false);
  PassCounts fired = optimizeTrainingGraph(*fused.g, {fused.y});
  std::string names;
  for(auto& kv : fired) names += kv.first + " ";
  EXPECT_EQ(names, "fuse_gelu fuse_transpose_matmul fuse_matmul_add prune ");
  auto ops = opCounts(*fused.g);
  EXPECT_EQ(ops["gelu"], 1);
  EXPECT_EQ(ops["affine"], 1);
  EXPECT_EQ(ops.size(), 2u);
  std::vector<double> grads[2], biasGrads[2], losses[2];
  Built* both[2] = {&plain, &fused};
  for(int k = 0; k < 2; ++k) {
    ExpressionGraph& g = *both[k]->g;
    Expr loss = sum(both[k]->y * both[k]->y);
    g.forward();
    g.backward(loss);
    losses[k] = values(loss);
    g.get("w")->grad()->get(grads[k]);
    g.get("b")->grad()->get(biasGrads[k]);
  }
  ASSERT_EQ(biasGrads[0].size(), 5u);
  ASSERT_EQ(biasGrads[1].size(), 5u);
  for(size_t i = 0; i < 5; ++i) EXPECT_NEAR(biasGrads[0][i], biasGrads[1][i], 1e-4) << "bias element " << i;
  ASSERT_EQ(grads[0].size(), 40u);
  ASSERT_EQ(grads[1].size(), 40u);
  EXPECT_NEAR(losses[0][0], losses[1][0], 1e-5 * (1 + std::fabs(losses[0][0])));
  for(size_t i = 0; i < grads[0].size(); ++i) EXPECT_NEAR(grads[0][i], grads[1][i], 1e-4) << "element " << i;
  // An inference graph is optimizeGraph's.
  Built inf = make(build);
  EXPECT_THROW(optimizeTrainingGraph(*inf.g, {inf.y}), Error);
  Built other = make(build, false);
  EXPECT_THROW(optimizeTrainingGraph(*other.g, {other.y}, {"fuse_everything"}), Error);
  EXPECT_EQ(optimizeTrainingGraph(*other.g, {other.y}, {"fuse_gelu", "fuse_matmul_add"}).size(), 2u);  // transpose, prune
}

// ---- fold_batch_norm

TEST(Passes, FoldBatchNormIntoConv) {
  std::map<std::string, int> ops;
  auto build = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {1, 3, 6, 6}, [](float i) { return std::cos(0.3f * i); });
    ConvOptions o;
    o.pads = {1, 1, 1, 1};
    Expr y = conv(x, randomConst(g, {4, 3, 3, 3}), randomConst(g, {4}), o);
    return relu(channel_affine(y, randomConst(g, {4}, 0.5, 2), randomConst(g, {4})));
  };
  EXPECT_EQ(checkPass(build, foldBatchNorm, 1e-5, &ops), 1u);
  EXPECT_EQ(ops.count("channel_affine"), 0u);
  EXPECT_EQ(ops["conv"], 1);
}

TEST(Passes, FoldBatchNormNotWhenWeightsAreInputs) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {1, 2, 4, 4});
    Expr w = g.input("w", {2, 2, 1, 1});
    w->bind(TensorBase::fromVector<float>(Shape({2, 2, 1, 1}), std::vector<float>{1, 2, 3, 4}));
    return channel_affine(conv(x, w), randomConst(g, {2}), randomConst(g, {2}));
  });
  EXPECT_EQ(foldBatchNorm(*b.g, {b.y}), 0u);
}

// ---- fuse_qdq

// The QDQ form of a quantized convolution as onnxruntime's quantizer writes
// it: x quantized to uint8, int8 weights per output channel, an int32 bias
// of scale x_scale * w_scale, the output quantized to uint8 and dequantized
// (the kept value). biasScaleOff: the bias scale 1% off (not exact).
Expr qdqConv(ExpressionGraph& g, bool biasScaleOff, bool convReadTwice = false) {
  Expr x = boundInput(g, {1, 3, 6, 6}, [](float i) { return std::sin(0.37f * i) * 2.f; });
  const float xs = 0.02f;
  const std::vector<float> ws{0.01f, 0.003f, 0.007f, 0.02f};
  std::vector<int8_t> w(4 * 3 * 3 * 3);
  for(size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int(i * 37 % 255) - 127);
  std::vector<int32_t> b{1200, -800, 30, -5000};
  std::vector<float> bs(4);
  for(size_t m = 0; m < 4; ++m) bs[m] = xs * ws[m] * (biasScaleOff ? 1.01f : 1.f);
  Expr xq = quantize_linear(x, g.scalar(xs, Type::float32), g.scalar(128, Type::uint8));
  Expr xd = dequantize_linear(xq, g.scalar(xs, Type::float32), g.scalar(128, Type::uint8));
  Expr wd = dequantize_linear(g.constant(TensorBase::fromVector<int8_t>(Shape({4, 3, 3, 3}), w)),
                              g.constant(TensorBase::fromVector<float>(Shape({4, 1, 1, 1}), ws)),
                              g.constant(TensorBase::fromVector<int8_t>(Shape({4, 1, 1, 1}), {0, 0, 0, 0})));
  Expr bd = dequantize_linear(g.constant(TensorBase::fromVector<int32_t>(Shape({4}), b)),
                              g.constant(TensorBase::fromVector<float>(Shape({4}), bs)),
                              g.constant(TensorBase::fromVector<int32_t>(Shape({4}), {0, 0, 0, 0})));
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  Expr c = conv(xd, wd, bd, o);
  Expr yq = quantize_linear(c, g.scalar(0.05, Type::float32), g.scalar(120, Type::uint8));
  Expr y = dequantize_linear(yq, g.scalar(0.05, Type::float32), g.scalar(120, Type::uint8));
  return convReadTwice ? y + c : y;
}

TEST(Passes, FuseQdqMakesQLinearConv) {
  std::map<std::string, int> ops;
  // The fused convolution sums exact integers where the float chain rounds
  // to float32: an output may move by one step of y's scale (0.05).
  const double stepOfMax = 0.05 / 4.0;
  EXPECT_EQ(checkPass([](ExpressionGraph& g) { return qdqConv(g, false); }, fuseQdq, 1.01 * stepOfMax, &ops), 1u);
  EXPECT_EQ(ops["qlinear_conv"], 1);
  EXPECT_EQ(ops.count("conv"), 0u);
}

TEST(Passes, FuseQdqNotWhenTheBiasScaleDiffersOrTheConvIsReadElsewhere) {
  for(int variant = 0; variant < 2; ++variant) {
    Built b = make([&](ExpressionGraph& g) { return qdqConv(g, variant == 0, variant == 1); });
    EXPECT_EQ(fuseQdq(*b.g, {b.y}), 0u) << "variant " << variant;
    EXPECT_EQ(opCounts(*b.g).count("qlinear_conv"), 0u);
  }
}

// ---- int8_layout

// Quantized convolutions: two of the input, their outputs dequantized,
// added and requantized, a third of that sum, its output dequantized
// (kept). Weights within [-range, range]: 60 takes oneDNN's int8 path on any
// x86 CPU, 127 its float path on CPUs without VNNI.
Expr int8Chain(ExpressionGraph& g, int range, bool relu = false) {
  Expr x = boundInput(g, {1, 8, 6, 6}, [](float i) { return std::sin(0.23f * i) * 2.f; });
  auto s = [&](double v) { return g.scalar(v, Type::float32); };
  auto z = [&](int v) { return g.scalar(v, Type::uint8); };
  auto weights = [&](int seed) {
    std::vector<int8_t> w(8 * 8 * 3 * 3);
    for(size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int((i * 37 + size_t(seed)) % size_t(2 * range + 1)) - range);
    return g.constant(TensorBase::fromVector<int8_t>(Shape({8, 8, 3, 3}), w));
  };
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  Expr xq = quantize_linear(x, s(0.02), z(128));
  Expr h = qlinear_conv(xq, s(0.02), z(128), weights(1), s(0.01), g.scalar(0, Type::int8), s(0.05), z(100), nullptr, o);
  Expr h2 = qlinear_conv(xq, s(0.02), z(128), weights(3), s(0.008), g.scalar(0, Type::int8), s(0.04), z(120), nullptr, o);
  Expr added = dequantize_linear(h, s(0.05), z(100)) + dequantize_linear(h2, s(0.04), z(120));
  Expr sum = quantize_linear(relu ? onyx::relu(added) : added, s(0.06), z(110));
  Expr y = qlinear_conv(sum, s(0.06), z(110), weights(2), s(0.004), g.scalar(0, Type::int8), s(0.1), z(90), nullptr, o);
  return dequantize_linear(y, s(0.1), z(90));
}

// DequantizeLinear, DequantizeLinear, Add, [Relu], QuantizeLinear between
// quantized convolutions: one qlinear_add, the same bits (its steps are the
// ops' own); and int8_layout then keeps the whole chain channels-last.
TEST(Passes, FuseQLinearAddGivesTheSameBits) {
  for(bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "with relu" : "without relu");
    auto build = [relu](ExpressionGraph& g) { return int8Chain(g, 60, relu); };
    std::map<std::string, int> ops;
    EXPECT_EQ(checkPass(build, fuseQLinearAdd, 0.0, &ops), 1u);
    EXPECT_EQ(ops["qlinear_add"], 1);
    EXPECT_EQ(ops.count("add"), 0u);
    EXPECT_EQ(ops.count("relu"), 0u);
    EXPECT_EQ(ops["dequantize_linear"], 1);  // the kept output's
    if(!host::dnnlEnabled()) continue;
    Built b = make(build);
    fuseQLinearAdd(*b.g, {b.y});
    b.g->prune({b.y});
    EXPECT_EQ(int8Layout(*b.g, {b.y}), 2u);  // h and h2 (into the qlinear_add); y is read by the kept dequantize
    for(const Expr& e : b.g->nodes()) {
      if(e->kind() == NodeKind::Op && e->op()->name == "qlinear_conv" && e->child(0)->kind() == NodeKind::Op &&
         e->child(0)->op()->name == "qlinear_add") {
        EXPECT_EQ(e->attrs().i("x_nhwc"), 1);  // the sum stays channels-last into y's conv
      }
    }
  }
}

// DequantizeLinear, MaxPool, QuantizeLinear with one scale and zero point
// on both ends: fuse_qdq drops the pair and pools the 8-bit values, with
// the same bits (uint8 and int8, a padded 3x3/2 pool); a pair whose
// parameters differ stays.
TEST(Passes, FuseQdqDropsThePairAroundAMaxPool) {
  for(Type t : {Type::uint8, Type::int8}) {
    for(bool same : {true, false}) {
      SCOPED_TRACE(testing::Message() << t << (same ? " same parameters" : " other parameters"));
      auto build = [t, same](ExpressionGraph& g) {
        Expr x = boundInput(g, {1, 3, 9, 8}, [](float i) { return std::sin(0.41f * i) * 2.5f; });
        Expr zp = g.scalar(t == Type::uint8 ? 130 : -7, t);
        Expr xq = quantize_linear(x, g.scalar(0.02, Type::float32), zp);
        PoolOptions o;
        o.strides = {2, 2};
        o.pads = {1, 1, 1, 1};
        Expr p = max_pool(dequantize_linear(xq, g.scalar(0.02, Type::float32), zp), {3, 3}, o);
        Expr yq = quantize_linear(p, g.scalar(same ? 0.02 : 0.03, Type::float32), zp);
        return dequantize_linear(yq, g.scalar(same ? 0.02 : 0.03, Type::float32), zp);
      };
      std::map<std::string, int> ops;
      EXPECT_EQ(checkPass(build, fuseQdq, 0.0, &ops), same ? 1u : 0u);
      EXPECT_EQ(ops["max_pool"], 1);
      EXPECT_EQ(ops["dequantize_linear"], same ? 1 : 2);  // the kept output's (and the pool input's)
      EXPECT_EQ(ops["quantize_linear"], same ? 1 : 2);    // xq's (and the pool output's)
    }
  }
}

// A QDQ classifier: Gemm (transB) of DequantizeLinear(xq) by
// DequantizeLinear of int8 weights [N, K] (per row, zero points nonzero) plus
// a float bias: fuse_qdq makes it matmul_integer_to_float on the int8
// weights, equal to float32 rounding; without transB it stays.
TEST(Passes, FuseQdqRunsAQdqGemmOnInt8Weights) {
  for(bool transB : {true, false}) {
    SCOPED_TRACE(transB ? "transB" : "no transB");
    auto build = [transB](ExpressionGraph& g) {
      const int64_t K = 40, N = 12;
      Expr x = boundInput(g, {3, K}, [](float i) { return std::sin(0.37f * i) * 2.f; });
      Expr xq = quantize_linear(x, g.scalar(0.02, Type::float32), g.scalar(120, Type::uint8));
      std::vector<int8_t> w(size_t(N * K));
      for(size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int((i * 53) % 201) - 100);
      const size_t n = static_cast<size_t>(N);
      std::vector<float> ws(n), b(n);
      std::vector<int8_t> wz(n);
      for(int64_t i = 0; i < N; ++i) {
        ws[size_t(i)] = 0.001f * float(i + 1);
        wz[size_t(i)] = int8_t(i % 5 - 2);
        b[size_t(i)] = 0.1f * float(i) - 0.5f;
      }
      const Shape wShape = transB ? Shape({N, K}) : Shape({K, N});
      Expr wq = g.constant(TensorBase::fromVector<int8_t>(wShape, w));
      // Per output channel: along W's axis 0 with transB (the import's
      // per-axis parameter lined up with W: [N, 1]); per tensor otherwise.
      Expr wd = transB ? dequantize_linear(wq, g.constant(TensorBase::fromVector<float>(Shape({N, 1}), ws)),
                                           g.constant(TensorBase::fromVector<int8_t>(Shape({N, 1}), wz)))
                       : dequantize_linear(wq, g.scalar(0.004, Type::float32), g.scalar(1, Type::int8));
      Expr xd = dequantize_linear(xq, g.scalar(0.02, Type::float32), g.scalar(120, Type::uint8));
      return affine(xd, wd, g.constant(TensorBase::fromVector<float>(Shape({N}), b)), false, transB);
    };
    std::map<std::string, int> ops;
    EXPECT_EQ(checkPass(build, fuseQdq, 1e-6, &ops), transB ? 1u : 0u);
    EXPECT_EQ(ops["matmul_integer_to_float"], transB ? 1 : 0);
    EXPECT_EQ(ops["affine"], transB ? 0 : 1);
  }
}

// quantize_dynamic's MatMul: x quantized with a scale computed at run time,
// MatMulInteger by constant int8 weights, Cast, Mul by a_scale * b_scale
// (per column when perColumn), Add of a bias [N] (when withBias).
Expr dynamicMatMul(ExpressionGraph& g, bool perColumn, bool withBias, bool scaleProduct = true) {
  Expr x = boundInput(g, {2, 7, 24}, [](float i) { return std::sin(0.37f * i) * 3.0f; });
  Expr aScale = (max(x) - min(x)) / 255.0;
  Expr xq = quantize_linear(x, aScale, g.scalar(128, Type::uint8));
  std::vector<int8_t> w(24 * 20);
  for(size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int((i * 53) % 255) - 127);
  Expr wq = g.constant(TensorBase::fromVector<int8_t>(Shape({24, 20}), w));
  Expr bzp = g.scalar(3, Type::int8);
  Expr prod = cast(matmul_integer(xq, wq, g.scalar(128, Type::uint8), bzp), Type::float32);
  Expr bScale = perColumn ? randomConst(g, {20}, 0.001, 0.01) : g.scalar(0.004, Type::float32);
  Expr y = prod * (scaleProduct ? aScale * bScale : bScale);
  return withBias ? randomConst(g, {20}) + y : y;
}

// MatMulInteger -> Cast -> Mul (-> Add): one matmul_integer_to_float, the
// same bits (the same float32 multiply and add).
TEST(Passes, FuseMatmulIntegerFloatTakesQuantizeDynamicsChain) {
  for(bool perColumn : {false, true})
    for(bool withBias : {false, true})
      for(bool product : {true, false}) {
        SCOPED_TRACE(str(perColumn ? "per column" : "per tensor", withBias ? ", bias" : "",
                         product ? ", a_scale * b_scale" : ", one factor"));
        std::map<std::string, int> ops;
        auto build = [=](ExpressionGraph& g) { return dynamicMatMul(g, perColumn, withBias, product); };
        EXPECT_EQ(checkPass(build, fuseMatmulIntegerFloat, 0.0, &ops), 1u);
        EXPECT_EQ(ops["matmul_integer_to_float"], 1);
        EXPECT_EQ(ops.count("matmul_integer"), 0u);
        EXPECT_EQ(ops.count("cast"), 0u);
        EXPECT_EQ(ops.count("add"), 0u);
        // what is left of the mul: the scale product, when not taken apart
        EXPECT_EQ(ops.count("mul"), 0u);
      }
}

// The product read elsewhere stays: nothing fused.
TEST(Passes, FuseMatmulIntegerFloatLeavesSharedProducts) {
  auto build = [](ExpressionGraph& g) {
    Expr y = dynamicMatMul(g, false, true);
    // y = bias + cast(mi) * s: read the cast again
    Node* mul = passes::otherInput(y.get(), y->child(0).get());
    Expr castNode = mul->child(0);
    return y + castNode;
  };
  std::map<std::string, int> ops;
  EXPECT_EQ(checkPass(build, fuseMatmulIntegerFloat, 0.0, &ops), 0u);
  EXPECT_EQ(ops["matmul_integer"], 1);
}

TEST(Passes, Int8LayoutKeepsInt8ChainsChannelsLast) {
  if(!host::dnnlEnabled()) GTEST_SKIP() << "ONYX_DNNL=0: the exact loops, which read plain tensors";
  for(int range : {60, 127}) {
    SCOPED_TRACE("weights within +-" + std::to_string(range));
    auto build = [range](ExpressionGraph& g) { return int8Chain(g, range); };
    std::map<std::string, int> ops;
    // The same kernels and (exact integer) sums in another memory order.
    EXPECT_EQ(checkPass(build, int8Layout, 0.0, &ops), 2u);  // h and h2; y is read by the kept dequantize
    Built b = make(build);
    int8Layout(*b.g, {b.y});
    int xLast = 0, yLast = 0;
    for(const Expr& e : b.g->nodes())
      if(e->kind() == NodeKind::Op && e->op()->name == "qlinear_conv") {
        xLast += int(e->attrs().i("x_nhwc"));
        yLast += int(e->attrs().i("y_nhwc"));
      }
    EXPECT_EQ(yLast, 2);  // h and h2
    EXPECT_EQ(xLast, 1);  // the last convolution's input (the requantized sum)
  }
}

// ---- fuse_channel_affine

// relu(channel_affine(concat(a, b), s, t)) becomes one channel_affine of the
// parts with relu: the same values bit for bit (the same multiply-add and
// relu per element), negative, zero and positive affine outputs included.
Expr concatAffineRelu(ExpressionGraph& g) {
  Expr a = boundInput(g, {2, 3, 4, 5}, [](float i) { return std::sin(0.37f * i) * 3.f; });
  Expr b = g.constant({2, 5, 4, 5}, inits::uniform(-2.f, 2.f));
  Expr s = randomConst(g, {8}, -1.5, 1.5), t = randomConst(g, {8}, -0.5, 0.5);
  return relu(channel_affine(concat({a, b}, 1), s, t));
}

TEST(Passes, FuseChannelAffineReadsTheConcatInPlaceAndTakesTheRelu) {
  std::map<std::string, int> after;
  EXPECT_EQ(checkPass(concatAffineRelu, fuseChannelAffine, 0.0, &after), 1u);
  EXPECT_EQ(after["concat"], 0);
  EXPECT_EQ(after["relu"], 0);
  EXPECT_EQ(after["channel_affine"], 1);
  // Some outputs were clamped and some were not: the relu is in the fused op.
  Built opt = make(concatAffineRelu);
  fuseChannelAffine(*opt.g, {opt.y});
  opt.g->forward();
  int zeros = 0, positive = 0;
  for(double v : values(opt.y)) {
    zeros += v == 0;
    positive += v > 0;
  }
  EXPECT_GT(zeros, 20);
  EXPECT_GT(positive, 20);
}

TEST(Passes, FuseChannelAffineNotWhenTheConcatOrTheAffineIsReadElsewhere) {
  // The concatenation is read by the add too: it stays; the relu still fuses.
  std::map<std::string, int> after;
  EXPECT_EQ(checkPass(
                [](ExpressionGraph& g) {
                  Expr c = concat({randomConst(g, {1, 2, 3, 3}), randomConst(g, {1, 3, 3, 3})}, 1);
                  return relu(channel_affine(c, randomConst(g, {5}), randomConst(g, {5}))) + c;
                },
                fuseChannelAffine, 0.0, &after),
            1u);
  EXPECT_EQ(after["concat"], 1);
  EXPECT_EQ(after["relu"], 0);
  // The affine is read by the add too: the relu stays; the concatenation is read in place.
  EXPECT_EQ(checkPass(
                [](ExpressionGraph& g) {
                  Expr c = concat({randomConst(g, {1, 2, 3, 3}), randomConst(g, {1, 3, 3, 3})}, 1);
                  Expr a = channel_affine(c, randomConst(g, {5}), randomConst(g, {5}));
                  return relu(a) + a;
                },
                fuseChannelAffine, 0.0, &after),
            1u);
  EXPECT_EQ(after["concat"], 0);
  EXPECT_EQ(after["relu"], 1);
  // A concatenation along another axis is no channel concatenation.
  EXPECT_EQ(checkPass(
                [](ExpressionGraph& g) {
                  Expr c = concat({randomConst(g, {1, 4, 2, 3}), randomConst(g, {1, 4, 1, 3})}, 2);
                  return channel_affine(c, randomConst(g, {4}), randomConst(g, {4}));
                },
                fuseChannelAffine, 0.0, &after),
            0u);
  EXPECT_EQ(after["concat"], 1);
}

// ---- blocked_layout

// conv+relu -> depthwise conv+relu -> 1x1 conv + residual -> 1x1 conv (out).
Expr convChain(ExpressionGraph& g) {
  Expr x = boundInput(g, {1, 8, 10, 10}, [](float i) { return std::sin(0.1f * i); });
  ConvOptions pad1;
  pad1.pads = {1, 1, 1, 1};
  ConvOptions dw = pad1;
  dw.group = 16;
  Expr h1 = relu(conv(x, randomConst(g, {16, 8, 3, 3}), randomConst(g, {16}), pad1));
  Expr h2 = relu(conv(h1, randomConst(g, {16, 1, 3, 3}), randomConst(g, {16}), dw));
  Expr h3 = conv(h2, randomConst(g, {16, 16, 1, 1}), randomConst(g, {16})) + h1;
  return conv(h3, randomConst(g, {8, 16, 1, 1}), randomConst(g, {8}));
}

// ---- fuse_squeeze_excite

// EfficientNet's block with N samples: expand 1x1 conv + swish, depthwise
// 3x3 conv + swish, squeeze (spatial mean, 1x1 conv + swish, 1x1 conv +
// sigmoid), excitation (mul), 1x1 projection + residual.
Expr seBlock(ExpressionGraph& g, int64_t N) {
  Expr x = boundInput(g, {N, 16, 9, 11}, [](float i) { return std::sin(0.07f * i); });
  ConvOptions dw;
  dw.pads = {1, 1, 1, 1};
  dw.group = 32;
  Expr e = swish(conv(x, randomConst(g, {32, 16, 1, 1}), randomConst(g, {32})));
  Expr d = swish(conv(e, randomConst(g, {32, 1, 3, 3}), randomConst(g, {32}), dw));
  Expr m = mean(d, {2, 3}, true);
  Expr f1 = swish(conv(m, randomConst(g, {8, 32, 1, 1}), randomConst(g, {8})));
  Expr f2 = sigmoid(conv(f1, randomConst(g, {32, 8, 1, 1}), randomConst(g, {32})));
  Expr p = conv(d * f2, randomConst(g, {16, 32, 1, 1}), randomConst(g, {16})) + x;
  return conv(p, randomConst(g, {16, 16, 1, 1}), randomConst(g, {16}));
}

// The squeeze reads the depthwise output with x_mean, the projection with
// x_scale; then every reader of it is a convolution, so blocked_layout lays
// it out for oneDNN; the values are the graph's as built (within float
// rounding: the mean sums in another order).
TEST(Passes, FuseSqueezeExciteMovesTheBlockIntoItsConvolutions) {
  for(int64_t N : {1, 2}) {
    SCOPED_TRACE("batch " + std::to_string(N));
    auto build = [N](ExpressionGraph& g) { return seBlock(g, N); };
    Built ref = make(build), opt = make(build);
    optimizeGraph(*ref.g, {ref.y}, OptLevel::none);
    PassCounts fired = optimizeGraph(*opt.g, {opt.y}, OptLevel::all);
    EXPECT_EQ(firedCount(fired, "fuse_squeeze_excite"), 2u);  // the mean and the mul
    std::map<std::string, int> ops = opCounts(*opt.g);
    EXPECT_EQ(ops.count("mean"), 0u);
    EXPECT_EQ(ops.count("mul"), 0u);
    int withMean = 0, withScale = 0, laidOut = 0;
    for(const Expr& n : opt.g->nodes()) {
      if(n->kind() != NodeKind::Op || n->op()->name != "fused_conv") continue;
      withMean += int(n->attrs().i("x_mean"));
      withScale += int(n->attrs().i("x_scale"));
      if(n->attrs().i("x_mean") || n->attrs().i("x_scale")) laidOut += n->attrs().i("x_block") != 0;
    }
    EXPECT_EQ(withMean, 1);
    EXPECT_EQ(withScale, 1);
    // the depthwise output, read only by convolutions now, is not plain
    if(host::dnnlChannelBlock() != 0) {
      EXPECT_EQ(laidOut, 2);
    }
    ref.g->forward();
    opt.g->forward();
    std::vector<double> a = values(ref.y), b = values(opt.y);
    ASSERT_EQ(a.size(), b.size());
    double scale = 1;
    for(double v : a) scale = std::max(scale, std::fabs(v));
    for(size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-5 * scale) << "element " << i;
  }
}

// A mean or mul with another reader, or over other axes, stays.
TEST(Passes, FuseSqueezeExciteLeavesOtherMeansAndMuls) {
  auto build = [](ExpressionGraph& g) {
    Expr x = boundInput(g, {1, 8, 5, 5}, [](float i) { return std::cos(0.1f * i); });
    Expr m = mean(x, {1, 2}, true);  // not the spatial axes
    Expr s = sigmoid(conv(mean(x, {2, 3}, true), randomConst(g, {8, 8, 1, 1})));
    Expr z = x * s;
    return conv(z, randomConst(g, {4, 8, 1, 1})) + sum(m) + sum(z);  // z read twice
  };
  std::map<std::string, int> ops;
  EXPECT_EQ(checkPass(build, fuseSqueezeExcite, 2e-5, &ops), 1u);  // only the squeeze's mean
  EXPECT_EQ(ops["mean"], 1);
  EXPECT_EQ(ops["mul"], 1);
}

TEST(Passes, BlockedLayoutKeepsConvChainsBlocked) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  const int64_t b = host::dnnlChannelBlock();
  Built ref = make(convChain), opt = make(convChain);
  optimizeGraph(*ref.g, {ref.y}, OptLevel::none);
  PassCounts fired = optimizeGraph(*opt.g, {opt.y}, OptLevel::all);
  EXPECT_EQ(firedCount(fired, "blocked_layout"), 3u);  // h1, h2, h3: the output y is kept plain
  int fused = 0, xBlocked = 0, yBlocked = 0, resBlocked = 0;
  for(const Expr& e : opt.g->nodes()) {
    if(e->kind() != NodeKind::Op) continue;
    EXPECT_EQ(e->op()->name, "fused_conv");
    ++fused;
    xBlocked += e->attrs().i("x_block") == b;
    yBlocked += e->attrs().i("y_block") == b;
    resBlocked += e->attrs().i("residual_block") == b;
  }
  EXPECT_EQ(fused, 4);
  EXPECT_EQ(xBlocked, 3);
  EXPECT_EQ(yBlocked, 3);
  EXPECT_EQ(resBlocked, 1);
  ref.g->forward();
  opt.g->forward();
  std::vector<double> want = values(ref.y), got = values(opt.y);
  ASSERT_EQ(want.size(), got.size());
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
  // With oneDNN switched off the same graph runs the portable kernels on
  // plain copies of the blocked tensors.
  host::setDnnlEnabled(false);
  opt.g->forward();
  host::setDnnlEnabled(true);
  std::vector<double> portable = values(opt.y);
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], portable[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

// conv -> max pool -> squeeze 1x1 conv -> two expand convs -> concat ->
// max pool -> 1x1 conv (out): SqueezeNet's fire module between its pools,
// with N = 2 (a blocked concatenation joins per sample).
Expr fireChain(ExpressionGraph& g) {
  Expr x = boundInput(g, {2, 8, 13, 13}, [](float i) { return std::sin(0.1f * i); });
  ConvOptions pad1;
  pad1.pads = {1, 1, 1, 1};
  PoolOptions pool;
  pool.strides = {2, 2};
  pool.ceilMode = true;
  PoolOptions padded;
  padded.pads = {1, 0, 1, 1};
  padded.dilations = {1, 2};
  Expr h = relu(conv(x, randomConst(g, {16, 8, 3, 3}), randomConst(g, {16}), pad1));
  Expr p = max_pool(h, {3, 3}, pool);
  Expr s = relu(conv(p, randomConst(g, {8, 16, 1, 1}), randomConst(g, {8})));
  Expr e1 = relu(conv(s, randomConst(g, {16, 8, 1, 1}), randomConst(g, {16})));
  Expr e3 = relu(conv(s, randomConst(g, {16, 8, 3, 3}), randomConst(g, {16}), pad1));
  Expr c = concat({e1, e3}, 1);
  return conv(max_pool(c, {2, 2}, padded), randomConst(g, {8, 32, 1, 1}), randomConst(g, {8}));
}

TEST(Passes, BlockedLayoutKeepsPoolsAndConcatsBetweenConvsBlocked) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  const int64_t b = host::dnnlChannelBlock();
  Built ref = make(fireChain), opt = make(fireChain);
  optimizeGraph(*ref.g, {ref.y}, OptLevel::none);
  PassCounts fired = optimizeGraph(*opt.g, {opt.y}, OptLevel::all);
  // h, both pools, s, e1, e3 and the concatenation: only y is plain
  EXPECT_EQ(firedCount(fired, "blocked_layout"), 7u);
  int pools = 0, concats = 0;
  for(const Expr& e : opt.g->nodes()) {
    if(e->kind() != NodeKind::Op) continue;
    if(e->op()->name == "max_pool") pools += e->attrs().i("block") == b;
    if(e->op()->name == "concat") concats += e->attrs().i("block") == b;
  }
  EXPECT_EQ(pools, 2);
  EXPECT_EQ(concats, 1);
  ref.g->forward();
  opt.g->forward();
  std::vector<double> want = values(ref.y), got = values(opt.y);
  ASSERT_EQ(want.size(), got.size());
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
  host::setDnnlEnabled(false);
  opt.g->forward();
  host::setDnnlEnabled(true);
  std::vector<double> portable = values(opt.y);
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], portable[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

// DenseNet's pattern: each layer's batch norm (channel_affine) and relu
// read the concatenation of the earlier outputs, a transition (batch norm,
// relu, 1x1 conv, average pool) ends the block; all of it stays blocked.
Expr denseChain(ExpressionGraph& g) {
  Expr x = boundInput(g, {2, 8, 10, 10}, [](float i) { return std::cos(0.05f * i); });
  ConvOptions pad1;
  pad1.pads = {1, 1, 1, 1};
  auto bnRelu = [&g](Expr v) {
    const int64_t C = v->shape()[1];
    return relu(channel_affine(v, randomConst(g, {C}, 0.5, 1.5), randomConst(g, {C}, -0.5, 0.5)));
  };
  Expr h0 = conv(x, randomConst(g, {16, 8, 3, 3}), randomConst(g, {16}), pad1);
  Expr c1 = conv(bnRelu(h0), randomConst(g, {16, 16, 3, 3}), randomConst(g, {16}), pad1);
  Expr c2 = conv(bnRelu(concat({h0, c1}, 1)), randomConst(g, {16, 32, 3, 3}), randomConst(g, {16}), pad1);
  Expr t = conv(bnRelu(concat({h0, c1, c2}, 1)), randomConst(g, {32, 48, 1, 1}));
  PoolOptions o;
  o.strides = {2, 2};
  o.pads = {0, 0, 1, 1};  // the last row's and column's windows reach the padding: 6 or 4 taps in x
  return conv(average_pool(t, {3, 3}, o), randomConst(g, {8, 32, 1, 1}), randomConst(g, {8}));
}

TEST(Passes, BlockedLayoutKeepsDenseBlocksBlocked) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  const int64_t b = host::dnnlChannelBlock();
  Built ref = make(denseChain), opt = make(denseChain);
  optimizeGraph(*ref.g, {ref.y}, OptLevel::none);
  PassCounts fired = optimizeGraph(*opt.g, {opt.y}, OptLevel::all);
  // fuse_channel_affine: each batch norm takes its relu and its concatenation
  EXPECT_EQ(firedCount(fired, "fuse_channel_affine"), 3u);
  // h0, c1, c2, t, the pool and the 3 fused batch norms
  EXPECT_EQ(firedCount(fired, "blocked_layout"), 8u);
  std::map<std::string, int> withBlock, ops = opCounts(*opt.g);
  for(const Expr& e : opt.g->nodes())
    if(e->kind() == NodeKind::Op && e->op()->name != "fused_conv")
      withBlock[e->op()->name] += e->attrs().i("block") == b;
  EXPECT_EQ(withBlock["channel_affine"], 3);
  EXPECT_EQ(withBlock["average_pool"], 1);
  EXPECT_EQ(ops["concat"], 0);
  EXPECT_EQ(ops["relu"], 0);
  // The same graph without the fusion keeps the concatenations and relus blocked.
  Built unfused = make(denseChain);
  fired = optimizeGraph(*unfused.g, {unfused.y}, OptLevel::all, true, {"fuse_channel_affine"});
  EXPECT_EQ(firedCount(fired, "blocked_layout"), 13u);  // + 2 concatenations and 3 relus
  ref.g->forward();
  opt.g->forward();
  std::vector<double> want = values(ref.y), got = values(opt.y);
  ASSERT_EQ(want.size(), got.size());
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
  host::setDnnlEnabled(false);
  opt.g->forward();
  host::setDnnlEnabled(true);
  std::vector<double> portable = values(opt.y);
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], portable[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

// The blocked max pool keeps max_pool's answer where it is not a plain
// maximum: a NaN anywhere in a window wins, -inf stays. x goes
// through depthwise convolutions of weight 1 (each channel x * 1 + 0,
// exact, a NaN kept in its channel) before and after the pool.
TEST(Passes, BlockedMaxPoolKeepsNaNAndSignedValues) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  const int64_t C = 2 * host::dnnlChannelBlock();
  auto build = [C](ExpressionGraph& g) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    Expr x = boundInput(g, {1, C, 7, 7}, [nan, inf](float i) {
      const int k = int(i) % 11;
      return k == 3 ? nan : k == 5 ? -inf : k == 7 ? -0.0f : k == 8 ? 0.0f : std::cos(0.3f * i);
    });
    ConvOptions dw;
    dw.group = C;
    PoolOptions o;
    o.pads = {1, 1, 1, 1};
    Expr h = conv(x, g.constant({C, 1, 1, 1}, inits::ones()), g.constant({C}, inits::zeros()), dw);
    return conv(max_pool(h, {3, 3}, o), g.constant({C, 1, 1, 1}, inits::ones()), g.constant({C}, inits::zeros()), dw);
  };
  Built ref = make(build), opt = make(build);
  optimizeGraph(*ref.g, {ref.y}, OptLevel::none);
  optimizeGraph(*opt.g, {opt.y}, OptLevel::all);
  int pools = 0;
  for(const Expr& e : opt.g->nodes())
    if(e->kind() == NodeKind::Op && e->op()->name == "max_pool") pools += e->attrs().i("block") != 0;
  EXPECT_EQ(pools, 1);
  ref.g->forward();
  opt.g->forward();
  std::vector<double> want = values(ref.y), got = values(opt.y);
  ASSERT_EQ(want.size(), got.size());
  int nans = 0;
  for(size_t i = 0; i < want.size(); ++i) {
    nans += std::isnan(want[i]);
    EXPECT_EQ(std::isnan(want[i]), std::isnan(got[i])) << i;
    if(!std::isnan(want[i])) {
      EXPECT_EQ(want[i], got[i]) << i;
    }
  }
  EXPECT_GT(nans, 0);
  EXPECT_LT(size_t(nans), want.size());
}

// A pool or concatenation that reads something not blocked (here x itself,
// and a concatenation along H) stays plain, and so does what it reads.
TEST(Passes, BlockedLayoutNotForPoolsAndConcatsOfPlainValues) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  const int64_t C = host::dnnlChannelBlock();
  Built b = make([C](ExpressionGraph& g) {
    Expr x = boundInput(g, {1, C, 6, 6}, [](float i) { return std::sin(0.2f * i); });
    Expr h = conv(x, randomConst(g, {C, C, 1, 1}));
    PoolOptions same;
    same.pads = {1, 1, 1, 1};
    Expr joined = concat({h, max_pool(x, {3, 3}, same)}, 1);  // the pool reads x
    Expr rows = concat({h, conv(x, randomConst(g, {C, C, 1, 1}))}, 2);  // along H
    // two inputs of C / 2 channels: a block would straddle them
    Expr odd = concat({conv(x, randomConst(g, {C / 2, C, 1, 1})), conv(x, randomConst(g, {C / 2, C, 1, 1}))}, 1);
    return conv(joined, randomConst(g, {C, 2 * C, 1, 1})) + sum(rows) + sum(conv(odd, randomConst(g, {C, C, 1, 1})));
  });
  EXPECT_EQ(blockConvChains(*b.g, {b.y}), 0u);
}

TEST(Passes, BlockedLayoutNotWhenAnotherOpReadsTheValue) {
  if(host::dnnlChannelBlock() == 0) GTEST_SKIP() << "oneDNN has no blocked direct convolutions on this CPU";
  Built b = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {1, 16, 6, 6});
    x = x + g.input("z", {1, 16, 6, 6});  // not constant: nothing folds
    Expr h = conv(x, randomConst(g, {16, 16, 1, 1}));
    return conv(h, randomConst(g, {16, 16, 1, 1})) + sigmoid(h);  // sigmoid reads h plain
  });
  b.g->get("z")->bind(TensorBase::fromVector<float>(Shape({1, 16, 6, 6}), std::vector<float>(576, 0.5f)));
  EXPECT_EQ(blockConvChains(*b.g, {b.y}), 0u);
}

// ---- the manager and prune

TEST(Passes, OptimizeGraphRunsTheLevelsPasses) {
  auto build = [](ExpressionGraph& g) {
    Expr x = geluInput(g);
    Expr w = transpose(randomConst(g, {5, 8}), {1, 0});
    Expr h = matmul(x, w) + randomConst(g, {5});
    return (h * (1.0 + erf(h / std::sqrt(2.0)))) * 0.5;
  };
  Built basic = make(build), all = make(build), none = make(build), train = make(build, false);
  PassCounts b = optimizeGraph(*basic.g, {basic.y}, OptLevel::basic);
  PassCounts a = optimizeGraph(*all.g, {all.y}, OptLevel::all);
  PassCounts n = optimizeGraph(*none.g, {none.y}, OptLevel::none);
  PassCounts t = optimizeGraph(*train.g, {train.y}, OptLevel::all);
  auto names = [](const PassCounts& p) {
    std::string s;
    for(auto& kv : p) s += kv.first + " ";
    return s;
  };
  EXPECT_TRUE(n.empty());
  EXPECT_EQ(names(b), "fold_constants prune ");
  EXPECT_EQ(names(a), "fold_constants fuse_gelu fuse_matmul_add prune ");
  EXPECT_EQ(names(t), "fold_constants prune ");  // no fusion in a training graph
  auto ops = opCounts(*all.g);
  EXPECT_EQ(ops["affine"], 1);
  EXPECT_EQ(ops["gelu"], 1);
  EXPECT_EQ(ops.size(), 2u);
  none.g->forward();
  all.g->forward();
  std::vector<double> want = values(none.y), got = values(all.y);
  for(size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-5 * (1 + std::fabs(want[i])));
}

TEST(Passes, DisabledPassesDoNotRunAndUnknownOnesAreNamed) {
  auto build = [](ExpressionGraph& g) {
    Expr x = geluInput(g);
    Expr h = matmul(x, randomConst(g, {8, 5})) + randomConst(g, {5});
    return (h * (1.0 + erf(h / std::sqrt(2.0)))) * 0.5;
  };
  Built b = make(build);
  PassCounts fired = optimizeGraph(*b.g, {b.y}, OptLevel::all, true, {"fuse_gelu"});
  auto ops = opCounts(*b.g);
  EXPECT_EQ(ops["affine"], 1);
  EXPECT_EQ(ops.count("gelu"), 0u);
  EXPECT_EQ(ops["erf"], 1);
  for(auto& kv : fired) EXPECT_NE(kv.first, "fuse_gelu");
  Built c = make(build);
  try {
    optimizeGraph(*c.g, {c.y}, OptLevel::all, true, {"fuse_everything"});
    FAIL() << "no error";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no graph pass 'fuse_everything' (passes: fuse_qdq, fold_constants"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(passNames().size(), 15u);
}

TEST(Passes, PruneDropsWhatNoOutputNeeds) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = randomConst(g, {3});
    Expr dead = exp(x) * 2.0;
    (void)dead;
    return sin(x);
  });
  size_t before = b.g->nodes().size();
  size_t dropped = b.g->prune({b.y});
  EXPECT_EQ(dropped, 3u);  // exp, mul and the scalar 2
  EXPECT_EQ(b.g->nodes().size(), before - 3);
  b.g->forward();
  EXPECT_EQ(opCounts(*b.g).count("exp"), 0u);
}

// ---- profiler

TEST(Profiler, RecordsEveryNodeOfEveryRunAndWritesATrace) {
  Built b = make([](ExpressionGraph& g) {
    Expr x = geluInput(g);
    return tanh(matmul(x, randomConst(g, {8, 8}))) + sin(x);
  });
  auto prof = std::make_shared<Profiler>();
  b.g->setProfiler(prof);
  b.g->forward();
  b.g->forward();
  EXPECT_EQ(prof->runs(), 2u);
  auto ops = prof->byOpType();
  std::map<std::string, size_t> calls;
  for(auto& s : ops) calls[s.op] = s.calls;
  EXPECT_EQ(calls["matmul"], 2u);
  EXPECT_EQ(calls["tanh"], 2u);
  EXPECT_EQ(calls["sin"], 2u);
  EXPECT_EQ(calls["add"], 2u);
  EXPECT_EQ(calls.size(), 4u);  // leaves are not timed
  auto top = prof->topNodes(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_GE(top[0].totalMs, top[1].totalMs);
  std::string report = prof->report(3);
  EXPECT_NE(report.find("2 run(s)"), std::string::npos) << report;
  EXPECT_NE(report.find("matmul"), std::string::npos) << report;
  EXPECT_NE(report.find("4x8 float32, 8x8 float32 -> 4x8 float32"), std::string::npos) << report;

  std::string path = (std::filesystem::temp_directory_path() / ("onyx_trace_" + std::to_string(::getpid()) + ".json")).string();
  prof->writeChromeTrace(path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string json = ss.str();
  std::remove(path.c_str());
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u) << json.substr(0, 80);
  size_t events = 0;
  for(size_t p = json.find("\"ph\":\"X\""); p != std::string::npos; p = json.find("\"ph\":\"X\"", p + 1)) ++events;
  EXPECT_EQ(events, 8u);  // 4 op nodes x 2 runs
  EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");

  prof->reset();
  EXPECT_EQ(prof->runs(), 0u);
  EXPECT_TRUE(prof->byOpType().empty());
  b.g->setProfiler(nullptr);
  b.g->forward();
  EXPECT_EQ(prof->runs(), 0u);
}

}  // namespace
}  // namespace onyx
