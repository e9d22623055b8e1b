#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

size_t fuseChannelAffine(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& affine = Registry::instance().get("channel_affine");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* n = e.get();
    if(!isOp(n, "channel_affine") || n->attrs().i("block") != 0 || n->attrs().i("relu") != 0) continue;
    std::vector<Expr> in;
    for(size_t i = 0; i < n->numChildren(); ++i) in.push_back(n->child(i));
    bool changed = false;
    // concat(x_0, ...) along the channels -> channel_affine: the parts are read in place.
    Node* c = n->child(0).get();
    if(n->numChildren() == 3 && isOp(c, "concat") && c->attrs().i("block") == 0 && uses.only(c) == n &&
       c->value_type() == n->value_type() && c->shape().rank() >= 2 &&
       c->shape().axis(c->attrs().i("axis")) == 1) {
      in.erase(in.begin());
      for(size_t i = 0; i < c->numChildren(); ++i) in.insert(in.begin() + long(i), c->child(i));
      changed = true;
    }
    // channel_affine -> relu: the relu becomes the affine with relu set.
    Node* r = uses.only(n);
    if(isOp(r, "relu")) {
      g.redefine(Expr(r), affine, in, {{"block", attr(int64_t(0))}, {"relu", attr(int64_t(1))}});
      g.retire(e);
      ++count;
    } else if(changed) {
      g.redefine(e, affine, in, {{"block", attr(int64_t(0))}, {"relu", attr(int64_t(0))}});
      ++count;
    }
    if(changed) g.retire(Expr(c));
  }
  return count;
}

}  // namespace onyx
