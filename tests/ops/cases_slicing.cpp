// Harness cases for src/ops/slicing.cpp (slice, slice_scatter, gather,
// scatter_add, pad, and the composites split and reverse_sequence, listed
// under the registry op they end in), plus checks of its error messages.
// References index the input directly from hand-derived positions (or simple
// loops over the ONNX definitions), never through Onyx.
#include "ops/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace onyx {
namespace test {
namespace {

// Selection by explicit per-axis position lists (written out by hand from
// the ONNX rules in each case).
Ref pickRef(const Ref& x, const std::vector<Idx>& pos) {
  Idx os;
  for(auto& p : pos) os.push_back(static_cast<int64_t>(p.size()));
  return mapRef(x, os, [&](const Idx& o) {
    Idx i(o.size());
    for(size_t k = 0; k < o.size(); ++k) i[k] = pos[k][o[k]];
    return i;
  });
}

// Zeros of `shape` with y[pos[0][i], pos[1][j], ...] = x[i, j, ...].
Ref placeRef(const Ref& x, const Idx& shape, const std::vector<Idx>& pos) {
  Ref y = refOfShape(shape);
  for(int64_t k = 0; k < x.size(); ++k) {
    Idx i = unravel(k, x.shape), o(i.size());
    for(size_t a = 0; a < i.size(); ++a) o[a] = pos[a][i[a]];
    y[ravel(o, shape)] = x[k];
  }
  return y;
}

// ONNX Gather written as its definition: out index = x's leading index,
// then the index tensor's index, then x's trailing index.
Ref gatherRef(const Ref& x, size_t axis, const Ref& ind) {
  Idx os(x.shape.begin(), x.shape.begin() + axis);
  os.insert(os.end(), ind.shape.begin(), ind.shape.end());
  os.insert(os.end(), x.shape.begin() + axis + 1, x.shape.end());
  size_t q = ind.shape.size();
  return mapRef(x, os, [&](const Idx& o) {
    Idx i(o.begin(), o.begin() + axis);
    Idx j(o.begin() + axis, o.begin() + axis + q);
    int64_t v = static_cast<int64_t>(ind[ravel(j, ind.shape)]);
    i.push_back(v < 0 ? v + x.shape[axis] : v);
    i.insert(i.end(), o.begin() + axis + q, o.end());
    return i;
  });
}

Ref scatterAddRef(const Ref& u, size_t axis, const Ref& ind, int64_t dim) {
  size_t q = ind.shape.size();
  Idx os(u.shape.begin(), u.shape.begin() + axis);
  os.push_back(dim);
  os.insert(os.end(), u.shape.begin() + axis + q, u.shape.end());
  Ref y = refOfShape(os);
  for(int64_t k = 0; k < u.size(); ++k) {
    Idx i = unravel(k, u.shape);
    Idx j(i.begin() + axis, i.begin() + axis + q);
    int64_t v = static_cast<int64_t>(ind[ravel(j, ind.shape)]);
    Idx o(i.begin(), i.begin() + axis);
    o.push_back(v < 0 ? v + dim : v);
    o.insert(o.end(), i.begin() + axis + q, i.end());
    y[ravel(o, os)] += u[k];
  }
  return y;
}

// Pad by its definition: crop the negative pads, then extend each axis; the
// reflect rule bounces off both ends (numpy's "reflect").
Ref padRef(const Ref& x, const Idx& pads, const std::string& mode, double value) {
  size_t r = x.shape.size();
  Idx os, lo, m, pb;
  for(size_t a = 0; a < r; ++a) {
    int64_t b = pads[a], e = pads[a + r];
    lo.push_back(b < 0 ? -b : 0);
    m.push_back(x.shape[a] - (b < 0 ? -b : 0) - (e < 0 ? -e : 0));
    pb.push_back(b > 0 ? b : 0);
    os.push_back(m.back() + (b > 0 ? b : 0) + (e > 0 ? e : 0));
  }
  Ref y = refOfShape(os);
  for(int64_t k = 0; k < y.size(); ++k) {
    Idx o = unravel(k, os), i(r);
    bool fill = false;
    for(size_t a = 0; a < r; ++a) {
      int64_t t = o[a] - pb[a], n = m[a];
      if(mode == "constant") {
        fill = fill || t < 0 || t >= n;
      } else if(mode == "edge") {
        t = std::min(std::max<int64_t>(t, 0), n - 1);
      } else if(mode == "wrap") {
        while(t < 0) t += n;
        while(t >= n) t -= n;
      } else {
        while(t < 0 || t >= n) {
          if(t < 0) t = -t;
          if(t >= n) t = 2 * (n - 1) - t;
        }
      }
      i[a] = lo[a] + t;
    }
    y[k] = fill ? value : x[ravel(i, x.shape)];
  }
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

// ---------------------------------------------------------------- slice, split, slice_scatter

// Axis 0: [1, 3) -> 1, 2. Axis 2 (dim 6): start -1 -> 5, end -100 clamps to
// "before 0", step -2 -> 5, 3, 1.
ONYX_OP_CASE({"slice", "two_axes_negative_step", {in({4, 5, 6})},
              [](const std::vector<Expr>& x) { return slice(x[0], {1, -1}, {3, -100}, {0, 2}, {1, -2}); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{1, 2}, {0, 1, 2, 3, 4}, {5, 3, 1}}); }});
// End 100 clamps to the dim (5).
ONYX_OP_CASE({"slice", "end_clamped", {in({3, 5})}, [](const std::vector<Expr>& x) { return slice(x[0], 1, 1, 100); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{0, 1, 2}, {1, 2, 3, 4}}); }});
// Axis -1, start -5 -> 1, step 2 -> 1, 3, 5.
ONYX_OP_CASE({"slice", "negative_axis_step2", {in({2, 6})},
              [](const std::vector<Expr>& x) { return slice(x[0], -1, -5, 6, 2); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{0, 1}, {1, 3, 5}}); }});
// Default axes (0, 1) and steps; INT64_MIN end with step -1 walks to the start.
ONYX_OP_CASE({"slice", "default_axes_reverse_all", {in({3, 4})},
              [](const std::vector<Expr>& x) {
                return slice(x[0], {-1, 2}, {std::numeric_limits<int64_t>::min(), 0}, {}, {-1, -1});
              },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{2, 1, 0}, {2, 1}}); }});
ONYX_OP_CASE({"slice", "empty_result", {in({4, 2})}, [](const std::vector<Expr>& x) { return slice(x[0], 0, 3, 1); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{}, {0, 1}}); }});
ONYX_OP_CASE({"slice", "split_middle_piece", {in({2, 6})},
              [](const std::vector<Expr>& x) { return split(x[0], 1, {1, 2, 3})[1]; },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{0, 1}, {1, 2}}); }});
ONYX_OP_CASE({"slice", "int64_data", {ints({5, 3}, -9, 9)},
              [](const std::vector<Expr>& x) { return slice(x[0], 0, 4, 0, -3); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{4, 1}, {0, 1, 2}}); }, false});
// Rows 0, 2 (step 2); columns 4, 2 (start 4, end 0, step -2).
ONYX_OP_CASE({"slice_scatter", "two_axes_strided", {in({2, 2})},
              [](const std::vector<Expr>& x) { return slice_scatter(x[0], Shape{4, 5}, {0, 4}, {4, 0}, {0, 1}, {2, -2}); },
              [](const std::vector<Ref>& x) { return placeRef(x[0], {4, 5}, {{0, 2}, {4, 2}}); }});
ONYX_OP_CASE({"slice_scatter", "default_axes", {in({2, 3})},
              [](const std::vector<Expr>& x) { return slice_scatter(x[0], Shape{3, 3}, {1}, {3}); },
              [](const std::vector<Ref>& x) { return placeRef(x[0], {3, 3}, {{1, 2}, {0, 1, 2}}); }});

// ---------------------------------------------------------------- gather, scatter_add

// Random indices in [-4, 3] repeat, so the gradient checks accumulation.
ONYX_OP_CASE({"gather", "axis0_matrix_indices", {in({4, 3}), ints({2, 2}, -4, 3)},
              [](const std::vector<Expr>& x) { return gather(x[0], 0, x[1]); },
              [](const std::vector<Ref>& x) { return gatherRef(x[0], 0, x[1]); }});
// 4 and -1 name the same row.
ONYX_OP_CASE({"gather", "axis1_negative_repeated", {in({2, 5, 3}), intValues({4}, {4, -1, 0, 2})},
              [](const std::vector<Expr>& x) { return gather(x[0], 1, x[1]); },
              [](const std::vector<Ref>& x) { return gatherRef(x[0], 1, x[1]); }});
ONYX_OP_CASE({"gather", "scalar_index_last_axis", {in({4, 3}), intValues({}, {2})},
              [](const std::vector<Expr>& x) { return gather(x[0], -1, x[1]); },
              [](const std::vector<Ref>& x) {
                Ref y = refOfShape({4});
                for(int i = 0; i < 4; ++i) y[i] = x[0][i * 3 + 2];
                return y;
              }});
ONYX_OP_CASE({"gather", "index_select_alias", {in({3, 2})},
              [](const std::vector<Expr>& x) { return index_select(x[0], 0, std::vector<int64_t>{2, 0, 2}); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{2, 0, 2}, {0, 1}}); }});
ONYX_OP_CASE({"gather", "int64_data", {ints({5, 2}, -9, 9), ints({3}, -5, 4)},
              [](const std::vector<Expr>& x) { return gather(x[0], 0, x[1]); },
              [](const std::vector<Ref>& x) { return gatherRef(x[0], 0, x[1]); }, false});
ONYX_OP_CASE({"gather", "bool_data", {bools({3, 4}), intValues({2}, {3, -4})},
              [](const std::vector<Expr>& x) { return gather(x[0], 1, x[1]); },
              [](const std::vector<Ref>& x) { return pickRef(x[0], {{0, 1, 2}, {3, 0}}); }, false});
ONYX_OP_CASE({"scatter_add", "axis1_repeated", {in({2, 4, 3}), intValues({4}, {0, 2, 0, -1})},
              [](const std::vector<Expr>& x) { return scatter_add(x[0], 1, x[1], 3); },
              [](const std::vector<Ref>& x) { return scatterAddRef(x[0], 1, x[1], 3); }});
ONYX_OP_CASE({"scatter_add", "axis0_matrix_indices", {in({2, 2, 3}), intValues({2, 2}, {1, 1, 0, 3})},
              [](const std::vector<Expr>& x) { return scatter_add(x[0], 0, x[1], 4); },
              [](const std::vector<Ref>& x) { return scatterAddRef(x[0], 0, x[1], 4); }});
// Several pairs (updates, indices) summed into one output, in order (what
// GradCtx::add merges the gradients of gathers from one tensor into): a
// scalar index, a repeated one, and indices of another rank.
ONYX_OP_CASE({"scatter_add", "three_pairs",
              {in({2, 3}), intValues({}, {1}), in({2, 2, 3}), intValues({2}, {0, 1}), in({2, 3, 3}),
               intValues({3}, {-1, 1, 1})},
              [](const std::vector<Expr>& x) {
                return x[0]->graph()->make(Registry::instance().get("scatter_add"), x,
                                           {{"axis", int64_t(1)}, {"dim", int64_t(3)}});
              },
              [](const std::vector<Ref>& x) {
                Ref a = scatterAddRef(x[0], 1, x[1], 3), b = scatterAddRef(x[2], 1, x[3], 3),
                    c = scatterAddRef(x[4], 1, x[5], 3);
                for(int64_t k = 0; k < a.size(); ++k) a[k] += b[k] + c[k];
                return a;
              }});

// ---------------------------------------------------------------- pad

ONYX_OP_CASE({"pad", "constant_pad_and_crop", {in({2, 3})},
              [](const std::vector<Expr>& x) { return pad(x[0], {1, -1, 0, 2}, "constant", 0.5); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {1, -1, 0, 2}, "constant", 0.5); }});
ONYX_OP_CASE({"pad", "constant_3d", {in({2, 1, 3})},
              [](const std::vector<Expr>& x) { return pad(x[0], {0, 2, 1, 1, 0, 1}); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {0, 2, 1, 1, 0, 1}, "constant", 0); }});
ONYX_OP_CASE({"pad", "reflect", {in({3, 4})},
              [](const std::vector<Expr>& x) { return pad(x[0], {1, 2, 2, 1}, "reflect"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {1, 2, 2, 1}, "reflect", 0); }});
ONYX_OP_CASE({"pad", "reflect_after_crop", {in({4, 5})},
              [](const std::vector<Expr>& x) { return pad(x[0], {-1, 3, 0, -1}, "reflect"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {-1, 3, 0, -1}, "reflect", 0); }});
ONYX_OP_CASE({"pad", "edge", {in({2, 3})}, [](const std::vector<Expr>& x) { return pad(x[0], {0, 2, 1, 3}, "edge"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {0, 2, 1, 3}, "edge", 0); }});
ONYX_OP_CASE({"pad", "wrap", {in({2, 3})}, [](const std::vector<Expr>& x) { return pad(x[0], {2, 1, 0, 4}, "wrap"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {2, 1, 0, 4}, "wrap", 0); }});
ONYX_OP_CASE({"pad", "int64_constant", {ints({2, 2}, -9, 9)},
              [](const std::vector<Expr>& x) { return pad(x[0], {1, 0, 0, 1}, "constant", -7); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {1, 0, 0, 1}, "constant", -7); }, false});
ONYX_OP_CASE({"pad", "bool_edge", {bools({2, 2})},
              [](const std::vector<Expr>& x) { return pad(x[0], {1, 1, 1, 1}, "edge"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {1, 1, 1, 1}, "edge", 0); }, false});

// ---------------------------------------------------------------- reverse_sequence (reshape of gather)

ONYX_OP_CASE({"reshape", "reverse_sequence_time_major", {in({4, 3, 2})},
              [](const std::vector<Expr>& x) { return reverse_sequence(x[0], {4, 0, 2}, 1, 0); },
              [](const std::vector<Ref>& x) { return reverseSequenceRef(x[0], {4, 0, 2}, 1, 0); }});
ONYX_OP_CASE({"reshape", "reverse_sequence_batch_major", {in({3, 5})},
              [](const std::vector<Expr>& x) { return reverse_sequence(x[0], {1, 5, 3}, 0, 1); },
              [](const std::vector<Ref>& x) { return reverseSequenceRef(x[0], {1, 5, 3}, 0, 1); }});

// ---------------------------------------------------------------- big enough to run on several threads

ONYX_OP_CASE({"slice", "large_threaded", {in({70, 1000})},
              [](const std::vector<Expr>& x) { return slice(x[0], 1, 999, 0, -1); },
              [](const std::vector<Ref>& x) {
                Ref y = refOfShape({70, 999});
                for(int i = 0; i < 70; ++i)
                  for(int j = 0; j < 999; ++j) y[i * 999 + j] = x[0][i * 1000 + 999 - j];
                return y;
              }, false});
ONYX_OP_CASE({"gather", "large_threaded", {in({50, 900}), intValues({3}, {49, -50, 7})},
              [](const std::vector<Expr>& x) { return gather(x[0], 0, x[1]); },
              [](const std::vector<Ref>& x) { return gatherRef(x[0], 0, x[1]); }, false});
// One row of output (axis 0): threads split the inner elements.
ONYX_OP_CASE({"scatter_add", "large_one_row_threaded", {in({4, 12000}), intValues({4}, {1, 0, 1, -1})},
              [](const std::vector<Expr>& x) { return scatter_add(x[0], 0, x[1], 2); },
              [](const std::vector<Ref>& x) { return scatterAddRef(x[0], 0, x[1], 2); }, false});
ONYX_OP_CASE({"scatter_add", "large_many_rows_threaded", {in({300, 5, 30}), intValues({5}, {2, 2, 0, 1, 2})},
              [](const std::vector<Expr>& x) { return scatter_add(x[0], 1, x[1], 3); },
              [](const std::vector<Ref>& x) { return scatterAddRef(x[0], 1, x[1], 3); }, false});
ONYX_OP_CASE({"pad", "large_reflect_threaded", {in({60, 600})},
              [](const std::vector<Expr>& x) { return pad(x[0], {2, 3, 1, 4}, "reflect"); },
              [](const std::vector<Ref>& x) { return padRef(x[0], {2, 3, 1, 4}, "reflect", 0); }, false});

// ---------------------------------------------------------------- errors

TEST(SlicingOps, GatherIndexOutOfRangeNamesIndexAxisAndSize) {
  auto g = cpuGraph();
  auto x = g->zeros({3, 2});
  auto y = gather(x, 0, g->indices(std::vector<int64_t>{0, 5}));
  std::string msg = errorOf([&] { g->forward(); });
  EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_EQ(y->shape(), Shape({2, 2}));
}

TEST(SlicingOps, BadSlicePadSplitArgumentsAreErrors) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  EXPECT_NE(errorOf([&] { slice(x, 1, 0, 2, 0); }).find("step 0"), std::string::npos);
  EXPECT_NE(errorOf([&] { slice(x, {0, 0}, {1, 1}, {1, 1}); }).find("twice"), std::string::npos);
  EXPECT_NE(errorOf([&] { slice(x, 2, 0, 1); }), "");
  EXPECT_NE(errorOf([&] { pad(x, {1, 1}); }).find("2 * rank"), std::string::npos);
  EXPECT_NE(errorOf([&] { pad(x, {0, 0, 0, 1}, "mirror"); }).find("mirror"), std::string::npos);
  EXPECT_NE(errorOf([&] { pad(x, {-2, 0, -1, 0}); }), "");
  EXPECT_NE(errorOf([&] { split(x, 1, {1, 1}); }), "");
  EXPECT_NE(errorOf([&] { reverse_sequence(x, {1, 2}, 1, 0); }).find("lengths"), std::string::npos);
  EXPECT_NE(errorOf([&] { reverse_sequence(x, {1, 4, 0}, 1, 0); }).find("out of range"), std::string::npos);
}

TEST(SlicingOps, TrivialFormsReturnTheInput) {
  auto g = cpuGraph();
  auto x = g->zeros({2, 3});
  EXPECT_EQ(slice(x, 1, 0, 3), x);
  EXPECT_EQ(pad(x, {0, 0, 0, 0}), x);
}

}  // namespace
}  // namespace test
}  // namespace onyx
