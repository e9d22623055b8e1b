// Harness cases for src/ops/linalg.cpp. The references follow numpy.matmul
// and the ONNX definitions with plain loops over doubles.
#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// Swaps the last two dims (rank >= 2).
Ref refTranspose(const Ref& x) {
  size_t r = x.shape.size();
  int64_t rows = x.shape[r - 2], cols = x.shape[r - 1], mats = x.size() / std::max<int64_t>(rows * cols, 1);
  Ref y = x;
  std::swap(y.shape[r - 2], y.shape[r - 1]);
  for(int64_t m = 0; m < mats; ++m)
    for(int64_t i = 0; i < rows; ++i)
      for(int64_t j = 0; j < cols; ++j) y[m * rows * cols + j * rows + i] = x[m * rows * cols + i * cols + j];
  return y;
}

// numpy.matmul(op(a), op(b)) * alpha.
Ref refMatmul(Ref a, Ref b, bool transA = false, bool transB = false, double alpha = 1) {
  bool aVec = a.shape.size() == 1, bVec = b.shape.size() == 1;
  if(aVec) a.shape = {1, a.shape[0]};
  else if(transA) a = refTranspose(a);
  if(bVec) b.shape = {b.shape[0], 1};
  else if(transB) b = refTranspose(b);
  size_t ra = a.shape.size() - 2, rb = b.shape.size() - 2, r = std::max(ra, rb);
  int64_t M = a.shape[ra], K = a.shape[ra + 1], N = b.shape[rb + 1];
  std::vector<int64_t> batch(r), ab(r, 1), bb(r, 1);
  for(size_t i = 0; i < ra; ++i) ab[r - ra + i] = a.shape[i];
  for(size_t i = 0; i < rb; ++i) bb[r - rb + i] = b.shape[i];
  for(size_t i = 0; i < r; ++i) batch[i] = std::max(ab[i], bb[i]);
  std::vector<int64_t> outShape = batch;
  outShape.push_back(M);
  outShape.push_back(N);
  Ref y = refOfShape(outShape);
  int64_t nb = 1;
  for(auto d : batch) nb *= d;
  for(int64_t o = 0; o < nb; ++o) {
    // Index of this batch in a's and b's own batch dims (1 where broadcast).
    int64_t rem = o, ai = 0, bi = 0, as = 1, bs = 1;
    for(int i = static_cast<int>(r) - 1; i >= 0; --i) {
      int64_t idx = rem % batch[i];
      rem /= batch[i];
      ai += (ab[i] == 1 ? 0 : idx) * as;
      bi += (bb[i] == 1 ? 0 : idx) * bs;
      as *= ab[i];
      bs *= bb[i];
    }
    for(int64_t i = 0; i < M; ++i)
      for(int64_t j = 0; j < N; ++j) {
        double s = 0;
        for(int64_t k = 0; k < K; ++k) s += a[ai * M * K + i * K + k] * b[bi * K * N + k * N + j];
        y[o * M * N + i * N + j] = alpha * s;
      }
  }
  std::vector<int64_t> s = batch;
  if(!aVec) s.push_back(M);
  if(!bVec) s.push_back(N);
  y.shape = s;
  return y;
}

Ref refAffine(Rs x, bool transA = false, bool transB = false, double alpha = 1) {
  Ref p = refMatmul(x[0], x[1], transA, transB, alpha);
  return refBroadcast({p, x[2]}, [](const std::vector<double>& v) { return v[0] + v[1]; });
}

// ---- matmul
ONYX_OP_CASE({"matmul", "2d", {in({3, 4}), in({4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "vec_mat", {in({4}), in({4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "mat_vec", {in({3, 4}), in({4})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "vec_vec", {in({4}), in({4})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "batched_3d_2d", {in({2, 3, 4}), in({4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "batched_2d_3d", {in({3, 4}), in({2, 4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "batched_3d_3d", {in({2, 3, 4}), in({2, 4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "broadcast_batch", {in({2, 1, 3, 4}), in({3, 4, 5})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "vec_batched", {in({4}), in({2, 4, 3})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "batched_vec", {in({2, 3, 4}), in({4})},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); }});
ONYX_OP_CASE({"matmul", "int64", {ints({2, 3, 4}, -5, 5), ints({4, 2}, -5, 5)},
              [](Xs x) { return matmul(x[0], x[1]); },
              [](Rs x) { return refMatmul(x[0], x[1]); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"matmul", "dot_transA", {in({4, 3}), in({4, 5})},
              [](Xs x) { return dot(x[0], x[1], true, false); },
              [](Rs x) { return refMatmul(x[0], x[1], true, false); }});
ONYX_OP_CASE({"matmul", "dot_transB", {in({3, 4}), in({5, 4})},
              [](Xs x) { return dot(x[0], x[1], false, true); },
              [](Rs x) { return refMatmul(x[0], x[1], false, true); }});
ONYX_OP_CASE({"matmul", "dot_transA_transB_scale", {in({4, 3}), in({5, 4})},
              [](Xs x) { return dot(x[0], x[1], true, true, 0.5f); },
              [](Rs x) { return refMatmul(x[0], x[1], true, true, 0.5); }});
ONYX_OP_CASE({"matmul", "dot_batched_transA", {in({2, 4, 3}), in({4, 5})},
              [](Xs x) { return dot(x[0], x[1], true, false); },
              [](Rs x) { return refMatmul(x[0], x[1], true, false); }});
ONYX_OP_CASE({"matmul", "dot_broadcast_transB", {in({2, 1, 3, 4}), in({3, 5, 4})},
              [](Xs x) { return dot(x[0], x[1], false, true, -2.f); },
              [](Rs x) { return refMatmul(x[0], x[1], false, true, -2.0); }});
ONYX_OP_CASE({"matmul", "dot_vec_transB", {in({4}), in({5, 4})},
              [](Xs x) { return dot(x[0], x[1], true, true); },
              [](Rs x) { return refMatmul(x[0], x[1], true, true); }});

// ---- affine
ONYX_OP_CASE({"affine", "2d_bias_row", {in({3, 4}), in({4, 5}), in({5})},
              [](Xs x) { return affine(x[0], x[1], x[2]); },
              [](Rs x) { return refAffine(x); }});
ONYX_OP_CASE({"affine", "3d_bias_1xn", {in({2, 3, 4}), in({4, 5}), in({1, 5})},
              [](Xs x) { return affine(x[0], x[1], x[2]); },
              [](Rs x) { return refAffine(x); }});
ONYX_OP_CASE({"affine", "bias_column", {in({3, 4}), in({4, 5}), in({3, 1})},
              [](Xs x) { return affine(x[0], x[1], x[2]); },
              [](Rs x) { return refAffine(x); }});
ONYX_OP_CASE({"affine", "bias_scalar", {in({3, 4}), in({4, 5}), in({})},
              [](Xs x) { return affine(x[0], x[1], x[2]); },
              [](Rs x) { return refAffine(x); }});
ONYX_OP_CASE({"affine", "transA_transB_scale", {in({4, 3}), in({5, 4}), in({5})},
              [](Xs x) { return affine(x[0], x[1], x[2], true, true, 0.25f); },
              [](Rs x) { return refAffine(x, true, true, 0.25); }});
ONYX_OP_CASE({"affine", "batched_transA", {in({2, 4, 3}), in({4, 5}), in({5})},
              [](Xs x) { return affine(x[0], x[1], x[2], true, false); },
              [](Rs x) { return refAffine(x, true, false); }});
ONYX_OP_CASE({"affine", "vec_x", {in({4}), in({5, 4}), in({5})},
              [](Xs x) { return affine(x[0], x[1], x[2], false, true, 2.f); },
              [](Rs x) { return refAffine(x, false, true, 2.0); }});

// ---- einsum (a composite: transpose/reshape/slice/sum around one batched
// matmul per extra operand). The reference sums over every assignment of
// the labels, brute force.

// Labels of one term for an operand of rank `rank`; "..." becomes labels
// 1000 + k, right-aligned to the widest ellipsis `ell`.
std::vector<int> refLabels(const std::string& t, int rank, int ell) {
  std::vector<int> r;
  int letters = 0;
  for(char ch : t)
    if(ch != '.') ++letters;
  for(size_t i = 0; i < t.size(); ++i) {
    if(t[i] == '.') {
      int n = rank < 0 ? ell : rank - letters;
      for(int k = 0; k < n; ++k) r.push_back(1000 + ell - n + k);
      i += 2;
    } else {
      r.push_back(t[i]);
    }
  }
  return r;
}

Ref refEinsum(const std::string& equation, const std::vector<Ref>& xs) {
  std::string eq;
  for(char ch : equation)
    if(ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow);
  for(size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? q : q - p));
    if(q == std::string::npos) break;
    p = q + 1;
  }
  int ell = 0;
  for(size_t i = 0; i < terms.size(); ++i) {
    int letters = 0;
    for(char ch : terms[i])
      if(ch != '.') ++letters;
    if(terms[i].find('.') != std::string::npos) ell = std::max(ell, static_cast<int>(xs[i].shape.size()) - letters);
  }
  std::vector<std::vector<int>> labels;
  std::map<int, int64_t> size;
  std::map<int, int> uses;
  for(size_t i = 0; i < terms.size(); ++i) {
    labels.push_back(refLabels(terms[i], static_cast<int>(xs[i].shape.size()), ell));
    for(size_t k = 0; k < labels[i].size(); ++k) {
      size[labels[i][k]] = std::max(size[labels[i][k]], xs[i].shape[k]);
      ++uses[labels[i][k]];
    }
  }
  std::vector<int> out;
  if(arrow != std::string::npos) {
    out = refLabels(eq.substr(arrow + 2), -1, ell);
  } else {
    for(auto& kv : uses)  // map order: ellipsis labels (>= 1000) after letters
      if(kv.first < 1000 && kv.second == 1) out.push_back(kv.first);
    std::vector<int> e;
    for(int k = 0; k < ell; ++k) e.push_back(1000 + k);
    out.insert(out.begin(), e.begin(), e.end());
  }
  std::vector<int> all;
  for(auto& kv : size) all.push_back(kv.first);
  std::vector<int64_t> outShape;
  for(int l : out) outShape.push_back(size[l]);
  Ref y = refOfShape(outShape);
  std::map<int, int64_t> v;
  for(int l : all) v[l] = 0;
  for(;;) {
    double p = 1;
    for(size_t i = 0; i < xs.size(); ++i) {
      int64_t off = 0;
      for(size_t k = 0; k < labels[i].size(); ++k)
        off = off * xs[i].shape[k] + (xs[i].shape[k] == 1 ? 0 : v[labels[i][k]]);
      p *= xs[i][off];
    }
    int64_t o = 0;
    for(size_t k = 0; k < out.size(); ++k) o = o * outShape[k] + v[out[k]];
    y[o] += p;
    size_t d = 0;
    for(; d < all.size(); ++d) {
      if(++v[all[d]] < size[all[d]]) break;
      v[all[d]] = 0;
    }
    if(d == all.size()) break;
  }
  return y;
}

#define EINSUM_CASE(NAME, EQ, ...)                                                        \
  ONYX_OP_CASE({"matmul", "einsum_" NAME, {__VA_ARGS__},                                  \
                [](Xs x) { return einsum(EQ, x); }, [](Rs x) { return refEinsum(EQ, x); }})

EINSUM_CASE("batch_matmul", "bij,bjk->bik", in({2, 3, 4}), in({2, 4, 5}));
EINSUM_CASE("inner_implicit", "i,i", in({5}), in({5}));
EINSUM_CASE("outer", "i,j->ij", in({3}), in({4}));
EINSUM_CASE("chain3", "ij,jk,kl->il", in({2, 3}), in({3, 4}), in({4, 2}));
// Implicit output: labels used once, sorted ("ac"), so the result is transposed.
EINSUM_CASE("implicit_sorted", "cb,ba", in({3, 4}), in({4, 2}));
// Repeated labels: the trace (summed before the product) and a diagonal.
EINSUM_CASE("trace_times_matrix", "ii,jk->jk", in({3, 3}), in({2, 4}));
EINSUM_CASE("batch_diagonal_times_vector", "...ii,...i->...i", in({2, 3, 3}), in({2, 3}));
EINSUM_CASE("spaces_and_contract_all", " ij , ij -> ", in({2, 3}), in({2, 3}));
// Ellipsis batch dims broadcast: [2, 1] with [3] gives [2, 3].
EINSUM_CASE("ellipsis_broadcast", "...ij,...jk->...ik", in({2, 1, 3, 4}), in({3, 4, 5}));
EINSUM_CASE("sum_and_transpose", "bij,bj->ji", in({2, 3, 4}), in({2, 4}));

// ---- det / inverse. The references use cofactor expansion (adjugate / det),
// independent of the kernels' pivoted elimination. The matrices are kept
// well-conditioned: random entries plus a dominant diagonal.

double refDet(const std::vector<double>& a, int64_t n) {
  if(n == 0) return 1;
  if(n == 1) return a[0];
  double d = 0;
  for(int64_t j = 0; j < n; ++j) {
    std::vector<double> minor;
    for(int64_t r = 1; r < n; ++r)
      for(int64_t k = 0; k < n; ++k)
        if(k != j) minor.push_back(a[static_cast<size_t>(r * n + k)]);
    d += (j % 2 == 0 ? 1 : -1) * a[static_cast<size_t>(j)] * refDet(minor, n - 1);
  }
  return d;
}

// Applies f(matrix, n) -> values to each matrix in the last two dims.
Ref refPerMatrix(const Ref& x, bool keepMatrixDims,
                 const std::function<std::vector<double>(const std::vector<double>&, int64_t)>& f) {
  size_t r = x.shape.size();
  int64_t n = x.shape[r - 1];
  std::vector<int64_t> batch(x.shape.begin(), x.shape.end() - 2);
  Ref y = refOfShape(keepMatrixDims ? x.shape : batch);
  int64_t mats = 1;
  for(auto d : batch) mats *= d;
  int64_t per = keepMatrixDims ? n * n : 1;
  for(int64_t m = 0; m < mats; ++m) {
    std::vector<double> a(x.v.begin() + m * n * n, x.v.begin() + (m + 1) * n * n);
    std::vector<double> v = f(a, n);
    for(int64_t i = 0; i < per; ++i) y[m * per + i] = v[static_cast<size_t>(i)];
  }
  return y;
}

std::vector<double> refInverse(const std::vector<double>& a, int64_t n) {
  double d = refDet(a, n);
  std::vector<double> inv(static_cast<size_t>(n * n));
  for(int64_t i = 0; i < n; ++i)
    for(int64_t j = 0; j < n; ++j) {
      std::vector<double> minor;
      for(int64_t r = 0; r < n; ++r)
        for(int64_t k = 0; k < n; ++k)
          if(r != i && k != j) minor.push_back(a[static_cast<size_t>(r * n + k)]);
      // inv[j][i] = cofactor(i, j) / det
      inv[static_cast<size_t>(j * n + i)] = ((i + j) % 2 == 0 ? 1 : -1) * refDet(minor, n - 1) / d;
    }
  return inv;
}

// x + 3 I on each matrix (both in the graph and in the reference).
Expr plusDiag(Expr x, int64_t n) {
  std::vector<double> eye(static_cast<size_t>(n * n), 0.0);
  for(int64_t i = 0; i < n; ++i) eye[static_cast<size_t>(i * n + i)] = 3;
  return x + x->graph()->constant(Shape{n, n}, inits::fromVector(eye), x->value_type());
}
Ref refPlusDiag(Ref x) {
  int64_t n = x.shape.back();
  for(int64_t i = 0; i < x.size(); ++i)
    if((i % (n * n)) % (n + 1) == 0) x[i] += 3;
  return x;
}

ONYX_OP_CASE({"det", "3x3", {in({3, 3})},
              [](Xs x) { return det(plusDiag(x[0], 3)); },
              [](Rs x) {
                return refPerMatrix(refPlusDiag(x[0]), false,
                                    [](const std::vector<double>& a, int64_t n) { return std::vector<double>{refDet(a, n)}; });
              }});
ONYX_OP_CASE({"det", "batched_4x4", {in({2, 3, 4, 4})},
              [](Xs x) { return det(plusDiag(x[0], 4)); },
              [](Rs x) {
                return refPerMatrix(refPlusDiag(x[0]), false,
                                    [](const std::vector<double>& a, int64_t n) { return std::vector<double>{refDet(a, n)}; });
              }});
// Needs a row swap: a zero leading entry.
ONYX_OP_CASE({"det", "pivoting", {values({3, 3}, {0.0, 2.0, 1.0, 1.0, -1.0, 0.5, 3.0, 0.25, -2.0})},
              [](Xs x) { return det(x[0]); },
              [](Rs x) {
                return refPerMatrix(x[0], false,
                                    [](const std::vector<double>& a, int64_t n) { return std::vector<double>{refDet(a, n)}; });
              }});
ONYX_OP_CASE({"det", "singular_forward", {values({2, 2}, {1.0, 2.0, 2.0, 4.0})},
              [](Xs x) { return det(x[0]); },
              [](Rs) { return refOfShape({}); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"inverse", "3x3", {in({3, 3})},
              [](Xs x) { return inverse(plusDiag(x[0], 3)); },
              [](Rs x) { return refPerMatrix(refPlusDiag(x[0]), true, refInverse); }});
ONYX_OP_CASE({"inverse", "batched_pivoting", {values({2, 2, 2}, {0.0, 1.0, 2.0, 0.5, 1.5, -1.0, 0.25, 2.0})},
              [](Xs x) { return inverse(x[0]); },
              [](Rs x) { return refPerMatrix(x[0], true, refInverse); }});

// ---- trilu (ONNX Trilu by its definition over the last two dims)

Ref triluRef(const Ref& x, bool upper, int64_t k) {
  Ref y = refLike(x);
  size_t r = x.shape.size();
  for(int64_t p = 0; p < x.size(); ++p) {
    Idx o = unravel(p, x.shape);
    int64_t i = o[r - 2], j = o[r - 1];
    bool keep = upper ? j - i >= k : j - i <= k;
    y[p] = keep ? x[p] : 0;
  }
  return y;
}

ONYX_OP_CASE({"trilu", "upper_batched", {in({2, 3, 4})}, [](const std::vector<Expr>& x) { return trilu(x[0]); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], true, 0); }});
ONYX_OP_CASE({"trilu", "lower_k_minus1", {in({4, 3})},
              [](const std::vector<Expr>& x) { return trilu(x[0], false, -1); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], false, -1); }});
ONYX_OP_CASE({"trilu", "upper_k2_wide", {in({3, 5})}, [](const std::vector<Expr>& x) { return trilu(x[0], true, 2); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], true, 2); }});
ONYX_OP_CASE({"trilu", "lower_k_beyond_all", {in({3, 4})},
              [](const std::vector<Expr>& x) { return trilu(x[0], false, 7); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], false, 7); }});
ONYX_OP_CASE({"trilu", "upper_k_below_all_keeps_none_zeroed", {in({3, 2})},
              [](const std::vector<Expr>& x) { return trilu(x[0], true, -5); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], true, -5); }});
ONYX_OP_CASE({"trilu", "int64_lower", {ints({2, 4, 4}, -9, 9)},
              [](const std::vector<Expr>& x) { return trilu(x[0], false, 1); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], false, 1); }, false});
ONYX_OP_CASE({"trilu", "bool_upper", {bools({3, 3})}, [](const std::vector<Expr>& x) { return trilu(x[0], true, 1); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], true, 1); }, false});
ONYX_OP_CASE({"trilu", "large_threaded", {in({8, 90, 70})},
              [](const std::vector<Expr>& x) { return trilu(x[0], false, -3); },
              [](const std::vector<Ref>& x) { return triluRef(x[0], false, -3); }, false});

TEST(Linalg, TriluNeedsMatrices) {
  auto g = cpuGraph();
  EXPECT_NE(errorOf([&] { trilu(g->zeros({3})); }).find("rank 2"), std::string::npos);
}

}  // namespace
}  // namespace test
}  // namespace onyx
