// Fast paths checked against the general code they stand beside, on what the
// per-op harness does not vary: GEMM with one row or column (oneDNN's sgemm,
// or BLAS GEMV), float pools (row-wise loops) against the integer pools (the
// per-output loops) over many geometries, and NaN in a max pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/few_rows_gemm.h>
#include <onyx/backend/cpu/gemm.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/strided.h>
#include <onyx/onyx.h>

namespace onyx {
namespace {

// C = op(A) op(B) over doubles, for the GEMV forms of host::gemm.
// Float32 products go to oneDNN's sgemm, and to OpenBLAS's GEMV/GEMM with
// ONYX_DNNL=0: both paths, strided operands, beta 0 over NaN.
TEST(FastPaths, GemmWithOneRowOrColumnIsGemv) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const bool wasOn = host::dnnlEnabled();
  for(bool dnnl : {true, false})
  for(int shape = 0; shape < 4; ++shape)
    for(int ta = 0; ta < 2; ++ta)
      for(int tb = 0; tb < 2; ++tb) {
        // [1 x 7], [5 x 1], [1 x 1], and a full [5 x 7] product.
        const int64_t M = shape == 1 || shape == 3 ? 5 : 1, N = shape == 0 || shape == 3 ? 7 : 1, K = 9;
        host::setDnnlEnabled(dnnl);
        // Leading dims larger than the matrices: strided rows and columns.
        const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 3, ldc = N + 1;
        std::vector<float> A(size_t((ta ? K : M) * lda)), B(size_t((tb ? N : K) * ldb));
        for(auto& v : A) v = u(rng);
        for(auto& v : B) v = u(rng);
        for(double beta : {0.0, 0.5}) {
          std::vector<float> C(size_t(M * ldc), beta == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f);
          host::gemm<float>(ta, tb, M, N, K, 2.0, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
          for(int64_t i = 0; i < M; ++i)
            for(int64_t j = 0; j < N; ++j) {
              double want = beta == 0 ? 0 : beta;
              for(int64_t k = 0; k < K; ++k)
                want += 2.0 * A[size_t(ta ? k * lda + i : i * lda + k)] * B[size_t(tb ? j * ldb + k : k * ldb + j)];
              EXPECT_NEAR(C[size_t(i * ldc + j)], want, 1e-5)
                  << "M " << M << " N " << N << " transA " << ta << " transB " << tb << " beta " << beta
                  << " oneDNN " << dnnl;
            }
        }
      }
  host::setDnnlEnabled(wasOn);
}

// The packed few-rows product against float64 sums: every row count it
// takes (full blocks of 4 rows and the 1-3 row tails, whose kernels unroll
// k), a partial last panel, K not a multiple of the unroll, both packings,
// strided A and C, and accumulate over C's old values (0 overwrites NaN).
TEST(FastPaths, FewRowsGemmMatchesTheSums) {
  if(!host::fewRowsGemmRuns()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: fewRowsGemm does not run";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for(int64_t M = 1; M <= 16; ++M)
    for(int64_t K : {1, 7, 64})
      for(int64_t N : {5, 24, 53})
        for(bool transB : {false, true})
          for(bool accumulate : {false, true}) {
            const int64_t lda = K + 3, ldb = (transB ? K : N) + 2, ldc = N + 5;
            std::vector<float> A(size_t(M * lda)), B(size_t((transB ? N : K) * ldb));
            for(auto& v : A) v = u(rng);
            for(auto& v : B) v = u(rng);
            std::vector<float> C(size_t(M * ldc));
            for(auto& v : C) v = accumulate ? u(rng) : std::numeric_limits<float>::quiet_NaN();
            const std::vector<float> old = C;
            host::FewRowsPacked p = host::fewRowsPack(B.data(), ldb, transB, K, N);
            host::fewRowsGemm(M, A.data(), lda, p, accumulate, C.data(), ldc);
            for(int64_t i = 0; i < M; ++i)
              for(int64_t j = 0; j < ldc; ++j) {
                const size_t at = size_t(i * ldc + j);
                if(j >= N) {  // C's padding is not written
                  EXPECT_TRUE(std::isnan(C[at]) == std::isnan(old[at]) && (std::isnan(C[at]) || C[at] == old[at]));
                  continue;
                }
                double want = accumulate ? old[at] : 0.0;
                for(int64_t k = 0; k < K; ++k)
                  want += double(A[size_t(i * lda + k)]) * B[size_t(transB ? j * ldb + k : k * ldb + j)];
                EXPECT_NEAR(C[at], want, 1e-5 * double(K + 1))
                    << "M " << M << " K " << K << " N " << N << " transB " << transB << " accumulate " << accumulate;
              }
          }
}

// Products by a constant weight of 2 to 64 rows in all (batched x
// included) run the packed few-rows kernel where it is taken: matmul (W and
// W^T) and affine (onto the bias) against float64 sums, each run twice (the
// second on the kept packing); one packing per weight in the process.
TEST(FastPaths, ConstantWeightProductsOfFewRows) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  auto rand = [&](const Shape& s) {
    Tensor t = TensorBase::create(s, Type::float32);
    std::vector<float> v(size_t(s.elements()));
    for(auto& e : v) e = u(rng);
    t->set(v);
    return t;
  };
  const int64_t K = 37, N = 29;
  for(bool transB : {false, true})
    for(bool withBias : {false, true})
      for(const Shape& xs : {Shape({2, K}), Shape({13, K}), Shape({3, 5, K}), Shape({64, K}), Shape({65, K})}) {
        Tensor x = rand(xs), w = rand(transB ? Shape({N, K}) : Shape({K, N})), b = rand(Shape({N}));
        const std::vector<float> xv = x->toVector<float>(), wv = w->toVector<float>(), bv = b->toVector<float>();
        auto g = New<ExpressionGraph>();
        g->setInference(true);
        Expr W = g->constant(w);
        Expr y = withBias ? affine(g->constant(x), W, g->constant(b), false, transB)
                          : dot(g->constant(x), W, false, transB);
        y->keepValue();
        const int64_t rows = xs.elements() / K;
        for(int run = 0; run < 2; ++run) {
          g->forward();
          const std::vector<float> got = y->val()->toVector<float>();
          ASSERT_EQ(int64_t(got.size()), rows * N);
          for(int64_t r = 0; r < rows; ++r)
            for(int64_t n = 0; n < N; ++n) {
              double want = withBias ? bv[size_t(n)] : 0.0;
              for(int64_t k = 0; k < K; ++k)
                want += double(xv[size_t(r * K + k)]) * wv[size_t(transB ? n * K + k : k * N + n)];
              ASSERT_NEAR(got[size_t(r * N + n)], want, 1e-5)
                  << "x " << xs << " transB " << transB << " bias " << withBias << " run " << run;
            }
        }
      }
  if(host::fewRowsGemmRuns()) {
    std::vector<float> w(size_t(K * N), 1.f), w2(w);
    auto a = host::fewRowsPackShared(w.data(), N, false, K, N), b = host::fewRowsPackShared(w.data(), N, false, K, N);
    EXPECT_EQ(a.get(), b.get());
    EXPECT_NE(a.get(), host::fewRowsPackShared(w2.data(), N, false, K, N).get());
    EXPECT_NE(a.get(), host::fewRowsPackShared(w.data(), K, true, N, K).get());
  }
}

// Float32 image resizes take resizeLast2 (columns first where most input
// columns are read, two taps per column where linear allows): the same
// double operations as the axis-at-a-time passes that float64 data takes,
// so every output is bit-identical to the float64 resize rounded to float.
TEST(FastPaths, ImageResizeMatchesTheFloat64Passes) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-3, 3);
  struct Case {
    std::string mode, ctm;
    Shape out;
  };
  const Shape in({2, 3, 7, 9});
  const std::vector<Case> cases = {
      {"linear", "half_pixel", Shape({2, 3, 14, 18})},   {"linear", "pytorch_half_pixel", Shape({2, 3, 13, 4})},
      {"linear", "align_corners", Shape({2, 3, 15, 20})}, {"linear", "asymmetric", Shape({2, 3, 7, 30})},
      {"cubic", "half_pixel", Shape({2, 3, 11, 17})},     {"cubic", "align_corners", Shape({2, 3, 5, 6})},
      {"nearest", "half_pixel", Shape({2, 3, 16, 20})},   {"linear", "half_pixel", Shape({2, 3, 3, 2})}};
  for(const Case& k : cases) {
    Tensor x = TensorBase::create(in, Type::float32);
    std::vector<float> v(size_t(in.elements()));
    for(auto& e : v) e = u(rng);
    v[5] = -0.f;
    x->set(v);
    ResizeOptions o;
    o.mode = k.mode;
    o.coordinateTransformationMode = k.ctm;
    auto g = New<ExpressionGraph>();
    g->setInference(true);
    Expr xc = g->constant(x);
    Expr fast = resize(xc, k.out, o, {}), ref = cast(resize(cast(xc, Type::float64), k.out, o, {}), Type::float32);
    fast->keepValue();
    ref->keepValue();
    g->forward();
    const std::vector<float> a = fast->val()->toVector<float>(), b = ref->val()->toVector<float>();
    ASSERT_EQ(a.size(), b.size());
    for(size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
          << k.mode << " " << k.ctm << " to " << k.out << " at " << i << ": " << a[i] << " vs " << b[i];
  }
}

// A channel concatenation at batch 1 copies one long dense run per input,
// split into pieces over the threads: every element lands where the plain
// row copy puts it (odd lengths, so the last piece is short), and nothing
// outside the destination's rows is written.
TEST(FastPaths, LongDenseRunsSplitOverThreads) {
  const int before = host::numThreads();
  for(int threads : {1, 2, 3}) {
    host::setNumThreads(threads);
    for(int64_t rows : {1, 2})
      for(int64_t inner : {int64_t(40000), int64_t(100003)}) {
        // src [rows, inner] into the middle columns of dst [rows, inner + 7].
        const int64_t dims[2] = {rows, inner}, ss[2] = {inner, 1}, ds[2] = {inner + 7, 1};
        std::vector<float> src(size_t(rows * inner)), dst(size_t(rows * (inner + 7)), -1.f);
        for(size_t i = 0; i < src.size(); ++i) src[i] = float(i);
        host::copyStrided(dst.data() + 3, ds, src.data(), ss, dims, 2, sizeof(float));
        for(int64_t r = 0; r < rows; ++r)
          for(int64_t j = 0; j < inner + 7; ++j) {
            const float want = j >= 3 && j < inner + 3 ? float(r * inner + j - 3) : -1.f;
            ASSERT_EQ(dst[size_t(r * (inner + 7) + j)], want)
                << "threads " << threads << " rows " << rows << " inner " << inner << " row " << r << " column " << j;
          }
      }
  }
  host::setNumThreads(before);
}

// f(x) with x's values as a constant of type t, the result as doubles.
std::vector<double> runOn(const Tensor& x, Type t, const std::function<Expr(Expr)>& f) {
  auto g = New<ExpressionGraph>();
  g->setInference(true);
  Tensor xt = TensorBase::create(x->shape(), t);
  xt->set(x->toVector<double>());
  Expr y = f(g->constant(xt));
  y->keepValue();
  g->forward();
  return y->val()->toVector<double>();
}

// Integer-valued inputs, so the int64 pools (the per-output loops) are an
// exact oracle for the float, double, int8 and uint8 ones (the row-wise
// loops).
TEST(FastPaths, FloatPoolsMatchThePerOutputLoops) {
  std::mt19937 rng(7);
  struct Geo {
    std::vector<int64_t> x, k;
    PoolOptions o;
  };
  std::vector<Geo> geos;
  for(int64_t width : {6, 7})  // even and odd rows (stride 2 splits them into even and odd entries)
  for(int64_t k : {1, 2, 3})
    for(int64_t s : {1, 2})
      for(int64_t p : {0, 1})
        for(int64_t d : {1, 2})
          for(bool ceil : {false, true}) {
            if(p >= (k - 1) * d + 1) continue;
            Geo g;
            g.x = {2, 3, 7, width};
            g.k = {k, k + 1 > 3 ? 3 : k + 1};
            g.o.strides.assign(2, s);
            g.o.pads.assign(4, p);
            g.o.pads[1] = 0;
            g.o.dilations.assign(2, 1);
            g.o.dilations[0] = d;
            g.o.ceilMode = ceil;
            geos.push_back(g);
          }
  Geo g3;
  g3.x = {1, 2, 4, 5, 6};
  g3.k = {2, 2, 3};
  g3.o.strides.assign(3, 2);
  g3.o.strides[0] = 1;
  g3.o.pads.assign(6, 1);
  g3.o.pads[1] = g3.o.pads[3] = 0;
  geos.push_back(g3);
  for(const Geo& geo : geos) {
    Tensor x = TensorBase::create(Shape(geo.x), Type::float64);
    std::uniform_int_distribution<int> u(-50, 50);
    for(int64_t i = 0; i < x->size(); ++i) x->data<double>()[i] = u(rng);
    auto maxp = [&](Expr e) { return max_pool(e, geo.k, geo.o); };
    std::vector<double> want = runOn(x, Type::int64, maxp);
    for(Type t : {Type::float32, Type::float64, Type::int8}) {
      std::vector<double> got = runOn(x, t, maxp);
      ASSERT_EQ(got.size(), want.size());
      for(size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << t << " " << i;
    }
    // uint8 (quantized models' pools) on values shifted past 127, so that a
    // signed comparison would pick other maxima.
    Tensor xu = TensorBase::create(x->shape(), Type::float64);
    for(int64_t i = 0; i < x->size(); ++i) xu->data<double>()[i] = x->data<double>()[i] + 100;
    std::vector<double> wantU = runOn(xu, Type::int64, maxp), gotU = runOn(xu, Type::uint8, maxp);
    ASSERT_EQ(gotU.size(), wantU.size());
    for(size_t i = 0; i < gotU.size(); ++i) ASSERT_EQ(gotU[i], wantU[i]) << "uint8 " << i;
    // Averages: float16 keeps the per-output loops; a window or divisor
    // wrong by one tap moves an average of integers by more than 1/12,
    // float16's rounding of values up to 50 by less than 0.02.
    for(bool include : {false, true}) {
      PoolOptions o = geo.o;
      o.countIncludePad = include;
      auto avgp = [&](Expr e) { return average_pool(e, geo.k, o); };
      std::vector<double> ref = runOn(x, Type::float16, avgp);
      for(Type t : {Type::float32, Type::float64}) {
        std::vector<double> got = runOn(x, t, avgp);
        ASSERT_EQ(got.size(), ref.size());
        for(size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 0.03) << i;
      }
    }
  }
}

TEST(FastPaths, MaxPoolPropagatesNaN) {
  Tensor x = TensorBase::create(Shape({1, 1, 2, 4}), Type::float32);
  float v[] = {1, std::numeric_limits<float>::quiet_NaN(), 3, 4, 5, 6, 7, -8};
  for(int i = 0; i < 8; ++i) x->data<float>()[i] = v[i];
  PoolOptions o;
  o.strides = {2, 2};
  std::vector<double> y = runOn(x, Type::float32, [&](Expr e) { return max_pool(e, {2, 2}, o); });
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 7);
  // NaN in a window's second row, after larger values (the float32 kernel
  // reduces the rows first).
  x->data<float>()[1] = 2;
  x->data<float>()[6] = std::numeric_limits<float>::quiet_NaN();
  y = runOn(x, Type::float32, [&](Expr e) { return max_pool(e, {2, 2}, o); });
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0], 6);
  EXPECT_TRUE(std::isnan(y[1]));
}

// max_pool_indices and max_pool_grad on float32 (the row-wise first-maximum
// kernel: window rows reduced per column first, then along the row) against
// float64 (the per-output loops over the taps in row-major order) on values
// full of ties, NaNs and -inf, where the first maximum's position matters:
// strides, pads, dilations along either axis, ceil mode, both storage orders.
TEST(FastPaths, FirstMaximumRowsMatchThePerOutputLoops) {
  std::mt19937 rng(11);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double pick[] = {-1, 0, 0, 1, 1, nan, -inf};
  int checked = 0;
  for(int64_t width : {7, 12})
  for(int64_t k : {2, 3})
    for(int64_t s : {1, 2})
      for(int64_t p : {0, 1})
        for(int64_t d : {1, 2})
          for(int dAxis : {0, 1})
            for(bool ceil : {false, true}) {
              if(p >= (k - 1) * d + 1) continue;
              PoolOptions o;
              o.strides = {s, s};
              o.pads = {p, 0, p, p};
              o.dilations = {1, 1};
              o.dilations[size_t(dAxis)] = d;
              o.ceilMode = ceil;
              const std::vector<int64_t> kernel{k, 3};
              Tensor x = TensorBase::create(Shape({2, 3, 8, width}), Type::float64);
              std::uniform_int_distribution<int> u(0, 6);
              for(int64_t i = 0; i < x->size(); ++i) x->data<double>()[i] = pick[u(rng)];
              for(int storage : {0, 1}) {
                auto idx = [&](Expr e) { return max_pool_indices(e, kernel, o, storage); };
                std::vector<double> want = runOn(x, Type::float64, idx), got = runOn(x, Type::float32, idx);
                ASSERT_EQ(got.size(), want.size());
                for(size_t i = 0; i < got.size(); ++i)
                  ASSERT_EQ(got[i], want[i]) << "output " << i << " width " << width << " k " << k << " s " << s
                                             << " p " << p << " d " << d << " on axis " << dAxis << " ceil " << ceil
                                             << " storage " << storage;
              }
              // The gradient: dy added at each window's first maximum (small
              // integers: the sums are exact in float32).
              Shape ys;
              {
                auto g = New<ExpressionGraph>();
                ys = max_pool(g->constant(x), kernel, o)->shape();
              }
              Tensor dy = TensorBase::create(ys, Type::float64);
              for(int64_t i = 0; i < dy->size(); ++i) dy->data<double>()[i] = double(1 + i % 7);
              std::vector<double> grads[2];
              for(int t = 0; t < 2; ++t) {
                Type type = t ? Type::float32 : Type::float64;
                auto g = New<ExpressionGraph>();
                g->setInference(true);
                Tensor xt = TensorBase::create(x->shape(), type), dt = TensorBase::create(ys, type);
                xt->set(x->toVector<double>());
                dt->set(dy->toVector<double>());
                Expr dx = max_pool_grad(g->constant(dt), g->constant(xt), kernel, o);
                dx->keepValue();
                g->forward();
                grads[t] = dx->val()->toVector<double>();
              }
              ASSERT_EQ(grads[1].size(), grads[0].size());
              for(size_t i = 0; i < grads[0].size(); ++i)
                ASSERT_EQ(grads[1][i], grads[0][i]) << "dx " << i << " width " << width << " k " << k << " s " << s
                                                    << " p " << p << " d " << d << " on axis " << dAxis;
              ++checked;
            }
  EXPECT_GT(checked, 100);
}

// max_pool on channel-blocked tensors (what the blocked_layout pass sets
// between convolutions; its AVX2 kernel reduces each output row's window
// rows first, then the columns) against the plain float32 kernel on the same
// values, NaN and -inf among them: strides, pads, dilations, ceil mode,
// blocks of 8 and 16.
TEST(FastPaths, BlockedMaxPoolMatchesThePlainKernel) {
  std::mt19937 rng(11);
  const OpDef& op = Registry::instance().get("max_pool");
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int cases = 0;
  for(int64_t b : {8, 16})
    for(int64_t k : {1, 2, 3})
      for(int64_t s : {1, 2})
        for(int64_t p : {0, 1})
          for(int64_t d : {1, 2})
            for(int64_t ceil : {0, 1}) {
              if(p >= (k - 1) * d + 1) continue;
              const int64_t N = 2, C = 2 * b, H = 9, W = 11;
              std::vector<float> xv(size_t(N * C * H * W));
              std::uniform_int_distribution<int> u(-50, 50), pick(0, 40);
              for(float& v : xv) {
                const int r = pick(rng);
                v = r == 0 ? nan : r == 1 ? -inf : float(u(rng));
              }
              // The same values stored [N, C / b, H, W, b].
              std::vector<float> xb(xv.size());
              for(int64_t n = 0; n < N; ++n)
                for(int64_t c = 0; c < C; ++c)
                  for(int64_t q = 0; q < H * W; ++q)
                    xb[size_t(((n * (C / b) + c / b) * H * W + q) * b + c % b)] = xv[size_t((n * C + c) * H * W + q)];
              auto g = New<ExpressionGraph>();
              g->setDevice({0, DeviceType::cpu});
              PoolOptions o;
              o.strides = {s, s};
              o.pads = {p, p, 0, p};
              o.dilations = {d, 1};
              o.ceilMode = ceil != 0;
              Expr yp = max_pool(g->constant(TensorBase::fromVector<float>(Shape({N, C, H, W}), xv)), {k, k}, o);
              Expr yb = g->make(op, {g->constant(TensorBase::fromVector<float>(Shape({N, C, H, W}), xb))},
                                {{"kernel_shape", attr(IntList{k, k})}, {"strides", attr(IntList{s, s})},
                                 {"pads", attr(IntList{p, p, 0, p})}, {"dilations", attr(IntList{d, 1})},
                                 {"ceil_mode", attr(ceil)}, {"block", attr(b)}});
              g->forward();
              ASSERT_EQ(yb->shape(), yp->shape());
              const std::vector<float> want = yp->val()->toVector<float>(), got = yb->val()->toVector<float>();
              const int64_t OH = yp->shape()[2], OW = yp->shape()[3];
              for(int64_t n = 0; n < N; ++n)
                for(int64_t c = 0; c < C; ++c)
                  for(int64_t q = 0; q < OH * OW; ++q) {
                    const float w = want[size_t((n * C + c) * OH * OW + q)];
                    const float v = got[size_t(((n * (C / b) + c / b) * OH * OW + q) * b + c % b)];
                    if(std::isnan(w)) ASSERT_TRUE(std::isnan(v)) << "b " << b << " k " << k << " s " << s << " p " << p;
                    else ASSERT_EQ(v, w) << "b " << b << " k " << k << " s " << s << " p " << p << " d " << d;
                  }
              ++cases;
            }
  EXPECT_GT(cases, 50);
}

// qlinear_add's CPU loop divides by y_scale with a reciprocal and one FMA
// correction where the scales allow it, and must give the division's bits:
// every (a, b) pair of uint8 and of int8, under 300 parameter sets (random
// scales over 2^-20..2^4, scales with all-ones and all-zero mantissas, zero
// points across the range, relu on and off), against the steps written out
// in float here (this file is compiled without FMA: nothing is fused).
TEST(FastPaths, QLinearAddEveryPairMatchesTheDivision) {
  std::mt19937 rng(5);
  auto scale = [&](int set) {
    std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
    std::uniform_int_distribution<int> ex(-20, 4);
    uint32_t bits = mant(rng) | (uint32_t(127 + ex(rng)) << 23);
    if(set % 5 == 1) bits |= (1u << 23) - 1;  // mantissa all ones
    if(set % 5 == 2) bits &= ~((1u << 23) - 1);  // a power of two
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  for(bool isSigned : {false, true}) {
    const int lo = isSigned ? -128 : 0, hi = isSigned ? 127 : 255;
    Tensor a = TensorBase::create(Shape({65536}), Type::float64), b = TensorBase::create(Shape({65536}), Type::float64);
    for(int i = 0; i < 65536; ++i) {
      a->data<double>()[i] = lo + (i >> 8);
      b->data<double>()[i] = lo + (i & 255);
    }
    std::uniform_int_distribution<int> zp(lo, hi);
    for(int set = 0; set < 150; ++set) {
      QLinearAddParams p{scale(set), scale(set + 1), scale(set + 2), zp(rng), zp(rng), zp(rng), set % 2 == 1};
      SCOPED_TRACE(testing::Message() << (isSigned ? "int8" : "uint8") << " set " << set << ": " << p.aScale << " "
                                      << p.bScale << " " << p.yScale << " " << p.aZeroPoint << " " << p.bZeroPoint
                                      << " " << p.yZeroPoint << (p.relu ? " relu" : ""));
      auto g = New<ExpressionGraph>();
      g->setInference(true);
      const Type t = isSigned ? Type::int8 : Type::uint8;
      Expr y = qlinear_add(cast(g->constant(a), t), cast(g->constant(b), t), p);
      y->keepValue();
      g->forward();
      std::vector<double> got = y->val()->toVector<double>();
      int wrong = 0;
      for(int i = 0; i < 65536 && wrong < 5; ++i) {
        volatile float pa = (float(lo + (i >> 8)) - float(p.aZeroPoint)) * p.aScale;
        volatile float pb = (float(lo + (i & 255)) - float(p.bZeroPoint)) * p.bScale;
        float x = pa + pb;
        if(p.relu) x = x > 0.f ? x : 0.f;
        volatile float q = x / p.yScale;
        const double want = std::min<double>(hi, std::max<double>(lo, std::nearbyint(double(q)) + p.yZeroPoint));
        if(got[size_t(i)] != want) {
          ADD_FAILURE() << "a " << lo + (i >> 8) << ", b " << lo + (i & 255) << ": got " << got[size_t(i)]
                        << ", want " << want;
          ++wrong;
        }
      }
    }
  }
}

// quantize_linear from float32 to int8/uint8 divides by the scale with a
// reciprocal and one FMA correction where the scale allows it: the same
// values as the division for random floats over 2^-40..2^40 (both signs),
// values near each rounding tie, zeros, infinities, NaN and float's extremes,
// under 60 scales and zero points.
TEST(FastPaths, QuantizeLinearMatchesTheDivision) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
  auto fromBits = [](uint32_t b) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    return v;
  };
  for(int set = 0; set < 60; ++set) {
    const bool isSigned = set % 2 == 1;
    const float s = fromBits(mant(rng) | (uint32_t(127 + int(rng() % 25) - 20) << 23));
    const int zp = isSigned ? int(rng() % 256) - 128 : int(rng() % 256);
    SCOPED_TRACE(testing::Message() << (isSigned ? "int8" : "uint8") << " scale " << s << " zero point " << zp);
    std::vector<float> xs;
    for(int i = 0; i < 20000; ++i) {
      const uint32_t e = uint32_t(127 + int(rng() % 81) - 40);
      xs.push_back(fromBits(mant(rng) | (e << 23) | (rng() % 2 ? 0x80000000u : 0u)));
    }
    for(int k = -300; k <= 300; ++k)  // around the ties (k + 0.5) * s
      for(float d : {-1.0f, 0.0f, 1.0f}) xs.push_back(std::nextafter((float(k) + 0.5f) * s, d * INFINITY));
    for(float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, std::numeric_limits<float>::max(),
                   -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()})
      xs.push_back(v);
    auto g = New<ExpressionGraph>();
    g->setInference(true);
    const Type t = isSigned ? Type::int8 : Type::uint8;
    Expr y = quantize_linear(g->constant(TensorBase::fromVector<float>(Shape({int64_t(xs.size())}), xs)),
                             g->scalar(s, Type::float32), g->scalar(zp, t));
    y->keepValue();
    g->forward();
    std::vector<double> got = y->val()->toVector<double>();
    const double lo = isSigned ? -128 : 0, hi = isSigned ? 127 : 255;
    int wrong = 0;
    for(size_t i = 0; i < xs.size() && wrong < 5; ++i) {
      volatile float q = xs[i] / s;
      const double want = q != q ? 0.0 : std::min(hi, std::max(lo, std::nearbyint(double(q)) + zp));
      if(got[i] != want) {
        ADD_FAILURE() << "x " << xs[i] << ": got " << got[i] << ", want " << want;
        ++wrong;
      }
    }
  }
}

// float32 max and min over contiguous rows (and whole tensors, in parallel
// chunks) compare in float lanes; float64 takes the general fold. Both give
// the same values, a row's NaN included, over lengths around the lane
// count and the chunk size.
TEST(FastPaths, FloatMaxMinRowsMatchTheFold) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-100, 100);
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> axes;
  };
  const std::vector<Case> cases = {{{1}, {}},          {{15}, {}},           {{16}, {}},
                                   {{17}, {}},         {{3, 33}, {1}},       {{2, 5, 40}, {1, 2}},
                                   {{4, 7}, {}},       {{200001}, {}},       {{2, 3, 64}, {2}},
                                   {{6, 16}, {0}}};  // the last: not a suffix (the fold)
  const int threadsBefore = host::numThreads();
  for(const Case& cs : cases)
    for(int nanAt : {-1, 0, 5})
      for(int threads : {1, 2}) {
        Tensor x = TensorBase::create(Shape(cs.shape), Type::float32);
        for(int64_t i = 0; i < x->size(); ++i) x->data<float>()[i] = u(rng);
        if(nanAt >= 0 && nanAt < x->size()) x->data<float>()[x->size() - 1 - nanAt] = std::nanf("");
        host::setNumThreads(threads);
        for(bool isMax : {true, false}) {
          auto f = [&](Expr e) { return isMax ? max(e, cs.axes, false) : min(e, cs.axes, false); };
          std::vector<double> got = runOn(x, Type::float32, f), want = runOn(x, Type::float64, f);
          ASSERT_EQ(got.size(), want.size());
          for(size_t i = 0; i < got.size(); ++i) {
            if(std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "row " << i;
            else EXPECT_EQ(got[i], want[i]) << (isMax ? "max" : "min") << " row " << i << " of shape "
                                            << Shape(cs.shape) << " nan at " << nanAt;
          }
        }
      }
  host::setNumThreads(threadsBefore);
}

// A batch norm whose parameters are constants (a model imported for
// inference) computes its per-channel scale and shift once, when built; the
// result is the formula's up to float rounding.
TEST(FastPaths, BatchNormWithConstantStatistics) {
  auto g = New<ExpressionGraph>();
  g->setInference(true);
  const int64_t N = 2, C = 3, HW = 5;
  std::vector<double> xv, sc{0.5, 1.5, -2}, b{0.1, -0.2, 0.3}, m{1, -1, 0.25}, v{0.5, 2, 1e-3};
  for(int64_t i = 0; i < N * C * HW; ++i) xv.push_back(std::sin(double(i)));
  auto cst = [&](const std::vector<double>& d, Shape s) {
    Tensor t = TensorBase::create(s, Type::float32);
    t->set(d);
    return g->constant(t);
  };
  Expr x = cst(xv, Shape({N, C, HW}));
  Expr y = batch_norm(x, cst(sc, Shape({C})), cst(b, Shape({C})), cst(m, Shape({C})), cst(v, Shape({C})), 1e-3);
  EXPECT_EQ(y->type(), "channel_affine");
  for(size_t i = 0; i < y->numChildren(); ++i) EXPECT_TRUE(y->child(i)->isLeaf()) << "input " << i << " is computed per run";
  y->keepValue();
  g->forward();
  std::vector<double> got = y->val()->toVector<double>();
  for(int64_t i = 0; i < N * C * HW; ++i) {
    size_t c = size_t(i / HW % C);
    double want = (xv[size_t(i)] - m[c]) / std::sqrt(v[c] + 1e-3) * sc[c] + b[c];
    EXPECT_NEAR(got[size_t(i)], want, 1e-5 * (1 + std::fabs(want))) << i;
  }
}

}  // namespace
}  // namespace onyx
