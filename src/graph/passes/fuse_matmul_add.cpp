#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

size_t fuseMatmulAdd(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& affine = Registry::instance().get("affine");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* add = e.get();
    if(!isOp(add, "add") || add->numChildren() != 2 || add->child(0) == add->child(1)) continue;
    for(int side = 0; side < 2; ++side) {
      Node* m = add->child(side).get();
      Node* b = add->child(1 - side).get();
      if(!isOp(m, "matmul") || uses.only(m) != add) continue;
      const Shape& xs = m->child(0)->shape();
      const Shape& ws = m->child(1)->shape();
      // affine's form: x [.., M, K], W [K, N] (2-D), a bias that broadcasts
      // to the product without widening it.
      if(xs.rank() < 2 || ws.rank() != 2 || add->shape() != m->shape() || b->value_type() != m->value_type()) continue;
      if(!Shape::broadcastable(b->shape(), m->shape()) || Shape::broadcast({m->shape(), b->shape()}) != m->shape())
        continue;
      const Attrs a = m->attrs();
      g.redefine(e, affine, {m->child(0), m->child(1), Expr(b)},
                 {{"transA", a["transA"]}, {"transB", a["transB"]}, {"alpha", a["alpha"]}});
      g.retire(Expr(m));
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace onyx
