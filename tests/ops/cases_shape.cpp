// Harness cases for src/ops/shape.cpp.
#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

Ref withShape(Ref x, std::vector<int64_t> s) {
  x.shape = std::move(s);
  return x;
}

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

}  // namespace
}  // namespace test
}  // namespace onyx
