#include <unordered_set>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

// A float32 2-D convolution the oneDNN path may run with blocked tensors.
bool convLike(const Node* n) {
  return (isOp(n, "conv") || isOp(n, "fused_conv")) && n->value_type() == Type::float32 &&
         n->shape().rank() == 4 && n->child(0)->shape().rank() == 4;
}

// The index of a fused_conv's residual input, or -1.
int residualIndex(const Node* n) {
  return isOp(n, "fused_conv") && n->attrs().i("residual") ? int(n->numChildren()) - 1 : -1;
}

}  // namespace

size_t blockConvChains(ExpressionGraph& g, const std::vector<Expr>& keep) {
  const int b = host::dnnlChannelBlock();
  if(b == 0) return 0;
  passes::Uses uses(g, keep);
  const std::vector<Expr> nodes = g.nodes();
  // The conv outputs that stay blocked: every reader is a convolution that
  // takes it as its image or its residual (never as W or b).
  std::unordered_set<const Node*> blocked;
  for(const Expr& e : nodes) {
    const Node* n = e.get();
    if(!convLike(n) || uses.kept(n) || n->shape()[1] % b != 0 || uses.readers(n).empty()) continue;
    bool ok = true;
    for(const Node* r : uses.readers(n)) {
      ok = ok && convLike(r);
      for(size_t i = 0; ok && i < r->numChildren(); ++i)
        if(r->child(i).get() == n) ok = i == 0 || int(i) == residualIndex(r);
      if(!ok) break;
    }
    if(ok) blocked.insert(n);
  }
  if(blocked.empty()) return 0;
  // Every convolution that writes or reads one becomes a fused_conv saying so.
  const OpDef& fused = Registry::instance().get("fused_conv");
  for(const Expr& e : nodes) {
    Node* n = e.get();
    if(!convLike(n)) continue;
    const int res = residualIndex(n);
    const int64_t xb = blocked.count(n->child(0).get()) ? b : 0;
    const int64_t yb = blocked.count(n) ? b : 0;
    const int64_t rb = res >= 0 && blocked.count(n->child(size_t(res)).get()) ? b : 0;
    if(!xb && !yb && !rb) continue;
    std::vector<std::pair<std::string, AttrValue>> attrs;
    const Attrs a = n->attrs();
    for(const AttrSpec& spec : n->op()->attrSpecs) attrs.emplace_back(spec.name, a[spec.name.c_str()]);
    attrs.emplace_back("x_block", attr(xb));
    attrs.emplace_back("y_block", attr(yb));
    attrs.emplace_back("residual_block", attr(rb));
    std::vector<Expr> in;
    for(size_t i = 0; i < n->numChildren(); ++i) in.push_back(n->child(i));
    g.redefine(e, fused, in, attrs);
  }
  return blocked.size();
}

}  // namespace onyx
