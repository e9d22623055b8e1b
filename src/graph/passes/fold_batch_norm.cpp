#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

bool hostConstant(const Node* n, Type t) {
  return n->kind() == NodeKind::Constant && n->value_type() == t && const_cast<Node*>(n)->val() &&
         const_cast<Node*>(n)->val()->onHost();
}

// W' = W * s[co], b' = b * s + t (b = 0 when absent), in T.
template <class T>
void scale(const TensorBase& W, const TensorBase* b, const TensorBase& s, const TensorBase& t, TensorBase& W2,
           TensorBase& b2) {
  int64_t C = s.size(), per = W.size() / C;
  const T* w = W.data<T>();
  const T* sv = s.data<T>();
  const T* tv = t.data<T>();
  T* w2 = W2.data<T>();
  T* o = b2.data<T>();
  for(int64_t c = 0; c < C; ++c) {
    for(int64_t i = 0; i < per; ++i) w2[c * per + i] = w[c * per + i] * sv[c];
    o[c] = (b ? b->data<T>()[c] : T(0)) * sv[c] + tv[c];
  }
}

}  // namespace

size_t foldBatchNorm(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& convOp = Registry::instance().get("conv");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* bn = e.get();
    if(!isOp(bn, "channel_affine")) continue;
    Node* conv = bn->child(0).get();
    if(!isOp(conv, "conv") || uses.only(conv) != bn) continue;
    Type t = conv->value_type();
    if(t != Type::float32 && t != Type::float64) continue;
    Node* W = conv->child(1).get();
    Node* b = conv->numChildren() > 2 ? conv->child(2).get() : nullptr;
    if(!hostConstant(W, t) || (b && !hostConstant(b, t)) || !hostConstant(bn->child(1).get(), t) ||
       !hostConstant(bn->child(2).get(), t))
      continue;
    int64_t C = W->shape()[0];
    Tensor W2 = TensorBase::create(W->shape(), t), b2 = TensorBase::create(Shape({C}), t);
    const TensorBase* bv = b ? b->val().get() : nullptr;
    if(t == Type::float32) scale<float>(*W->val(), bv, *bn->child(1)->val(), *bn->child(2)->val(), *W2, *b2);
    else scale<double>(*W->val(), bv, *bn->child(1)->val(), *bn->child(2)->val(), *W2, *b2);
    const Attrs a = conv->attrs();
    g.redefine(e, convOp, {conv->child(0), g.constant(W2), g.constant(b2)},
               {{"strides", a["strides"]}, {"dilations", a["dilations"]}, {"pads", a["pads"]}, {"group", a["group"]}});
    g.retire(Expr(conv));
    ++count;
  }
  return count;
}

}  // namespace onyx
