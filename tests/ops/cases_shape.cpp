// Harness cases for src/ops/shape.cpp (reshape, expand, flatten, and the
// composites tile, squeeze, unsqueeze, listed under the registry op they end
// in), plus checks of its error messages. References index the input
// directly from hand-derived positions (or simple loops over the ONNX
// definitions), never through Onyx.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <vector>

namespace onyx {
namespace test {
namespace {

Ref tileRef(const Ref& x, const Idx& reps) {
  Idx os;
  for(size_t a = 0; a < reps.size(); ++a) os.push_back(x.shape[a] * reps[a]);
  Ref y = refOfShape(os);
  for(int64_t p = 0; p < y.size(); ++p) {
    Idx o = unravel(p, os);
    for(size_t a = 0; a < o.size(); ++a) o[a] %= x.shape[a];
    y[p] = x[ravel(o, x.shape)];
  }
  return y;
}

// ---------------------------------------------------------------- reshape, expand, flatten

ONYX_OP_CASE({"reshape", "infer_dim", {in({2, 3, 4})},
              [](const std::vector<Expr>& x) { return reshape(x[0], std::vector<int64_t>{4, -1}); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {4, 6}); }});
ONYX_OP_CASE({"expand", "row_to_matrix", {in({1, 3})},
              [](const std::vector<Expr>& x) { return expand(x[0], Shape{2, 4, 3}); },
              [](const std::vector<Ref>& x) {
                Ref y = refOfShape({2, 4, 3});
                for(int64_t i = 0; i < y.size(); ++i) y[i] = x[0][i % 3];
                return y;
              }});
ONYX_OP_CASE({"flatten", "axis2", {in({2, 3, 4})}, [](const std::vector<Expr>& x) { return flatten(x[0], 2); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {6, 4}); }});
ONYX_OP_CASE({"flatten", "axis0", {in({2, 3, 2})}, [](const std::vector<Expr>& x) { return flatten(x[0], 0); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {1, 12}); }});
ONYX_OP_CASE({"flatten", "axis_minus1", {in({2, 3, 2})}, [](const std::vector<Expr>& x) { return flatten(x[0], -1); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {6, 2}); }});
ONYX_OP_CASE({"flatten", "axis_rank", {in({2, 3})}, [](const std::vector<Expr>& x) { return flatten(x[0], 2); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {6, 1}); }});

// ---------------------------------------------------------------- tile (ends in reshape of expand)

ONYX_OP_CASE({"expand", "tile_2d", {in({2, 3})}, [](const std::vector<Expr>& x) { return tile(x[0], {3, 2}); },
              [](const std::vector<Ref>& x) { return tileRef(x[0], {3, 2}); }});
ONYX_OP_CASE({"expand", "tile_3d_some_ones", {in({2, 1, 3})},
              [](const std::vector<Expr>& x) { return tile(x[0], {1, 4, 2}); },
              [](const std::vector<Ref>& x) { return tileRef(x[0], {1, 4, 2}); }});
ONYX_OP_CASE({"expand", "tile_int64", {ints({3, 2}, -9, 9)},
              [](const std::vector<Expr>& x) { return tile(x[0], {2, 3}); },
              [](const std::vector<Ref>& x) { return tileRef(x[0], {2, 3}); }, false});
ONYX_OP_CASE({"expand", "tile_zero_repeat", {in({2, 3})}, [](const std::vector<Expr>& x) { return tile(x[0], {0, 2}); },
              [](const std::vector<Ref>& x) { return tileRef(x[0], {0, 2}); }, false});

// ---------------------------------------------------------------- squeeze, unsqueeze (reshape)

ONYX_OP_CASE({"reshape", "squeeze_axes", {in({1, 3, 1, 2})},
              [](const std::vector<Expr>& x) { return squeeze(x[0], {0, -2}); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {3, 2}); }});
ONYX_OP_CASE({"reshape", "squeeze_all_ones", {in({1, 2, 1})}, [](const std::vector<Expr>& x) { return squeeze(x[0]); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {2}); }});
ONYX_OP_CASE({"reshape", "unsqueeze_unsorted_negative", {in({3, 2})},
              [](const std::vector<Expr>& x) { return unsqueeze(x[0], {-1, 0, 2}); },
              [](const std::vector<Ref>& x) { return withShape(x[0], {1, 3, 1, 2, 1}); }});

// ---------------------------------------------------------------- errors

TEST(ShapeOps, BadArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  EXPECT_NE(errorOf([&] { flatten(x, 3); }), "");
  EXPECT_NE(errorOf([&] { tile(x, {2}); }).find("repeats"), std::string::npos);
  EXPECT_NE(errorOf([&] { squeeze(x, {0}); }).find("not 1"), std::string::npos);
  EXPECT_NE(errorOf([&] { unsqueeze(x, {1, 1}); }).find("twice"), std::string::npos);
  EXPECT_EQ(tile(x, {1, 1}), x);
}

}  // namespace
}  // namespace test
}  // namespace onyx
