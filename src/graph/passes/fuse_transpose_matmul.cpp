#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

// t's input when t is a transpose that swaps the last two dims of an input
// of rank >= 2 and keeps the others; null otherwise.
Node* swapsLastTwo(const Node* t) {
  if(!isOp(t, "transpose")) return nullptr;
  Node* in = t->child(0).get();
  const int r = in->shape().rank();
  if(r < 2) return nullptr;
  const IntList& perm = t->attrs().ints("perm");
  if(perm.empty()) return r == 2 ? in : nullptr;  // empty: all dims reversed
  if(static_cast<int>(perm.size()) != r) return nullptr;
  for(int i = 0; i < r; ++i) {
    const int want = i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i;
    if(perm[static_cast<size_t>(i)] != want) return nullptr;
  }
  return in;
}

}  // namespace

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
