// Harness cases for src/ops/reduce.cpp.
#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

// Reference reduction: sums x over `axes` (sorted, normalised), keepdims.
Ref refSum(const Ref& x, std::vector<int> axes, bool keepdims) {
  int r = static_cast<int>(x.shape.size());
  if(axes.empty())
    for(int i = 0; i < r; ++i) axes.push_back(i);
  for(auto& a : axes) a = a < 0 ? a + r : a;
  std::vector<int64_t> kept = x.shape;
  for(int a : axes) kept[a] = 1;
  Ref y = refOfShape(kept);
  auto xs = refStrides(x.shape), ks = refStrides(kept);
  for(int64_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for(int d = 0; d < r; ++d) {
      int64_t idx = (i / xs[d]) % x.shape[d];
      if(kept[d] != 1) o += idx * ks[d];
    }
    y[o] += x[i];
  }
  if(!keepdims) {
    std::vector<int64_t> s;
    for(int d = 0; d < r; ++d)
      if(std::find(axes.begin(), axes.end(), d) == axes.end()) s.push_back(kept[d]);
    y.shape = s;
  }
  return y;
}

ONYX_OP_CASE({"sum", "axis1_keep", {in({3, 4, 2})},
              [](const std::vector<Expr>& x) { return sum(x[0], 1); },
              [](const std::vector<Ref>& x) { return refSum(x[0], {1}, true); }});
ONYX_OP_CASE({"sum", "axes_0_2_drop", {in({3, 4, 2})},
              [](const std::vector<Expr>& x) { return sum(x[0], {0, -1}, false); },
              [](const std::vector<Ref>& x) { return refSum(x[0], {0, 2}, false); }});
ONYX_OP_CASE({"sum", "all", {in({2, 5})},
              [](const std::vector<Expr>& x) { return sum(x[0]); },
              [](const std::vector<Ref>& x) { return refSum(x[0], {}, false); }});

}  // namespace
}  // namespace test
}  // namespace onyx
