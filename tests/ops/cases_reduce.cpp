// Harness cases for src/ops/reduce.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// Reference reduction over `axes` (empty: all; negative from the end): each
// output element gets finish(list of the input elements reduced into it).
Ref refReduce(const Ref& x, std::vector<int> axes, bool keepdims,
              const std::function<double(const std::vector<double>&)>& finish) {
  int r = static_cast<int>(x.shape.size());
  if(axes.empty())
    for(int i = 0; i < r; ++i) axes.push_back(i);
  for(auto& a : axes) a = a < 0 ? a + r : a;
  std::vector<int64_t> kept = x.shape;
  for(int a : axes) kept[a] = 1;
  Ref y = refOfShape(kept);
  std::vector<std::vector<double>> groups(static_cast<size_t>(y.size()));
  auto xs = refStrides(x.shape), ks = refStrides(kept);
  for(int64_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for(int d = 0; d < r; ++d) {
      int64_t idx = (i / xs[d]) % x.shape[d];
      if(kept[d] != 1) o += idx * ks[d];
    }
    groups[static_cast<size_t>(o)].push_back(x[i]);
  }
  for(int64_t o = 0; o < y.size(); ++o) y[o] = finish(groups[static_cast<size_t>(o)]);
  if(!keepdims) {
    std::vector<int64_t> s;
    for(int d = 0; d < r; ++d)
      if(std::find(axes.begin(), axes.end(), d) == axes.end()) s.push_back(kept[d]);
    y.shape = s;
  }
  return y;
}

double fSum(const std::vector<double>& v) {
  double s = 0;
  for(double a : v) s += a;
  return s;
}
double fMean(const std::vector<double>& v) { return fSum(v) / static_cast<double>(v.size()); }
double fMax(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double fMin(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double fProd(const std::vector<double>& v) {
  double p = 1;
  for(double a : v) p *= a;
  return p;
}
double fLogSumExp(const std::vector<double>& v) {
  double m = fMax(v), s = 0;
  for(double a : v) s += std::exp(a - m);
  return m + std::log(s);
}
double fL2(const std::vector<double>& v) {
  double s = 0;
  for(double a : v) s += a * a;
  return std::sqrt(s);
}

// ---- sum
ONYX_OP_CASE({"sum", "axis1_keep", {in({3, 4, 2})},
              [](Xs x) { return sum(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fSum); }});
ONYX_OP_CASE({"sum", "axes_0_2_drop", {in({3, 4, 2})},
              [](Xs x) { return sum(x[0], {0, -1}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fSum); }});
ONYX_OP_CASE({"sum", "all", {in({2, 5})},
              [](Xs x) { return sum(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fSum); }});
ONYX_OP_CASE({"sum", "int64", {ints({3, 4}, -50, 50)},
              [](Xs x) { return sum(x[0], -1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fSum); },
              /*gradcheck=*/false});

// ---- mean
ONYX_OP_CASE({"mean", "axis1_keep", {in({3, 4, 2})},
              [](Xs x) { return mean(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fMean); }});
ONYX_OP_CASE({"mean", "axes_0_2_drop", {in({3, 4, 2})},
              [](Xs x) { return mean(x[0], {0, 2}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fMean); }});
ONYX_OP_CASE({"mean", "all", {in({2, 5})},
              [](Xs x) { return mean(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fMean); }});

// ---- max / min (random inputs have no ties; the ties cases check the split)
ONYX_OP_CASE({"max", "axis1_keep", {in({3, 4, 2})},
              [](Xs x) { return max(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fMax); }});
ONYX_OP_CASE({"max", "axes_0_2_drop", {in({3, 4, 2})},
              [](Xs x) { return max(x[0], {0, -1}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fMax); }});
ONYX_OP_CASE({"max", "all", {in({2, 5})},
              [](Xs x) { return max(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fMax); }});
// Central differences at a tie of two see 1/2 each, as the split rule gives
// (at a tie of three they would see 1/2 each too: not a gradient to test).
ONYX_OP_CASE({"max", "ties_split", {values({2, 3}, {0.5, -1.0, 0.5, 2.0, 1.0, 2.0})},
              [](Xs x) { return max(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fMax); }});
ONYX_OP_CASE({"max", "int64", {ints({3, 4}, -50, 50)},
              [](Xs x) { return max(x[0], {0}, false); },
              [](Rs x) { return refReduce(x[0], {0}, false, fMax); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"max", "nan_propagates", {values({2, 2}, {1.0, std::nan(""), std::nan(""), 3.0})},
              [](Xs x) { return max(x[0], 1); },
              [](Rs x) {
                Ref y = refOfShape({2, 1});
                y[0] = y[1] = std::nan("");
                (void)x;
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"min", "axis1_keep", {in({3, 4, 2})},
              [](Xs x) { return min(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fMin); }});
ONYX_OP_CASE({"min", "axes_0_2_drop", {in({3, 4, 2})},
              [](Xs x) { return min(x[0], {0, -1}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fMin); }});
ONYX_OP_CASE({"min", "all", {in({2, 5})},
              [](Xs x) { return min(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fMin); }});
ONYX_OP_CASE({"min", "ties_split", {values({3, 2}, {-1.0, 0.5, -1.0, 2.0, 0.5, 3.0})},
              [](Xs x) { return min(x[0], 0); },
              [](Rs x) { return refReduce(x[0], {0}, true, fMin); }});
ONYX_OP_CASE({"min", "int64", {ints({3, 4}, -50, 50)},
              [](Xs x) { return min(x[0], {1}, false); },
              [](Rs x) { return refReduce(x[0], {1}, false, fMin); },
              /*gradcheck=*/false});

// ---- prod
ONYX_OP_CASE({"prod", "axis1_keep", {in({3, 4, 2}, 0.5, 1.5)},
              [](Xs x) { return prod(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fProd); }});
ONYX_OP_CASE({"prod", "axes_0_2_drop_signed", {in({3, 2, 2})},
              [](Xs x) { return prod(x[0], {0, 2}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fProd); }});
ONYX_OP_CASE({"prod", "all", {in({2, 3}, -1.5, 1.5)},
              [](Xs x) { return prod(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fProd); }});
// Rows with one zero, two zeros and none: the gradient at a zero is the
// product of the others, and with two zeros every gradient is 0.
ONYX_OP_CASE({"prod", "zeros", {values({3, 4}, {0.5, 0.0, -1.5, 2.0,
                                                0.0, 3.0, 0.0, -0.5,
                                                1.5, -0.5, 2.0, 0.75})},
              [](Xs x) { return prod(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fProd); }});
ONYX_OP_CASE({"prod", "zeros_all", {values({2, 2}, {0.0, 1.5, -2.0, 0.5})},
              [](Xs x) { return prod(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fProd); }});
ONYX_OP_CASE({"prod", "int64", {ints({3, 4}, -5, 5)},
              [](Xs x) { return prod(x[0], -1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fProd); },
              /*gradcheck=*/false});

// ---- logsumexp
ONYX_OP_CASE({"logsumexp", "axis1_keep", {in({3, 4, 2}, -3, 3)},
              [](Xs x) { return logsumexp(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fLogSumExp); }});
ONYX_OP_CASE({"logsumexp", "axes_0_2_drop", {in({3, 4, 2}, -3, 3)},
              [](Xs x) { return logsumexp(x[0], {0, 2}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fLogSumExp); }});
ONYX_OP_CASE({"logsumexp", "all", {in({2, 5}, -3, 3)},
              [](Xs x) { return logsumexp(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fLogSumExp); }});
// exp(x) overflows double above ~709 and float above ~88: only the
// max-shifted form stays finite.
ONYX_OP_CASE({"logsumexp", "large_values", {in({2, 4}, 700, 1000)},
              [](Xs x) { return logsumexp(x[0], -1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fLogSumExp); }});
ONYX_OP_CASE({"logsumexp", "very_negative", {in({2, 4}, -1000, -700)},
              [](Xs x) { return logsumexp(x[0], 0); },
              [](Rs x) { return refReduce(x[0], {0}, true, fLogSumExp); }});
ONYX_OP_CASE({"logsumexp", "infinities",
              {values({3, 2}, {-std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::infinity(), 1.0,
                               -std::numeric_limits<double>::infinity(), 2.0})},
              [](Xs x) { return logsumexp(x[0], 1); },
              [](Rs x) {
                Ref y = refOfShape({3, 1});
                y[0] = -std::numeric_limits<double>::infinity();
                y[1] = std::numeric_limits<double>::infinity();
                y[2] = x[0][5];
                return y;
              },
              /*gradcheck=*/false});

// ---- l2_norm
ONYX_OP_CASE({"l2_norm", "axis1_keep", {in({3, 4, 2})},
              [](Xs x) { return l2_norm(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fL2); }});
ONYX_OP_CASE({"l2_norm", "axes_0_2_drop", {in({3, 4, 2})},
              [](Xs x) { return l2_norm(x[0], {0, 2}, false); },
              [](Rs x) { return refReduce(x[0], {0, 2}, false, fL2); }});
ONYX_OP_CASE({"l2_norm", "all", {in({2, 5})},
              [](Xs x) { return l2_norm(x[0]); },
              [](Rs x) { return refReduce(x[0], {}, false, fL2); }});
// A zero row: the norm is 0 and its gradient the subgradient 0 (central
// differences at 0 see |eps| - |eps| = 0 too).
ONYX_OP_CASE({"l2_norm", "zero_row", {values({2, 3}, {0.0, 0.0, 0.0, 0.5, -1.0, 2.0})},
              [](Xs x) { return l2_norm(x[0], 1); },
              [](Rs x) { return refReduce(x[0], {1}, true, fL2); }});

// ---- integer mean truncates toward 0 (numpy's mean with an integer dtype)
ONYX_OP_CASE({"mean", "int64_truncates", {ints({3, 4}, -50, 50)},
              [](Xs x) { return mean(x[0], {1}, false); },
              [](Rs x) {
                return refReduce(x[0], {1}, false, [](const std::vector<double>& v) { return std::trunc(fMean(v)); });
              },
              /*gradcheck=*/false});

// ---- max/min of bools: any/all, and their identities over an empty set
ONYX_OP_CASE({"max", "bool_any", {bools({4, 3})},
              [](Xs x) { return max(x[0], {1}, false); },
              [](Rs x) { return refReduce(x[0], {1}, false, fMax); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"min", "bool_all", {bools({3, 4})},
              [](Xs x) { return min(x[0], {0}, true); },
              [](Rs x) { return refReduce(x[0], {0}, true, fMin); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"max", "bool_empty_set", {bools({2, 0})},
              [](Xs x) { return max(x[0], {1}, false); },
              [](Rs) { return refOfShape({2}); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"min", "bool_empty_set", {bools({2, 0})},
              [](Xs x) { return min(x[0], {1}, false); },
              [](Rs) {
                Ref y = refOfShape({2});
                y[0] = y[1] = 1;
                return y;
              },
              /*gradcheck=*/false});

// ---- reductions over an empty set (a zero-size reduced dim): the identity
// of each reduction (ONNX reduce_*_empty_set).
ONYX_OP_CASE({"sum", "empty_set", {in({2, 0, 3})},
              [](Xs x) { return sum(x[0], {1}, true); },
              [](Rs) { return refOfShape({2, 1, 3}); },
              /*gradcheck=*/false});
ONYX_OP_CASE({"prod", "empty_set", {in({2, 0, 3})},
              [](Xs x) { return prod(x[0], {1}, false); },
              [](Rs) {
                Ref y = refOfShape({2, 3});
                for(auto& v : y.v) v = 1;
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"max", "empty_set", {in({0, 3})},
              [](Xs x) { return max(x[0], {0}, true); },
              [](Rs) {
                Ref y = refOfShape({1, 3});
                for(auto& v : y.v) v = -std::numeric_limits<double>::infinity();
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"min", "empty_set", {in({0, 3})},
              [](Xs x) { return min(x[0], {0}, true); },
              [](Rs) {
                Ref y = refOfShape({1, 3});
                for(auto& v : y.v) v = std::numeric_limits<double>::infinity();
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"logsumexp", "empty_set", {in({2, 0})},
              [](Xs x) { return logsumexp(x[0], {1}, false); },
              [](Rs) {
                Ref y = refOfShape({2});
                for(auto& v : y.v) v = -std::numeric_limits<double>::infinity();
                return y;
              },
              /*gradcheck=*/false});
ONYX_OP_CASE({"l2_norm", "empty_set", {in({2, 0})},
              [](Xs x) { return l2_norm(x[0], {1}, false); },
              [](Rs) { return refOfShape({2}); },
              /*gradcheck=*/false});
// A zero-size dim that is kept: an empty result.
ONYX_OP_CASE({"sum", "empty_kept_dim", {in({0, 3})},
              [](Xs x) { return sum(x[0], {1}, false); },
              [](Rs) { return refOfShape({0}); },
              /*gradcheck=*/false});

// ---- the ONNX composites: ReduceL1 = sum(|x|), ReduceSumSquare = sum(x*x),
// ReduceLogSum = log(sum(x)); gradients through abs/mul/log.
ONYX_OP_CASE({"sum", "reduce_l1_composite", {in({3, 4, 2})},
              [](Xs x) { return sum(abs(x[0]), {0, 2}, true); },
              [](Rs x) {
                return refReduce(x[0], {0, 2}, true, [](const std::vector<double>& v) {
                  double s = 0;
                  for(double a : v) s += std::fabs(a);
                  return s;
                });
              }});
ONYX_OP_CASE({"sum", "reduce_sum_square_composite", {in({3, 4})},
              [](Xs x) { return sum(x[0] * x[0], {1}, false); },
              [](Rs x) {
                return refReduce(x[0], {1}, false, [](const std::vector<double>& v) {
                  double s = 0;
                  for(double a : v) s += a * a;
                  return s;
                });
              }});
ONYX_OP_CASE({"sum", "reduce_log_sum_composite", {in({3, 4}, 0.5, 2)},
              [](Xs x) { return log(sum(x[0], {0}, true)); },
              [](Rs x) { return refReduce(x[0], {0}, true, [](const std::vector<double>& v) { return std::log(fSum(v)); }); }});

}  // namespace
}  // namespace test
}  // namespace onyx
