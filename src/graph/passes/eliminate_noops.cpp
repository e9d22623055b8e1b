#include <unordered_set>

#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

// transpose's permutation with the default (empty: reverse) spelled out.
IntList permOf(const Node* n) {
  IntList p = n->attrs().ints("perm");
  if(p.empty()) {
    int r = n->shape().rank();
    for(int i = r - 1; i >= 0; --i) p.push_back(i);
  }
  return p;
}

bool identity(const IntList& p) {
  for(size_t i = 0; i < p.size(); ++i)
    if(p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

size_t eliminateNoOps(ExpressionGraph& g, const std::vector<Expr>& keep) {
  std::unordered_set<const Node*> kept;
  for(const Expr& k : keep) kept.insert(k.get());
  const OpDef& reshapeOp = Registry::instance().get("reshape");
  const OpDef& transposeOp = Registry::instance().get("transpose");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* n = e.get();
    if(n->kind() != NodeKind::Op || n->numChildren() != 1 || kept.count(n)) continue;
    Node* x = n->child(0).get();
    bool sameShape = x->shape() == n->shape() && x->value_type() == n->value_type();
    bool noop = false;
    if(isOp(n, "reshape") || isOp(n, "flatten") || isOp(n, "expand")) {
      noop = sameShape;
      if(!noop && !isOp(n, "expand") && (isOp(x, "reshape") || isOp(x, "flatten"))) {
        // reshape(reshape(x)) = one reshape of x (the inner may stay for other readers).
        Node* src = x->child(0).get();
        IntList dims(n->shape().dims().begin(), n->shape().dims().end());
        g.redefine(e, reshapeOp, {Expr(src)}, {{"shape", attr(dims)}});
        ++count;
        x = src;
        noop = x->shape() == n->shape();
      }
    } else if(isOp(n, "cast")) {
      noop = x->value_type() == n->value_type();
    } else if(isOp(n, "transpose")) {
      IntList p = permOf(n);
      noop = identity(p);
      if(!noop && isOp(x, "transpose")) {
        // y[k] = x[p2[k]] = z[p1[p2[k]]]
        IntList p1 = permOf(x), both;
        for(int64_t k : p) both.push_back(p1[static_cast<size_t>(k)]);
        Node* src = x->child(0).get();
        g.redefine(e, transposeOp, {Expr(src)}, {{"perm", attr(both)}});
        ++count;
        x = src;
        noop = identity(both);
      }
    }
    if(!noop) continue;
    g.replaceUses(e, Expr(x));
    ++count;
  }
  return count;
}

}  // namespace onyx
