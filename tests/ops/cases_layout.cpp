// Harness cases for src/ops/layout.cpp (transpose, concat, and the
// composites depth_to_space, space_to_depth, listed under the registry op
// they end in), plus checks of its error messages. References index the
// input directly from hand-derived positions (or simple loops over the ONNX
// definitions), never through Onyx.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <vector>

namespace onyx {
namespace test {
namespace {

Ref transposeRef(const Ref& x, Idx perm) {
  if(perm.empty())
    for(int64_t i = static_cast<int64_t>(x.shape.size()) - 1; i >= 0; --i) perm.push_back(i);
  Idx os;
  for(auto p : perm) os.push_back(x.shape[p]);
  return mapRef(x, os, [&](const Idx& o) {
    Idx i(o.size());
    for(size_t k = 0; k < perm.size(); ++k) i[perm[k]] = o[k];
    return i;
  });
}

Ref concatRef(const std::vector<Ref>& xs, size_t axis) {
  Idx os = xs[0].shape;
  os[axis] = 0;
  for(auto& x : xs) os[axis] += x.shape[axis];
  Ref y = refOfShape(os);
  for(int64_t k = 0; k < y.size(); ++k) {
    Idx o = unravel(k, os);
    size_t which = 0;
    while(o[axis] >= xs[which].shape[axis]) o[axis] -= xs[which++].shape[axis];
    y[k] = xs[which][ravel(o, xs[which].shape)];
  }
  return y;
}

// y[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w]
Ref depthToSpaceRef(const Ref& x, int64_t b, bool dcr) {
  int64_t n = x.shape[0], cc = x.shape[1] / (b * b), h = x.shape[2], w = x.shape[3];
  Ref y = refOfShape({n, cc, h * b, w * b});
  for(int64_t in = 0; in < n; ++in)
    for(int64_t c = 0; c < cc; ++c)
      for(int64_t ih = 0; ih < h; ++ih)
        for(int64_t iw = 0; iw < w; ++iw)
          for(int64_t i = 0; i < b; ++i)
            for(int64_t j = 0; j < b; ++j) {
              int64_t ch = dcr ? (i * b + j) * cc + c : c * b * b + i * b + j;
              y[ravel({in, c, ih * b + i, iw * b + j}, y.shape)] = x[ravel({in, ch, ih, iw}, x.shape)];
            }
  return y;
}

// y[n, channel(c, i, j), h, w] = x[n, c, h*b + i, w*b + j]
Ref spaceToDepthRef(const Ref& x, int64_t b, bool dcr) {
  int64_t n = x.shape[0], cc = x.shape[1], h = x.shape[2] / b, w = x.shape[3] / b;
  Ref y = refOfShape({n, cc * b * b, h, w});
  for(int64_t in = 0; in < n; ++in)
    for(int64_t c = 0; c < cc; ++c)
      for(int64_t ih = 0; ih < h; ++ih)
        for(int64_t iw = 0; iw < w; ++iw)
          for(int64_t i = 0; i < b; ++i)
            for(int64_t j = 0; j < b; ++j)
              y[ravel({in, dcr ? (i * b + j) * cc + c : c * b * b + i * b + j, ih, iw}, y.shape)] =
                  x[ravel({in, c, ih * b + i, iw * b + j}, x.shape)];
  return y;
}

// ---------------------------------------------------------------- transpose

ONYX_OP_CASE({"transpose", "perm_201", {in({2, 3, 4})},
              [](const std::vector<Expr>& x) { return transpose(x[0], {2, 0, 1}); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {2, 0, 1}); }});
ONYX_OP_CASE({"transpose", "empty_perm_reverses", {in({2, 3, 4})},
              [](const std::vector<Expr>& x) { return transpose(x[0]); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {2, 1, 0}); }});
ONYX_OP_CASE({"transpose", "matrix", {in({3, 5})}, [](const std::vector<Expr>& x) { return transpose(x[0], {1, 0}); },
              [](const std::vector<Ref>& x) {
                Ref y = refOfShape({5, 3});
                for(int i = 0; i < 3; ++i)
                  for(int j = 0; j < 5; ++j) y[j * 3 + i] = x[0][i * 5 + j];
                return y;
              }});
ONYX_OP_CASE({"transpose", "keeps_inner_dims", {in({2, 3, 4, 5})},
              [](const std::vector<Expr>& x) { return transpose(x[0], {1, 0, 2, 3}); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {1, 0, 2, 3}); }});
ONYX_OP_CASE({"transpose", "int64_data", {ints({3, 4, 2}, -100, 100)},
              [](const std::vector<Expr>& x) { return transpose(x[0], {1, 2, 0}); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {1, 2, 0}); }, false});
ONYX_OP_CASE({"transpose", "bool_data", {bools({2, 3, 2})},
              [](const std::vector<Expr>& x) { return transpose(x[0]); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {}); }, false});

// ---------------------------------------------------------------- concat

ONYX_OP_CASE({"concat", "axis1_three", {in({2, 3}), in({2, 1}), in({2, 2})},
              [](const std::vector<Expr>& x) { return concat(x, 1); },
              [](const std::vector<Ref>& x) { return concatRef(x, 1); }});
ONYX_OP_CASE({"concat", "axis_minus2", {in({1, 3}), in({2, 3})},
              [](const std::vector<Expr>& x) { return concat(x, -2); },
              [](const std::vector<Ref>& x) { return concatRef(x, 0); }});
ONYX_OP_CASE({"concat", "middle_axis_3d", {in({2, 2, 3}), in({2, 1, 3})},
              [](const std::vector<Expr>& x) { return concat(x, 1); },
              [](const std::vector<Ref>& x) { return concatRef(x, 1); }});
ONYX_OP_CASE({"concat", "of_split_is_identity", {in({3, 2})},
              [](const std::vector<Expr>& x) { return concat(split(x[0], 0, {2, 1}), 0); },
              [](const std::vector<Ref>& x) { return x[0]; }});
ONYX_OP_CASE({"concat", "int64_data", {ints({2, 2}, -50, 50), ints({2, 3}, -50, 50)},
              [](const std::vector<Expr>& x) { return concat(x, 1); },
              [](const std::vector<Ref>& x) { return concatRef(x, 1); }, false});
ONYX_OP_CASE({"concat", "bool_data", {bools({2, 1}), bools({2, 2}), bools({2, 1})},
              [](const std::vector<Expr>& x) { return concat(x, -1); },
              [](const std::vector<Ref>& x) { return concatRef(x, 1); }, false});

// ---------------------------------------------------------------- depth_to_space, space_to_depth (reshape)

ONYX_OP_CASE({"reshape", "depth_to_space_dcr", {in({2, 8, 2, 3})},
              [](const std::vector<Expr>& x) { return depth_to_space(x[0], 2, "DCR"); },
              [](const std::vector<Ref>& x) { return depthToSpaceRef(x[0], 2, true); }});
ONYX_OP_CASE({"reshape", "depth_to_space_crd", {in({1, 18, 2, 2})},
              [](const std::vector<Expr>& x) { return depth_to_space(x[0], 3, "CRD"); },
              [](const std::vector<Ref>& x) { return depthToSpaceRef(x[0], 3, false); }});
ONYX_OP_CASE({"reshape", "space_to_depth", {in({2, 3, 4, 6})},
              [](const std::vector<Expr>& x) { return space_to_depth(x[0], 2); },
              [](const std::vector<Ref>& x) { return spaceToDepthRef(x[0], 2, true); }});
ONYX_OP_CASE({"reshape", "space_to_depth_crd", {in({1, 2, 6, 3})},
              [](const std::vector<Expr>& x) { return space_to_depth(x[0], 3, "CRD"); },
              [](const std::vector<Ref>& x) { return spaceToDepthRef(x[0], 3, false); }});

// ---------------------------------------------------------------- big enough to run on several threads

ONYX_OP_CASE({"transpose", "large_threaded", {in({64, 40, 16})},
              [](const std::vector<Expr>& x) { return transpose(x[0], {2, 0, 1}); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {2, 0, 1}); }, false});
// Several 32x32 tiles with ragged edges, split across threads.
ONYX_OP_CASE({"transpose", "large_tiled_ragged", {in({5, 100, 70})},
              [](const std::vector<Expr>& x) { return transpose(x[0], {0, 2, 1}); },
              [](const std::vector<Ref>& x) { return transposeRef(x[0], {0, 2, 1}); }, false});
ONYX_OP_CASE({"concat", "large_threaded", {in({40, 500}), in({40, 400})},
              [](const std::vector<Expr>& x) { return concat(x, 1); },
              [](const std::vector<Ref>& x) { return concatRef(x, 1); }, false});

// ---------------------------------------------------------------- errors

TEST(LayoutOps, TransposeRejectsBadPerm) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  std::string msg = errorOf([&] { transpose(x, {0, 0}); });
  EXPECT_NE(msg.find("perm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  EXPECT_NE(errorOf([&] { transpose(x, {0, 1, 2}); }), "");
  EXPECT_NE(errorOf([&] { transpose(x, {-1, 0}); }), "");
}

TEST(LayoutOps, BadConcatAndDepthToSpaceArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  std::string msg = errorOf([&] { concat({x, g->zeros({3, 3})}, 1); });
  EXPECT_NE(msg.find("3x3"), std::string::npos) << msg;
  EXPECT_NE(errorOf([&] { concat({x, g->zeros({2, 3}, Type::int64)}, 0); }), "");
  EXPECT_NE(errorOf([&] { depth_to_space(g->zeros({1, 6, 2, 2}), 2); }).find("divisible"), std::string::npos);
}

TEST(LayoutOps, TrivialFormsReturnTheInput) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  EXPECT_EQ(transpose(x, {0, 1}), x);
  EXPECT_EQ(concat({x}, 0), x);
  EXPECT_NE(transpose(x), x);
}

}  // namespace
}  // namespace test
}  // namespace onyx
