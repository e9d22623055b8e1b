// Linear algebra: matmul (numpy/ONNX MatMul with transposes and a scale) and
// affine (matmul plus a broadcast bias, ONNX Gemm). Kernels go to OpenBLAS
// through host::gemm for float/double.
#include <onyx/ops/linalg.h>

#include <vector>

#include <onyx/backend/cpu/gemm.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/shape.h>

namespace onyx {

using namespace functional;

namespace {

// How two operands of a (batched) matmul line up.
struct MatmulDims {
  bool aVec = false, bVec = false;    // 1-D operands, promoted to [1, K] / [K, 1]
  bool transA = false, transB = false;  // effective: a vector is its own transpose
  int64_t M = 1, N = 1, K = 1;
  Shape::Dims batch, aBatch, bBatch;  // aBatch/bBatch padded with 1s to batch's rank
  Shape promoted;                     // batch + [M, N]
  Shape out;                          // promoted without the dims added for vectors
};

// Empty string when the shapes fit, else what is wrong and how to fix it.
std::string matmulDims(const Shape& a, const Shape& b, bool transA, bool transB, MatmulDims& d) {
  if(a.rank() < 1 || b.rank() < 1)
    return "operands need rank >= 1 (multiply by a scalar with mul/operator*)";
  d.aVec = a.rank() == 1;
  d.bVec = b.rank() == 1;
  d.transA = transA && !d.aVec;
  d.transB = transB && !d.bVec;
  int64_t ka, kb;
  if(d.aVec) {
    ka = a.dims()[0];
  } else {
    d.M = d.transA ? a[-1] : a[-2];
    ka = d.transA ? a[-2] : a[-1];
  }
  if(d.bVec) {
    kb = b.dims()[0];
  } else {
    kb = d.transB ? b[-1] : b[-2];
    d.N = d.transB ? b[-2] : b[-1];
  }
  if(ka != kb)
    return str("inner dimensions differ: op(a) has K = ", ka, " but op(b) has K = ", kb,
               "; check transA/transB or transpose an operand");
  d.K = ka;
  int ra = d.aVec ? 0 : a.rank() - 2, rb = d.bVec ? 0 : b.rank() - 2;
  int r = std::max(ra, rb);
  for(int i = 0; i < r; ++i) {
    int64_t da = i >= r - ra ? a.dims()[i - (r - ra)] : 1;
    int64_t db = i >= r - rb ? b.dims()[i - (r - rb)] : 1;
    if(da != db && da != 1 && db != 1)
      return str("batch dims do not broadcast (", da, " vs ", db, " at batch axis ", i, ")");
    d.aBatch.push_back(da);
    d.bBatch.push_back(db);
    d.batch.push_back(da == 1 ? db : da);
  }
  Shape::Dims p = d.batch, o = d.batch;
  p.push_back(d.M);
  p.push_back(d.N);
  if(!d.aVec) o.push_back(d.M);
  if(!d.bVec) o.push_back(d.N);
  d.promoted = Shape(p);
  d.out = Shape(o);
  return {};
}

MatmulDims dimsOf(const Shape& a, const Shape& b, const Attrs& attrs) {
  MatmulDims d;
  std::string err = matmulDims(a, b, attrs.i("transA") != 0, attrs.i("transB") != 0, d);
  ONYX_ASSERT(err.empty(), err);  // infer accepted these shapes
  return d;
}

void inferMatmulInto(InferCtx& c, MatmulDims& d) {
  c.type = c.commonType();
  c.check(isComputeType(c.type) && c.type != Type::boolean, "element type ", c.type,
          " is not numeric; cast the operands to a float or integer type");
  std::string err = matmulDims(c.shapeOf(0), c.shapeOf(1), c.attrs.i("transA") != 0, c.attrs.i("transB") != 0, d);
  c.check(err.empty(), err);
  c.shape = d.out;
}

// C = alpha * op(A) . op(B) + beta * C over all (broadcast) batches.
template <class T>
void runMatmul(const MatmulDims& d, double alpha, const T* A, const T* B, double beta, T* C) {
  int64_t lda = d.transA ? d.M : d.K;
  int64_t ldb = d.transB ? d.K : d.N;
  int64_t nb = 1;
  bool aFull = true, bShared = true;
  for(size_t i = 0; i < d.batch.size(); ++i) {
    nb *= d.batch[i];
    aFull = aFull && d.aBatch[i] == d.batch[i];
    bShared = bShared && d.bBatch[i] == 1;
  }
  if(nb == 0) return;
  if(aFull && bShared && !d.transA) {
    // x[.., M, K] . W[K, N]: the batches stack into one tall GEMM.
    host::gemm(false, d.transB, nb * d.M, d.N, d.K, alpha, A, lda, B, ldb, beta, C, d.N);
    return;
  }
  std::vector<int64_t> offs(static_cast<size_t>(3 * nb));
  int r = static_cast<int>(d.batch.size());
  int64_t aMat = d.M * d.K, bMat = d.K * d.N, cMat = d.M * d.N;
  for(int64_t o = 0; o < nb; ++o) {
    int64_t rem = o, ao = 0, bo = 0, as = aMat, bs = bMat;
    for(int i = r - 1; i >= 0; --i) {
      int64_t idx = rem % d.batch[i];
      rem /= d.batch[i];
      if(d.aBatch[i] != 1) ao += idx * as;
      if(d.bBatch[i] != 1) bo += idx * bs;
      as *= d.aBatch[i];
      bs *= d.bBatch[i];
    }
    offs[o] = ao;
    offs[nb + o] = bo;
    offs[2 * nb + o] = o * cMat;
  }
  host::gemmBatched(d.transA, d.transB, nb, d.M, d.N, d.K, alpha, A, lda, offs.data(), B, ldb, offs.data() + nb,
                    beta, C, d.N, offs.data() + 2 * nb);
}

Expr makeMatmul(Expr a, Expr b, bool transA, bool transB, double alpha);

Shape withoutDim(const Shape& s, int axis) {
  Shape::Dims d = s.dims();
  d.erase(d.begin() + s.axis(axis));
  return Shape(d);
}

// Gradients of y = alpha * op(a) . op(b) for inputs 0 (a) and 1 (b). The
// rule works on the promoted 2-D forms, drops the dim added to a vector
// operand, and lets g.add sum the broadcast batch dims.
void matmulGrads(GradCtx& g, const MatmulDims& d, double alpha) {
  Expr a = g.x(0), b = g.x(1);
  if(d.aVec) a = reshape(a, Shape{1, d.K});
  if(d.bVec) b = reshape(b, Shape{d.K, 1});
  Expr dy = reshape(g.dy, d.promoted);
  bool tA = d.transA, tB = d.transB;
  if(g.needs(0)) {
    Expr ga = tA ? makeMatmul(b, dy, tB, true, alpha) : makeMatmul(dy, b, false, !tB, alpha);
    g.add(0, d.aVec ? reshape(ga, withoutDim(ga->shape(), -2)) : ga);
  }
  if(g.needs(1) && !d.bVec && !tA && b->shape().rank() == 2 && !d.batch.empty()) {
    // Shared weights under batched x: the batches stack into rows, one GEMM
    // [K, B*M] . [B*M, N] instead of B of them plus a sum.
    int64_t rows = Shape(d.batch).elements() * d.M;
    Expr a2 = reshape(a, Shape{rows, d.K}), dy2 = reshape(dy, Shape{rows, d.N});
    g.add(1, tB ? makeMatmul(dy2, a2, true, false, alpha) : makeMatmul(a2, dy2, true, false, alpha));
  } else if(g.needs(1)) {
    Expr gb = tB ? makeMatmul(dy, a, true, tA, alpha) : makeMatmul(a, dy, !tA, false, alpha);
    g.add(1, d.bVec ? reshape(gb, withoutDim(gb->shape(), -1)) : gb);
  }
}

}  // namespace

// y = alpha * op(a) . op(b), numpy matmul broadcasting of batch dims
ONYX_OP(kMatmul, "matmul")
    .doc("y = alpha * op(a) . op(b); numpy/ONNX MatMul rules (batch dims broadcast, 1-D operands promoted); "
         "op transposes the last two dims when transA/transB")
    .inputs(2)
    .attr("transA", int64_t(0))
    .attr("transB", int64_t(0))
    .attr("alpha", 1.0)
    .infer([](InferCtx& c) {
      MatmulDims d;
      inferMatmulInto(c, d);
    })
    .cpu([](KernelCtx& c) {
      MatmulDims d = dimsOf(c.in[0]->shape(), c.in[1]->shape(), c.attrs);
      dispatchNumeric(c.out.type(), "matmul", [&](auto tag) {
        using T = typename decltype(tag)::type;
        runMatmul<T>(d, c.attrs.f("alpha"), c.in[0]->data<T>(), c.in[1]->data<T>(), 0.0, c.out.data<T>());
      });
    })
    .backward([](GradCtx& g) {
      matmulGrads(g, dimsOf(g.x(0)->shape(), g.x(1)->shape(), g.attrs), g.attrs.f("alpha"));
    })
    // MatMul has no transA/transB/alpha: non-default values need Transpose
    // and Mul nodes around it on export.
    .onnx("MatMul", 1);

namespace {
Expr makeMatmul(Expr a, Expr b, bool transA, bool transB, double alpha) {
  return a->graph()->make(kMatmul, {a, b},
                          {{"transA", attr(transA)}, {"transB", attr(transB)}, {"alpha", attr(alpha)}});
}
}  // namespace

Expr dot(Expr a, Expr b, bool transA, bool transB, float scale) {
  return makeMatmul(a, b, transA, transB, static_cast<double>(scale));
}
Expr matmul(Expr a, Expr b) { return makeMatmul(a, b, false, false, 1.0); }

// y = alpha * op(x) . op(W) + b
ONYX_OP(kAffine, "affine")
    .doc("y = alpha * op(x) . op(W) + b; W 2-D [K, N] after op, b broadcast to y's shape [.., N]")
    .inputs(3)
    .attr("transA", int64_t(0))
    .attr("transB", int64_t(0))
    .attr("alpha", 1.0)
    .infer([](InferCtx& c) {
      c.check(c.shapeOf(1).rank() == 2, "W must be 2-D [K, N]; use matmul(x, W) + b for batched weights");
      MatmulDims d;
      inferMatmulInto(c, d);
      const Shape& b = c.shapeOf(2);
      bool fits = Shape::broadcastable(b, c.shape);
      if(fits) fits = Shape::broadcast({c.shape, b}) == c.shape;
      c.check(fits, "bias of shape ", b, " does not broadcast to the result's shape ", c.shape,
              "; give it shape [N] or [1, N]");
    })
    .cpu([](KernelCtx& c) {
      MatmulDims d = dimsOf(c.in[0]->shape(), c.in[1]->shape(), c.attrs);
      dispatchNumeric(c.out.type(), "affine", [&](auto tag) {
        using T = typename decltype(tag)::type;
        // Bias first, then the product accumulated on top (beta = 1).
        host::elementwise<T, T>(_2, c.out, *c.in[2]);
        runMatmul<T>(d, c.attrs.f("alpha"), c.in[0]->data<T>(), c.in[1]->data<T>(), 1.0, c.out.data<T>());
      });
    })
    .backward([](GradCtx& g) {
      matmulGrads(g, dimsOf(g.x(0)->shape(), g.x(1)->shape(), g.attrs), g.attrs.f("alpha"));
      g.add(2, g.dy);
    })
    // Gemm takes 2-D A and B only: other ranks of x need MatMul + Add on export.
    .onnx("Gemm", 7);

Expr affine(Expr x, Expr W, Expr b, bool transA, bool transB, float scale) {
  return x->graph()->make(kAffine, {x, W, b},
                          {{"transA", attr(transA)}, {"transB", attr(transB)}, {"alpha", attr(scale)}});
}

}  // namespace onyx
