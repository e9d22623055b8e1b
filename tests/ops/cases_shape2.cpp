// Harness cases for src/ops/shape2.cpp: the trilu op and the composites
// (tile, squeeze, unsqueeze, depth_to_space, space_to_depth,
// reverse_sequence), each checked against loops written from the ONNX
// definitions. Composites are listed under the registry op they end in.
#include "ops/harness.h"

#include <gtest/gtest.h>

namespace onyx {
namespace test {
namespace {




// ONNX Trilu by its definition over the last two dims.
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

Ref reverseSequenceRef(const Ref& x, const Idx& lens, size_t batchAxis, size_t timeAxis) {
  Ref y = refLike(x);
  for(int64_t p = 0; p < x.size(); ++p) {
    Idx o = unravel(p, x.shape);
    int64_t l = lens[static_cast<size_t>(o[batchAxis])];
    if(o[timeAxis] < l) o[timeAxis] = l - 1 - o[timeAxis];
    y[p] = x[ravel(o, x.shape)];
  }
  return y;
}

Ref withShape(Ref x, std::vector<int64_t> s) {
  x.shape = std::move(s);
  return x;
}

// ---------------------------------------------------------------- trilu

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

// ---------------------------------------------------------------- reverse_sequence (reshape of gather)

ONYX_OP_CASE({"reshape", "reverse_sequence_time_major", {in({4, 3, 2})},
              [](const std::vector<Expr>& x) { return reverse_sequence(x[0], {4, 0, 2}, 1, 0); },
              [](const std::vector<Ref>& x) { return reverseSequenceRef(x[0], {4, 0, 2}, 1, 0); }});
ONYX_OP_CASE({"reshape", "reverse_sequence_batch_major", {in({3, 5})},
              [](const std::vector<Expr>& x) { return reverse_sequence(x[0], {1, 5, 3}, 0, 1); },
              [](const std::vector<Ref>& x) { return reverseSequenceRef(x[0], {1, 5, 3}, 0, 1); }});

// ---------------------------------------------------------------- errors

Ptr<ExpressionGraph> cpuGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  return g;
}

template <class F>
std::string errorOf(F f) {
  try {
    f();
  } catch(const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShapeOps2, BadArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  EXPECT_NE(errorOf([&] { trilu(g->zeros({3})); }).find("rank 2"), std::string::npos);
  EXPECT_NE(errorOf([&] { tile(x, {2}); }).find("repeats"), std::string::npos);
  EXPECT_NE(errorOf([&] { squeeze(x, {0}); }).find("not 1"), std::string::npos);
  EXPECT_NE(errorOf([&] { unsqueeze(x, {1, 1}); }).find("twice"), std::string::npos);
  EXPECT_NE(errorOf([&] { depth_to_space(g->zeros({1, 6, 2, 2}), 2); }).find("divisible"), std::string::npos);
  EXPECT_NE(errorOf([&] { reverse_sequence(x, {1, 2}, 1, 0); }).find("lengths"), std::string::npos);
  EXPECT_NE(errorOf([&] { reverse_sequence(x, {1, 4, 0}, 1, 0); }).find("out of range"), std::string::npos);
  EXPECT_EQ(tile(x, {1, 1}), x);
}

}  // namespace
}  // namespace test
}  // namespace onyx
