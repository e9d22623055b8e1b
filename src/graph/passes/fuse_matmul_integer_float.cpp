#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

bool isF32(const Node* n) { return n->value_type() == Type::float32; }

// One value, or one per column of N (rank <= 1): matmul_integer_to_float's
// form of b_scale and of a per-column factor.
bool perTensorOrColumn(const Node* n, int64_t N) {
  const Shape& s = n->shape();
  return isF32(n) && s.rank() <= 1 && (s.elements() == 1 || s.elements() == N);
}

}  // namespace

size_t fuseMatmulIntegerFloat(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& fused = Registry::instance().get("matmul_integer_to_float");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* mul = e.get();
    if(!isOp(mul, "mul") || mul->numChildren() != 2 || !isF32(mul)) continue;
    for(int side = 0; side < 2; ++side) {
      Node* cast = mul->child(side).get();
      Node* s = mul->child(1 - side).get();
      if(!isOp(cast, "cast") || !isF32(cast) || uses.only(cast) != mul || mul->shape() != cast->shape()) continue;
      Node* mi = cast->child(0).get();
      if(!isOp(mi, "matmul_integer") || uses.only(mi) != cast) continue;
      const int64_t N = mi->child(1)->shape()[1];
      if(!perTensorOrColumn(s, N)) continue;
      // s = a_scale * b_scale (quantize_dynamic's "scales_mul"), or any
      // factor s: a_scale 1, b_scale s (exact: 1 * s = s).
      Expr aScale, bScale;
      if(isOp(s, "mul") && uses.only(s) == mul && s->numChildren() == 2) {
        for(int k = 0; k < 2 && !aScale; ++k) {
          Node* p = s->child(k).get();
          Node* q = s->child(1 - k).get();
          if(isF32(p) && p->shape().elements() == 1 && p->shape().rank() <= 1 && perTensorOrColumn(q, N) &&
             s->shape() == q->shape()) {
            aScale = Expr(p);
            bScale = Expr(q);
          }
        }
      }
      if(!aScale) {
        aScale = g.scalar(1.0, Type::float32);
        bScale = Expr(s);
      }
      std::vector<Expr> in{mi->child(0), mi->child(1), aScale, bScale,
                           mi->numChildren() > 2 ? mi->child(2) : g.scalar(0, mi->child(0)->value_type()),
                           mi->numChildren() > 3 ? mi->child(3) : g.scalar(0, mi->child(1)->value_type())};
      // + bias [N] (either side), when the add reads nothing else of the mul
      Expr target = e;
      Node* add = uses.only(mul);
      if(add && isOp(add, "add") && add->numChildren() == 2 && add->shape() == mul->shape()) {
        Node* bias = passes::otherInput(add, mul);
        if(bias && bias != mul && isF32(bias) && bias->shape() == Shape({N})) {
          in.push_back(Expr(bias));
          target = Expr(add);
        }
      }
      g.redefine(target, fused, in, {});
      if(target.get() != mul) g.retire(e);
      g.retire(Expr(cast));
      g.retire(Expr(mi));
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace onyx
