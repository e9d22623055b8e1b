// Harness cases for src/ops/linalg.cpp. The reference follows numpy.matmul
// with plain loops over doubles.
#include <algorithm>

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

}  // namespace
}  // namespace test
}  // namespace onyx
