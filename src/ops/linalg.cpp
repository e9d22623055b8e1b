// Linear algebra: matmul (numpy/ONNX MatMul with transposes and a scale) and
// affine (matmul plus a broadcast bias, ONNX Gemm). Kernels go to OpenBLAS
// through host::gemm for float/double. det and inverse (ONNX Det) work per
// matrix in double. trilu (ONNX Trilu) keeps a triangle of each matrix,
// moving bytes, so every element type with whole bytes works. ONNX Einsum and
// MatMulInteger import as composites of these and the shape ops (converters/).
#include <onyx/ops/linalg.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include <onyx/backend/cpu/few_rows_gemm.h>
#include <onyx/backend/cpu/gemm.h>
#include <onyx/core/device_backend.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/graph/passes/uses.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

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

// GEMM of element type t on `dev`: host::gemm (OpenBLAS) or the GPU
// backend's (cuBLAS).
void gemmOn(DeviceId dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
            const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc, bool bf16) {
  if(dev.type == DeviceType::gpu)
    return gpuBackend().gemm(dev.no, t, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  dispatchNumeric(t, "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    host::gemm(transA, transB, M, N, K, alpha, static_cast<const T*>(A), lda, static_cast<const T*>(B), ldb, beta,
               static_cast<T*>(C), ldc, bf16);
  });
}

void gemmBatchedOn(DeviceId dev, Type t, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                   double alpha, const void* A, int64_t lda, const int64_t* aOffsets, const void* B, int64_t ldb,
                   const int64_t* bOffsets, double beta, void* C, int64_t ldc, const int64_t* cOffsets, bool bf16) {
  if(dev.type == DeviceType::gpu)
    return gpuBackend().gemmBatched(dev.no, t, transA, transB, batch, M, N, K, alpha, A, lda, aOffsets, B, ldb,
                                    bOffsets, beta, C, ldc, cOffsets);
  dispatchNumeric(t, "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    host::gemmBatched(transA, transB, batch, M, N, K, alpha, static_cast<const T*>(A), lda, aOffsets,
                      static_cast<const T*>(B), ldb, bOffsets, beta, static_cast<T*>(C), ldc, cOffsets, bf16);
  });
}

// C = alpha * op(A) . op(B) + beta * C over all (broadcast) batches, on the
// device of the buffers; bf16: float32 products in bfloat16 on the CPU
// (ComputePrecision::bfloat16, see host::gemm).
void runMatmul(DeviceId dev, Type t, const MatmulDims& d, double alpha, const void* A, const void* B, double beta,
               void* C, bool bf16) {
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
    gemmOn(dev, t, false, d.transB, nb * d.M, d.N, d.K, alpha, A, lda, B, ldb, beta, C, d.N, bf16);
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
  gemmBatchedOn(dev, t, d.transA, d.transB, nb, d.M, d.N, d.K, alpha, A, lda, offs.data(), B, ldb,
                offs.data() + nb, beta, C, d.N, offs.data() + 2 * nb, bf16);
}

// The weight of a product packed for host::fewRowsGemm, kept with the node
// while the weight is the same constant.
struct PackedWeight {
  const void* w = nullptr;
  std::shared_ptr<const host::FewRowsPacked> p;
};

// x[.., M, K] . W[K, N] (or W^T) in float32 with W a constant on the host,
// alpha 1 and few rows in all: through the packed few-rows kernel, W packed
// once (host::fewRowsPackShared), onto C (accumulate: the bias already in
// it). oneDNN's and OpenBLAS's GEMMs pack W again on every call. One Zen 3
// core, 64 x 784 by 784 x 512: 0.99 vs 0.53 ms (NN), the MLP's first layer
// (A W^T) 0.74 vs 0.65 ms; 8 rows 0.16 vs 0.09. One row stays a GEMV
// (streaming W is all either does, and packing would copy it). False where
// it does not apply.
bool packedWeightProduct(KernelCtx& c, const MatmulDims& d, bool accumulate) {
  if(c.out.type() != Type::float32 || !c.out.onHost() || c.bf16() || c.attrs.f("alpha") != 1.0 || d.transA ||
     d.bVec || c.in[1]->shape().rank() != 2 || c.node.child(1)->kind() != NodeKind::Constant)
    return false;
  int64_t rows = d.M;
  for(size_t i = 0; i < d.batch.size(); ++i) {
    if(d.aBatch[i] != d.batch[i]) return false;
    rows *= d.batch[i];
  }
  if(rows < 2 || !host::fewRowsGemmTakes(rows)) return false;
  std::shared_ptr<void>& slot = c.node.kernelState();
  auto st = std::static_pointer_cast<PackedWeight>(slot);
  if(!st || st->w != c.in[1]->raw()) {
    st = std::make_shared<PackedWeight>();
    st->w = c.in[1]->raw();
    st->p = host::fewRowsPackShared(c.in[1]->data<float>(), d.transB ? d.K : d.N, d.transB, d.K, d.N);
    slot = st;
  }
  host::fewRowsGemm(rows, c.in[0]->data<float>(), d.K, *st->p, accumulate, c.out.data<float>(), d.N);
  return true;
}

Expr makeMatmul(Expr a, Expr b, bool transA, bool transB, double alpha);

// ---- ONNX

// x's input when x is a transpose swapping its last two dims (rank >= 2),
// else null: MatMul(Transpose(a), b) imports as matmul(a, b, transA).
Expr swappedLastTwo(Expr x) {
  Node* in = passes::swapsLastTwo(x.get());
  return in ? Expr(in) : nullptr;
}

// MatMul(Transpose(a), b) as the export writes transA (the Transpose's
// output named inside the MatMul's, see emitMatmulChain) imports as
// matmul(a, b, transA); likewise for b.
void importMatMul(OnnxImportCtx& c) {
  Expr a = c.input(0), b = c.input(1);
  bool tA = false, tB = false;
  std::string inside = c.nodeName() + "/";
  if(Expr in = swappedLastTwo(a); in && a->name().rfind(inside, 0) == 0) { a = in; tA = true; }
  if(Expr in = swappedLastTwo(b); in && b->name().rfind(inside, 0) == 0) { b = in; tB = true; }
  c.setOutput(0, makeMatmul(a, b, tA, tB, 1.0));
}

// Element types of ONNX's MatMul and Gemm: float16/32/64 from opset 1,
// int32/int64/uint32/uint64 from 9, bfloat16 from 13 (0: never).
int matmulTypeSince(Type t) {
  switch(t) {
    case Type::float16: case Type::float32: case Type::float64: return 1;
    case Type::int32: case Type::int64: case Type::uint32: case Type::uint64: return 9;
    case Type::bfloat16: return 13;
    default: return 0;
  }
}

void checkMatmulType(OnnxExportCtx& c, const char* opType) {
  Type t = c.inputType(0);
  int need = matmulTypeSince(t);
  c.check(need > 0, opType, " does not take element type ", t);
  c.requireOpset(need, str(opType, " on ", t));
}

// Whether alpha survives Gemm's float32 attribute.
bool floatExact(double v) { return std::isnan(v) || static_cast<double>(static_cast<float>(v)) == v; }

// Value `v` (an operand of rank `rank`) with its last two dims swapped.
std::string emitSwapLast(OnnxExportCtx& c, const std::string& v, int rank, const std::string& hint) {
  IntList perm;
  for(int i = 0; i < rank; ++i) perm.push_back(i == rank - 2 ? rank - 1 : i == rank - 1 ? rank - 2 : i);
  std::string y = c.fresh(hint);
  c.emit("Transpose", {v}, {y}, {{"perm", AttrValue(perm)}});
  return y;
}

// Whether x's type holds v exactly.
bool holds(Type t, double v) {
  Tensor x = TensorBase::create(Shape(std::vector<int64_t>{}), t);
  x->setFromDouble(0, v);
  double back = x->getAsDouble(0);
  return back == v || (std::isnan(back) && std::isnan(v));
}

// The hint under which c.fresh() names a value inside `v` (a name made by
// c.fresh(), or the node's own output): "<node>/x" + "/" -> "x/".
std::string within(OnnxExportCtx& c, const std::string& v) {
  std::string n = c.output();
  return v == n ? std::string() : v.substr(n.size() + 1) + "/";
}

// alpha * op(a) . op(b) into `out` as Transpose (where transA/transB),
// MatMul and, for alpha != 1, Mul by alpha in x's type; the import folds
// them back into one matmul (importMatMul, mul's import). A float16 or
// bfloat16 matmul computes in float32 (alpha too); when alpha does not fit
// the type, the operands go through float32, MatMul and Mul run there and
// the result is cast back, which cast's import folds back as well. The
// import folds only values named inside the folding node's output
// ("<y>/matmul" under Mul "y"), as written here, so that a model from
// elsewhere imports node for node.
void emitMatmulChain(OnnxExportCtx& c, bool tA, bool tB, double alpha, const std::string& out) {
  Type t = c.inputType(0);
  std::string a = c.input(0), b = c.input(1);
  bool viaF32 = alpha != 1 && (t == Type::float16 || t == Type::bfloat16) && !holds(t, alpha);
  std::string scaled = viaF32 ? c.fresh(within(c, out) + "scaled") : out;  // Mul's output
  std::string m = alpha == 1 ? out : c.fresh(within(c, scaled) + "matmul");  // MatMul's output
  if(viaF32) {
    for(std::string* v : {&a, &b}) {
      std::string w = c.fresh(within(c, m) + (v == &a ? "a_f32" : "b_f32"));
      c.emit("Cast", {*v}, {w}, {{"to", int64_t(Type::float32)}});
      *v = w;
    }
  }
  if(tA) a = emitSwapLast(c, a, c.inputShape(0).rank(), within(c, m) + "a_t");
  if(tB) b = emitSwapLast(c, b, c.inputShape(1).rank(), within(c, m) + "b_t");
  c.emit("MatMul", {a, b}, {m});
  if(alpha == 1) return;
  c.emit("Mul", {m, c.scalarConst(alpha, viaF32 ? Type::float32 : t, within(c, scaled) + "alpha")}, {scaled});
  if(viaF32) c.emit("Cast", {scaled}, {out}, {{"to", int64_t(t)}});
}

// Gemm's attributes for the node's transA/transB/alpha (defaults left out).
OnnxAttrs gemmAttrs(bool tA, bool tB, double alpha) {
  OnnxAttrs attrs;
  if(alpha != 1) attrs.emplace_back("alpha", AttrValue(alpha));
  if(tA) attrs.emplace_back("transA", AttrValue(int64_t(1)));
  if(tB) attrs.emplace_back("transB", AttrValue(int64_t(1)));
  return attrs;
}

void exportMatmul(OnnxExportCtx& c) {
  checkMatmulType(c, "MatMul");
  Attrs a = c.attrs();
  // A vector operand is its own transpose.
  bool tA = a.i("transA") != 0 && c.inputShape(0).rank() >= 2;
  bool tB = a.i("transB") != 0 && c.inputShape(1).rank() >= 2;
  double alpha = a.f("alpha");
  if(!tA && !tB && alpha == 1) {
    c.emit("MatMul", {c.input(0), c.input(1)}, {c.output()});
    return;
  }
  // 2-D operands: Gemm without C (optional from opset 11) holds all three.
  if(c.inputShape(0).rank() == 2 && c.inputShape(1).rank() == 2 && c.opset() >= 11 && floatExact(alpha)) {
    c.emit("Gemm", {c.input(0), c.input(1)}, {c.output()}, gemmAttrs(tA, tB, alpha));
    return;
  }
  emitMatmulChain(c, tA, tB, alpha, c.output());
}

// affine: Gemm(x, W, b) for a 2-D x (opsets before 7 say `broadcast` when b
// is smaller than [M, N]); any other x as MatMul + Add, which the import of
// add folds back into affine.
void exportAffine(OnnxExportCtx& c) {
  checkMatmulType(c, "Gemm");
  Attrs a = c.attrs();
  int rx = c.inputShape(0).rank();
  bool tA = a.i("transA") != 0 && rx >= 2, tB = a.i("transB") != 0;
  double alpha = a.f("alpha");
  if(rx == 2 && floatExact(alpha)) {
    OnnxAttrs attrs = gemmAttrs(tA, tB, alpha);
    if(c.opset() < 7 && c.inputShape(2) != c.node().shape()) attrs.emplace_back("broadcast", AttrValue(int64_t(1)));
    c.emit("Gemm", {c.input(0), c.input(1), c.input(2)}, {c.output()}, attrs);
    return;
  }
  std::string m = c.fresh("matmul");
  emitMatmulChain(c, tA, tB, alpha, m);
  c.emit("Add", {m, c.input(2)}, {c.output()});
}

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
    .anyDevice([](KernelCtx& c) {
      MatmulDims d = dimsOf(c.in[0]->shape(), c.in[1]->shape(), c.attrs);
      if(packedWeightProduct(c, d, false)) return;
      runMatmul(c.out.getDeviceId(), c.out.type(), d, c.attrs.f("alpha"), c.in[0]->raw(), c.in[1]->raw(), 0.0,
                c.out.raw(), c.bf16());
    })
    .backward([](GradCtx& g) {
      matmulGrads(g, dimsOf(g.x(0)->shape(), g.x(1)->shape(), g.attrs), g.attrs.f("alpha"));
    })
    // MatMul has no transA/transB/alpha: the export writes non-default ones
    // as Gemm (2-D operands) or as Transpose and Mul nodes around MatMul,
    // and the import folds those back (importMatMul, and mul's import).
    .onnx("MatMul", 1)
    .importer(importMatMul)
    .exporter(exportMatmul);

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

namespace {
// ONNX Gemm: y = alpha * op(A) . op(B) + beta * C, C optional from opset 11
// and broadcast to [M, N]. Without C (or with beta = 0) it is a matmul.
void importGemm(OnnxImportCtx& c) {
  Expr a = c.input(0), b = c.input(1);
  bool tA = c.attrInt("transA", 0) != 0, tB = c.attrInt("transB", 0) != 0;
  double alpha = c.attrFloat("alpha", 1.0), beta = c.attrFloat("beta", 1.0);
  // Before opset 7 `broadcast` said whether C may broadcast; it always may here.
  if(c.opset() < 7) c.ignoreAttr("broadcast");
  c.check(a->shape().rank() == 2 && b->shape().rank() == 2, "A and B must be 2-D, got shapes ", a->shape(), " and ",
          b->shape());
  std::vector<std::pair<std::string, AttrValue>> attrs = {
      {"transA", attr(tA)}, {"transB", attr(tB)}, {"alpha", attr(alpha)}};
  if(c.numInputs() < 3 || !c.hasInput(2) || beta == 0) {
    c.setOutput(0, c.make("matmul", {a, b}, attrs));
    return;
  }
  Expr C = c.input(2);
  if(beta != 1) C = C * beta;
  c.setOutput(0, c.make("affine", {a, b, C}, attrs));
}
}  // namespace

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
    .anyDevice([](KernelCtx& c) {
      MatmulDims d = dimsOf(c.in[0]->shape(), c.in[1]->shape(), c.attrs);
      // Bias first, then the product accumulated on top (beta = 1).
      if(!c.out.onHost()) {
        gpuBackend().assign(c.out, *c.in[2]);
      } else {
        dispatchNumeric(c.out.type(), "affine", [&](auto tag) {
          using T = typename decltype(tag)::type;
          host::elementwise<T, T>(_2, c.out, *c.in[2]);
        });
      }
      if(packedWeightProduct(c, d, true)) return;
      runMatmul(c.out.getDeviceId(), c.out.type(), d, c.attrs.f("alpha"), c.in[0]->raw(), c.in[1]->raw(), 1.0,
                c.out.raw(), c.bf16());
    })
    .backward([](GradCtx& g) {
      matmulGrads(g, dimsOf(g.x(0)->shape(), g.x(1)->shape(), g.attrs), g.attrs.f("alpha"));
      g.add(2, g.dy);
    })
    // Gemm takes 2-D A and B only: other ranks of x export as MatMul + Add.
    .onnx("Gemm", 1)
    .importer(importGemm)
    .exporter(exportAffine);

Expr affine(Expr x, Expr W, Expr b, bool transA, bool transB, float scale) {
  return x->graph()->make(kAffine, {x, W, b},
                          {{"transA", attr(transA)}, {"transB", attr(transB)}, {"alpha", attr(scale)}});
}

// ------------------------------------------------------ det and inverse

namespace {

// Square matrices in the last two dims: [.., M, M].
void inferSquare(InferCtx& c) {
  c.requireFloat(0);
  const Shape& s = c.shapeOf(0);
  c.check(s.rank() >= 2 && s[-1] == s[-2], "x must hold square matrices [.., M, M], got shape ", s);
}

// Runs fn(matrix index, in, out) on each matrix of x, as doubles (n x n
// row-major in `a`).
template <class Fn>
void eachMatrix(KernelCtx& c, Fn fn) {
  const Shape& s = c.in[0]->shape();
  int64_t n = s[-1];
  int64_t mats = 1;
  for(int i = 0; i + 2 < s.rank(); ++i) mats *= s.dims()[static_cast<size_t>(i)];
  for(int64_t m = 0; m < mats; ++m) {
    std::vector<double> a(static_cast<size_t>(n * n));
    for(int64_t i = 0; i < n * n; ++i) a[static_cast<size_t>(i)] = c.in[0]->getAsDouble(m * n * n + i);
    fn(m, std::move(a), n);
  }
}

// LU with partial pivoting: the product of the pivots, sign-corrected.
double detOf(std::vector<double> a, int64_t n) {
  double det = 1;
  for(int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for(int64_t i = k + 1; i < n; ++i)
      if(std::fabs(a[i * n + k]) > std::fabs(a[p * n + k])) p = i;
    if(a[p * n + k] == 0) return 0;
    if(p != k) {
      for(int64_t j = 0; j < n; ++j) std::swap(a[k * n + j], a[p * n + j]);
      det = -det;
    }
    double piv = a[k * n + k];
    det *= piv;
    for(int64_t i = k + 1; i < n; ++i) {
      double f = a[i * n + k] / piv;
      for(int64_t j = k + 1; j < n; ++j) a[i * n + j] -= f * a[k * n + j];
    }
  }
  return det;
}

// Gauss-Jordan with partial pivoting; a singular matrix gives inf/NaN.
std::vector<double> inverseOf(std::vector<double> a, int64_t n) {
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for(int64_t i = 0; i < n; ++i) inv[i * n + i] = 1;
  for(int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for(int64_t i = k + 1; i < n; ++i)
      if(std::fabs(a[i * n + k]) > std::fabs(a[p * n + k])) p = i;
    if(p != k)
      for(int64_t j = 0; j < n; ++j) {
        std::swap(a[k * n + j], a[p * n + j]);
        std::swap(inv[k * n + j], inv[p * n + j]);
      }
    double piv = a[k * n + k];
    for(int64_t j = 0; j < n; ++j) {
      a[k * n + j] /= piv;
      inv[k * n + j] /= piv;
    }
    for(int64_t i = 0; i < n; ++i) {
      if(i == k) continue;
      double f = a[i * n + k];
      if(f == 0) continue;
      for(int64_t j = 0; j < n; ++j) {
        a[i * n + j] -= f * a[k * n + j];
        inv[i * n + j] -= f * inv[k * n + j];
      }
    }
  }
  return inv;
}

// x with its last two dims swapped.
Expr swapLast(Expr x) {
  std::vector<int> perm;
  for(int i = 0; i < x->shape().rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

}  // namespace

// y = x^-1 for each matrix of x
ONYX_OP(kInverse, "inverse")
    .doc("y = x^-1 for each square matrix in the last two dims (Gauss-Jordan with partial pivoting, in double); "
         "singular matrices give inf/NaN")
    .inputs(1)
    .infer([](InferCtx& c) {
      inferSquare(c);
      infer::sameAsInput0(c);
    })
    .cpu([](KernelCtx& c) {
      eachMatrix(c, [&](int64_t m, std::vector<double> a, int64_t n) {
        std::vector<double> inv = inverseOf(std::move(a), n);
        for(int64_t i = 0; i < n * n; ++i) c.out.setFromDouble(m * n * n + i, inv[static_cast<size_t>(i)]);
      });
    })
    .gpuOnHost("no GPU form yet: it waits for a batched GPU LU (cuSOLVER getrfBatched)")
    // dY = -Y^T . dy . Y^T
    .backward([](GradCtx& g) {
      Expr y = g.y();
      g.add(0, -dot(dot(y, g.dy, true, false), y, false, true));
    })
    .noOnnx("no ONNX op in the default domain; exported as ONNX Runtime's com.microsoft Inverse")
    .onnxExport(1, [](OnnxExportCtx& c) {
      Type t = c.inputType(0);
      c.check(t != Type::bfloat16, "com.microsoft Inverse takes float16, float32 and float64, not bfloat16");
      c.emit("Inverse", {c.input(0)}, {c.output()}, {}, "com.microsoft");
    });

Expr inverse(Expr x) { return x->graph()->make(kInverse, {x}); }

// y = det(x) for each matrix of x
ONYX_OP(kDet, "det")
    .doc("y = det(x) for each square matrix in the last two dims [.., M, M] -> [..] (LU with partial pivoting, in "
         "double)")
    .inputs(1)
    .infer([](InferCtx& c) {
      inferSquare(c);
      const Shape& s = c.shapeOf(0);
      Shape::Dims d;
      for(int i = 0; i + 2 < s.rank(); ++i) d.push_back(s.dims()[static_cast<size_t>(i)]);
      c.shape = Shape(d);
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      eachMatrix(c, [&](int64_t m, std::vector<double> a, int64_t n) { c.out.setFromDouble(m, detOf(std::move(a), n)); });
    })
    .gpuOnHost("no GPU form yet: it waits for a batched GPU LU (cuSOLVER getrfBatched)")
    // d det / dx = det * x^-T (Jacobi's formula); needs an invertible x.
    .backward([](GradCtx& g) {
      Shape::Dims d = g.y()->shape().dims();
      d.push_back(1);
      d.push_back(1);
      Expr scale = reshape(g.dy * g.y(), Shape(d));
      g.add(0, scale * swapLast(inverse(g.x(0))));
    })
    .onnx("Det", 11)
    .exporter([](OnnxExportCtx& c) {
      // Through float32 a bfloat16 det would round twice (the kernel rounds
      // its double result once).
      if(c.inputType(0) == Type::bfloat16) c.requireOpset(22, "Det on bfloat16");
      c.emitDefault("Det");
    });

Expr det(Expr x) { return x->graph()->make(kDet, {x}); }

// ---------------------------------------------------------------- trilu

namespace {

// The columns [lo, hi) of row i that trilu sets to zero, for rows of m
// elements. k is clamped so that i + k cannot overflow.
void triluZeroRange(bool upper, int64_t k, int64_t i, int64_t m, int64_t& lo, int64_t& hi) {
  if(upper) {  // keep j >= i + k
    lo = 0;
    hi = std::clamp<int64_t>(i + k, 0, m);
  } else {  // keep j <= i + k
    lo = std::clamp<int64_t>(i + k + 1, 0, m);
    hi = m;
  }
}

}  // namespace

int64_t ops::triluK(int64_t k, const Shape& s) {
  int64_t lim = s[-1] + s[-2] + 1;
  return std::clamp<int64_t>(k, -lim, lim);
}

namespace {

using ops::triluK;

// ONNX Trilu (and Where) take the 16 types up to bfloat16, no float8.
void checkTriluType(OnnxExportCtx& c) {
  Type t = c.inputType(0);
  c.check(!isSmallFloat(t), "ONNX Trilu takes no element type ", t, " at any opset");
}

}  // namespace

// y = x where j - i >= k (upper) or j - i <= k (lower), else 0
ONYX_OP(kTrilu, "trilu")
    .doc("y[.., i, j] = x[.., i, j] if (upper ? j - i >= k : j - i <= k) else 0 (ONNX Trilu)")
    .inputs(1)
    .attr("upper", int64_t(1))
    .attr("k", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& s = c.shapeOf(0);
      c.check(s.rank() >= 2, "needs a tensor of rank 2 or more (matrices in the last two dims)");
      int bits = typeBits(c.typeOf(0));
      c.check(bits > 0 && bits % 8 == 0, "element type ", c.typeOf(0),
              " is not supported (needs a type with whole bytes per element)");
      c.shape = s;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      const TensorBase& x = *c.in[0];
      size_t e = static_cast<size_t>(typeBits(x.type()) / 8);
      const Shape& s = x.shape();
      int64_t n = s[-2], m = s[-1];
      if(n == 0 || m == 0) return;  // empty matrices: nothing to copy
      int64_t rows = x.size() / m;
      bool upper = c.attrs.i("upper") != 0;
      int64_t k = triluK(c.attrs.i("k"), s);
      const char* src = static_cast<const char*>(x.raw());
      char* dst = static_cast<char*>(c.out.raw());
      host::parallelFor(rows, x.size(), [&](int64_t r0, int64_t r1) {
        for(int64_t r = r0; r < r1; ++r) {
          int64_t lo, hi;
          triluZeroRange(upper, k, r % n, m, lo, hi);
          size_t row = static_cast<size_t>(r * m) * e;
          std::memcpy(dst + row, src + row, static_cast<size_t>(m) * e);
          if(hi > lo) std::memset(dst + row + static_cast<size_t>(lo) * e, 0, static_cast<size_t>(hi - lo) * e);
        }
      });
    })
    .backward([](GradCtx& g) { g.add(0, trilu(g.dy, g.attrs.i("upper") != 0, g.attrs.i("k"))); })
    .onnx("Trilu", 14)
    .importer([](OnnxImportCtx& c) {
      int64_t k = 0;
      if(c.numInputs() > 1 && c.hasInput(1)) {
        std::vector<int64_t> kv = c.ints(1);
        c.check(kv.size() == 1, "k must hold one value, got ", kv.size());
        k = kv[0];
      }
      c.setOutput(0, trilu(c.input(0), c.attrInt("upper", 1) != 0, k));
    })
    // The mirror: k as input 1 (a 0-D int64), left out when it is 0.
    .exporter([](OnnxExportCtx& c) {
      checkTriluType(c);
      Attrs a = c.attrs();
      std::vector<std::string> in{c.input(0)};
      if(a.i("k") != 0)
        in.push_back(c.constant(TensorBase::fromVector(Shape{}, std::vector<int64_t>{a.i("k")}), "k"));
      c.emit("Trilu", in, {c.output()}, {{"upper", int64_t(a.i("upper") != 0 ? 1 : 0)}});
    })
    // Opsets 9-13 (no Trilu): Where(mask, x, 0) with the kept positions of
    // one matrix as a constant bool mask (broadcast over the leading dims);
    // the zeros are all-zero bytes as the kernel's.
    .onnxExport(
        9,
        [](OnnxExportCtx& c) {
          checkTriluType(c);
          // Where takes bfloat16 from opset 16 only, Trilu (14) does.
          if(c.inputType(0) == Type::bfloat16) c.requireOpset(14, "element type bfloat16");
          Attrs a = c.attrs();
          const Shape& s = c.inputShape(0);
          int64_t n = s[-2], m = s[-1], k = triluK(a.i("k"), s);
          std::vector<char> keep(static_cast<size_t>(n * m), 1);
          for(int64_t i = 0; i < n; ++i) {
            int64_t lo, hi;
            triluZeroRange(a.i("upper") != 0, k, i, m, lo, hi);
            for(int64_t j = lo; j < hi; ++j) keep[static_cast<size_t>(i * m + j)] = 0;
          }
          Tensor mask = TensorBase::create(Shape{n, m}, Type::boolean);
          if(mask->bytes() > 0) std::memcpy(mask->raw(), keep.data(), keep.size());
          c.emit("Where", {c.constant(mask, "mask"), c.input(0), c.scalarConst(0, c.inputType(0), "zero")},
                 {c.output()});
        },
        13);

Expr trilu(Expr x, bool upper, int64_t k) {
  return x->graph()->make(kTrilu, {x}, {{"upper", attr(int64_t(upper ? 1 : 0))}, {"k", attr(k)}});
}

// ---------------------------------------------------------------- einsum

namespace {

// Labels are ints: letters by character code, the dims an ellipsis stands
// for as kEllipsisLabel + k (k-th of the widest ellipsis, right-aligned).
constexpr int kEllipsisLabel = 1000;

struct EinsumTerm {
  std::vector<int> labels;  // one per dim, after expanding the ellipsis
};

// Parses one term ("ab...c") for an operand of rank `rank` (-1 for the
// output, whose ellipsis takes all `ellRank` dims).
EinsumTerm parseTerm(const std::string& t, int rank, int ellRank, const std::string& eq) {
  EinsumTerm r;
  size_t dots = t.find("...");
  ONYX_CHECK(dots == std::string::npos || t.find("...", dots + 3) == std::string::npos, "einsum '", eq,
             "': term '", t, "' has more than one ellipsis");
  int letters = 0;
  for(size_t i = 0; i < t.size(); ++i) {
    if(dots != std::string::npos && i >= dots && i < dots + 3) continue;
    ONYX_CHECK(std::isalpha(static_cast<unsigned char>(t[i])), "einsum '", eq, "': '", t[i],
               "' is not a letter (labels are a-z, A-Z)");
    ++letters;
  }
  int ell = 0;
  if(dots != std::string::npos) ell = rank < 0 ? ellRank : rank - letters;
  ONYX_CHECK(rank < 0 || (dots == std::string::npos ? letters == rank : ell >= 0), "einsum '", eq, "': term '", t,
             "' does not fit an operand of rank ", rank);
  for(size_t i = 0; i < t.size(); ++i) {
    if(dots != std::string::npos && i == dots) {
      for(int k = 0; k < ell; ++k) r.labels.push_back(kEllipsisLabel + ellRank - ell + k);
      i += 2;
      continue;
    }
    r.labels.push_back(static_cast<int>(t[i]));
  }
  return r;
}

// x with its dims reordered so that its labels read `want` (a permutation of
// `have`); x itself when they already do.
Expr permuteLabels(Expr x, const std::vector<int>& have, const std::vector<int>& want) {
  if(have == want) return x;
  std::vector<int> perm;
  for(int l : want) perm.push_back(static_cast<int>(std::find(have.begin(), have.end(), l) - have.begin()));
  return transpose(x, perm);
}

// One operand on its way through the contraction: the expression and the
// label of each of its dims (unique after takeDiagonals).
struct Operand {
  Expr x;
  std::vector<int> labels;
};

// A label repeated within one operand selects the diagonal: the two dims
// move to the end, merge into one of n*n entries, and every (n+1)-th entry
// is kept.
void takeDiagonals(Operand& o, const std::string& eq) {
  for(;;) {
    size_t i = 0, j = 0;
    bool found = false;
    for(i = 0; i < o.labels.size() && !found; ++i)
      for(j = i + 1; j < o.labels.size(); ++j)
        if(o.labels[i] == o.labels[j]) { found = true; break; }
    if(!found) return;
    --i;
    int64_t n = o.x->shape()[static_cast<int>(i)];
    ONYX_CHECK(o.x->shape()[static_cast<int>(j)] == n, "einsum '", eq, "': repeated label has sizes ", n, " and ",
               o.x->shape()[static_cast<int>(j)]);
    std::vector<int> rest, perm;
    Shape::Dims dims;
    for(size_t k = 0; k < o.labels.size(); ++k)
      if(k != i && k != j) {
        rest.push_back(o.labels[k]);
        perm.push_back(static_cast<int>(k));
        dims.push_back(o.x->shape()[static_cast<int>(k)]);
      }
    perm.push_back(static_cast<int>(i));
    perm.push_back(static_cast<int>(j));
    Expr t = transpose(o.x, perm);
    dims.push_back(n * n);
    t = reshape(t, Shape(dims));
    int last = static_cast<int>(dims.size()) - 1;
    o.x = slice(t, last, 0, n * n, n + 1);
    rest.push_back(o.labels[i]);
    o.labels = rest;
  }
}

// Sums out the labels of `o` that are not in `keep`.
void sumOut(Operand& o, const std::vector<int>& keep) {
  std::vector<int> axes, left;
  for(size_t k = 0; k < o.labels.size(); ++k) {
    if(std::find(keep.begin(), keep.end(), o.labels[k]) == keep.end()) axes.push_back(static_cast<int>(k));
    else left.push_back(o.labels[k]);
  }
  if(axes.empty()) return;
  o.x = sum(o.x, axes, false);
  o.labels = left;
}

bool hasLabel(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

// a . b over their shared labels: shared labels in `keep` are batch dims,
// the other shared ones are contracted; the result's labels are batch, then
// a's own, then b's own. One batched matmul [B, Ma, C] . [B, C, Nb].
Operand contract(const Operand& a, const Operand& b, const std::vector<int>& keep) {
  std::vector<int> batch, red, aOwn, bOwn;
  std::map<int, int64_t> size;
  for(size_t k = 0; k < a.labels.size(); ++k) size[a.labels[k]] = a.x->shape()[static_cast<int>(k)];
  for(size_t k = 0; k < b.labels.size(); ++k) size[b.labels[k]] = b.x->shape()[static_cast<int>(k)];
  for(int l : a.labels) {
    if(!hasLabel(b.labels, l)) aOwn.push_back(l);
    else if(hasLabel(keep, l)) batch.push_back(l);
    else red.push_back(l);
  }
  for(int l : b.labels)
    if(!hasLabel(a.labels, l)) bOwn.push_back(l);
  auto prodOf = [&](const std::vector<int>& ls) {
    int64_t p = 1;
    for(int l : ls) p *= size[l];
    return p;
  };
  int64_t nb = prodOf(batch), m = prodOf(aOwn), kk = prodOf(red), n = prodOf(bOwn);
  std::vector<int> aOrder = batch, bOrder = batch;
  aOrder.insert(aOrder.end(), aOwn.begin(), aOwn.end());
  aOrder.insert(aOrder.end(), red.begin(), red.end());
  bOrder.insert(bOrder.end(), red.begin(), red.end());
  bOrder.insert(bOrder.end(), bOwn.begin(), bOwn.end());
  Expr x = reshape(permuteLabels(a.x, a.labels, aOrder), Shape{nb, m, kk});
  Expr y = reshape(permuteLabels(b.x, b.labels, bOrder), Shape{nb, kk, n});
  Operand r;
  r.labels = batch;
  r.labels.insert(r.labels.end(), aOwn.begin(), aOwn.end());
  r.labels.insert(r.labels.end(), bOwn.begin(), bOwn.end());
  Shape::Dims dims;
  for(int l : r.labels) dims.push_back(size[l]);
  r.x = reshape(matmul(x, y), Shape(dims));
  return r;
}

}  // namespace

Expr einsum(const std::string& equation, const std::vector<Expr>& operands) {
  std::string eq;
  for(char ch : equation)
    if(!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  ONYX_CHECK(!operands.empty(), "einsum '", equation, "' needs at least one operand");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for(size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if(q == std::string::npos) break;
    p = q + 1;
  }
  ONYX_CHECK(terms.size() == operands.size(), "einsum '", equation, "' has ", terms.size(), " input terms but ",
             operands.size(), " operands were given");
  // The widest ellipsis sets how many dims "..." stands for in the output.
  int ellRank = 0;
  std::vector<int> counts(256, 0);
  for(size_t i = 0; i < terms.size(); ++i) {
    int rank = operands[i]->shape().rank();
    int letters = 0;
    for(char ch : terms[i])
      if(ch != '.') ++letters;
    if(terms[i].find("...") != std::string::npos) ellRank = std::max(ellRank, rank - letters);
    for(char ch : terms[i])
      if(ch != '.') ++counts[static_cast<unsigned char>(ch)];
  }
  std::vector<Operand> ops;
  for(size_t i = 0; i < terms.size(); ++i) {
    EinsumTerm t = parseTerm(terms[i], operands[i]->shape().rank(), ellRank, equation);
    ops.push_back({operands[i], t.labels});
  }
  std::vector<int> out;
  if(arrow != std::string::npos) {
    out = parseTerm(eq.substr(arrow + 2), -1, ellRank, equation).labels;
  } else {
    // Implicit output: the ellipsis dims, then the labels used once, sorted.
    for(int k = 0; k < ellRank; ++k) out.push_back(kEllipsisLabel + k);
    for(int ch = 0; ch < 256; ++ch)
      if(counts[ch] == 1) out.push_back(ch);
  }
  for(size_t i = 0; i < out.size(); ++i) {
    ONYX_CHECK(std::count(out.begin(), out.end(), out[i]) == 1, "einsum '", equation, "': output label repeated");
    bool somewhere = false;
    for(auto& o : ops) somewhere = somewhere || hasLabel(o.labels, out[i]);
    ONYX_CHECK(somewhere, "einsum '", equation, "': output label not among the inputs");
  }
  // Diagonals, then size-1 dims broadcast against the other operands.
  std::map<int, int64_t> size;
  for(auto& o : ops) {
    takeDiagonals(o, equation);
    for(size_t k = 0; k < o.labels.size(); ++k) {
      int64_t d = o.x->shape()[static_cast<int>(k)];
      auto it = size.find(o.labels[k]);
      if(it == size.end() || it->second == 1) size[o.labels[k]] = d;
      else
        ONYX_CHECK(d == 1 || d == it->second, "einsum '", equation, "': a label has sizes ", d, " and ", it->second);
    }
  }
  for(auto& o : ops) {
    Shape::Dims dims;
    for(int l : o.labels) dims.push_back(size[l]);
    if(Shape(dims) != o.x->shape()) o.x = expand(o.x, Shape(dims));
  }
  // Labels needed after operand i: the output's and those of later operands.
  auto neededAfter = [&](size_t i) {
    std::vector<int> keep = out;
    for(size_t j = i + 1; j < ops.size(); ++j) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  // Labels of one operand only (and not in the output) are summed first.
  for(size_t i = 0; i < ops.size(); ++i) {
    std::vector<int> keep = out;
    for(size_t j = 0; j < ops.size(); ++j)
      if(j != i) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    sumOut(ops[i], keep);
  }
  Operand acc = ops[0];
  for(size_t i = 1; i < ops.size(); ++i) {
    std::vector<int> keep = neededAfter(i);
    // Labels of acc that neither ops[i] nor anything later needs.
    std::vector<int> accKeep = keep;
    accKeep.insert(accKeep.end(), ops[i].labels.begin(), ops[i].labels.end());
    sumOut(acc, accKeep);
    acc = contract(acc, ops[i], keep);
  }
  sumOut(acc, out);
  return permuteLabels(acc.x, acc.labels, out);
}

}  // namespace onyx
