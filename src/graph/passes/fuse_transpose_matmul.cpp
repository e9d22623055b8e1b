#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;
using passes::swapsLastTwo;

size_t fuseTransposeMatmul(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& matmul = Registry::instance().get("matmul");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* m = e.get();
    if(!isOp(m, "matmul") || m->numChildren() != 2) continue;
    Expr in[2] = {m->child(0), m->child(1)};
    const Attrs a = m->attrs();
    bool trans[2] = {a.i("transA") != 0, a.i("transB") != 0};
    bool changed = false;
    for(int side = 0; side < 2; ++side) {
      Node* t = in[side].get();
      Node* src = swapsLastTwo(t);
      if(!src || uses.only(t) != m || in[0] == in[1]) continue;
      in[side] = Expr(src);
      trans[side] = !trans[side];
      changed = true;
    }
    if(!changed) continue;
    g.redefine(e, matmul, {in[0], in[1]},
               {{"transA", attr(trans[0])}, {"transB", attr(trans[1])}, {"alpha", a["alpha"]}});
    ++count;
  }
  return count;
}

}  // namespace onyx
