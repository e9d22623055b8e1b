#include <onyx/graph/passes/passes.h>

namespace onyx {

namespace {
bool isDequantize(const Node* n) { return n->op() && n->op()->name == "dequantize_linear"; }
}  // namespace

size_t foldConstants(ExpressionGraph& g, const std::vector<Expr>& keep) {
  (void)keep;  // a kept node may be folded: it stays, holding its value
  size_t folded = 0;
  for(const Expr& e : g.nodes()) {
    Node* n = e.get();
    if(n->kind() != NodeKind::Op || n->op()->isStochastic || n->isCheckpoint()) continue;
    bool constant = true;
    size_t inBytes = 0;
    for(size_t i = 0; i < n->numChildren() && constant; ++i) {
      Expr c = n->child(i);
      constant = c->kind() == NodeKind::Constant && c->val();
      if(constant && c->value_type() != Type::string)
        inBytes += typeBytes(c->value_type(), static_cast<size_t>(c->shape().elements()));
    }
    if(!constant) continue;
    // A dequantize_linear of constants is a quantized model's weights in
    // float, which its float ops read every run: folded whatever its size,
    // as the weights of a float model are (fuse_qdq has taken those that
    // run in int8).
    if(n->value_type() != Type::string && !isDequantize(n)) {
      // A value far larger than what it is made of (Expand, ConstantOfShape,
      // Tile of a few numbers) stays computed per run rather than resident.
      size_t outBytes = typeBytes(n->value_type(), static_cast<size_t>(n->shape().elements()));
      if(outBytes > 2 * inBytes + (size_t(1) << 20)) continue;
    }
    g.makeConstant(e, g.value(e));
    ++folded;
  }
  return folded;
}

}  // namespace onyx
