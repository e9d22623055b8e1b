#include <cmath>

#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;
using passes::isScalar;
using passes::otherInput;

namespace {

// x where d is x / sqrt(2) or x * (1/sqrt(2)); null otherwise.
Node* scaledInput(const Node* d) {
  if(isOp(d, "div") && isScalar(d->child(1).get(), std::sqrt(2.0))) return d->child(0).get();
  if(isOp(d, "mul"))
    for(int side = 0; side < 2; ++side)
      if(isScalar(d->child(side).get(), std::sqrt(0.5))) return d->child(1 - side).get();
  return nullptr;
}

}  // namespace

size_t fuseGelu(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& gelu = Registry::instance().get("gelu");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* erf = e.get();
    if(!isOp(erf, "erf")) continue;
    Node* d = erf->child(0).get();
    Node* x = scaledInput(d);
    if(!x || uses.only(d) != erf || !isFloat(x->value_type())) continue;
    Node* a = uses.only(erf);  // 1 + erf(..)
    if(!isOp(a, "add") || !isScalar(otherInput(a, erf), 1.0)) continue;
    Node* m1 = uses.only(a);
    if(!isOp(m1, "mul")) continue;
    Node* o1 = otherInput(m1, a);
    Node* tail = nullptr;
    if(o1 == x) {
      // (x * (1 + erf)) * 0.5
      Node* m2 = uses.only(m1);
      if(isOp(m2, "mul") && isScalar(otherInput(m2, m1), 0.5)) tail = m2;
    } else if(isScalar(o1, 0.5)) {
      // x * ((1 + erf) * 0.5)
      Node* m2 = uses.only(m1);
      if(isOp(m2, "mul") && otherInput(m2, m1) == x) tail = m2;
    } else if(isOp(o1, "mul") && uses.only(o1) == m1) {
      // (x * 0.5) * (1 + erf)
      if((o1->child(0).get() == x && isScalar(o1->child(1).get(), 0.5)) ||
         (o1->child(1).get() == x && isScalar(o1->child(0).get(), 0.5)))
        tail = m1;
    }
    if(!tail || tail->shape() != x->shape() || tail->value_type() != x->value_type()) continue;
    // The chain's last node becomes gelu(x) in place; prune drops the rest.
    g.redefine(Expr(tail), gelu, {Expr(x)}, {{"approximate", attr("none")}});
    ++count;
  }
  return count;
}

}  // namespace onyx
