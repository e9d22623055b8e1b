#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <onyx/graph/op_def.h>

namespace onyx {

using passes::isOp;

namespace {

using AttrList = std::vector<std::pair<std::string, AttrValue>>;


// The activation that node u applies to its input t, as fused_conv's
// activation/alpha/beta; false when u is not one fused_conv takes.
bool activationOf(const Node* u, AttrList& out) {
  if(!u || u->kind() != NodeKind::Op || u->numChildren() != 1) return false;
  const std::string& op = u->op()->name;
  const Attrs a = u->attrs();
  if(op == "relu" || op == "hard_swish" || op == "swish" || op == "sigmoid" || op == "tanh") {
    out.emplace_back("activation", attr(op));
  } else if(op == "leaky_relu") {
    out.emplace_back("activation", attr(op));
    out.emplace_back("alpha", attr(a.f("alpha")));
  } else if(op == "hard_sigmoid") {
    out.emplace_back("activation", attr(op));
    out.emplace_back("alpha", attr(a.f("alpha")));
    out.emplace_back("beta", attr(a.f("beta")));
  } else if(op == "clip") {
    // oneDNN's clip takes float bounds; an open end stays a separate clip.
    if(!std::isfinite(a.f("min")) || !std::isfinite(a.f("max"))) return false;
    out.emplace_back("activation", attr(op));
    out.emplace_back("alpha", attr(a.f("min")));
    out.emplace_back("beta", attr(a.f("max")));
  } else if(op == "gelu") {
    out.emplace_back("activation", attr(a.s("approximate") == "tanh" ? "gelu_tanh" : "gelu"));
  } else {
    return false;
  }
  return true;
}

}  // namespace

size_t fuseConvEpilogues(ExpressionGraph& g, const std::vector<Expr>& keep) {
  const OpDef& fused = Registry::instance().get("fused_conv");
  const std::vector<Expr> nodes = g.nodes();
  passes::Uses uses(g, keep);

  size_t count = 0;
  for(const Expr& e : nodes) {
    Node* conv = e.get();
    if(!isOp(conv, "conv") || !isFloat(conv->value_type())) continue;
    std::vector<Node*> chain{conv};  // in build order; the last becomes fused_conv
    AttrList attrs = {{"strides", conv->attrs()["strides"]},
                      {"dilations", conv->attrs()["dilations"]},
                      {"pads", conv->attrs()["pads"]},
                      {"group", conv->attrs()["group"]}};
    Node* tail = conv;
    // The activation: a unary op, or SiLU as sigmoid(t) and mul(t, sigmoid(t)).
    if(Node* u = uses.only(tail)) {
      if(activationOf(u, attrs)) {
        chain.push_back(u);
        tail = u;
      }
    } else if(!uses.kept(tail) && uses.readers(tail).size() == 2) {
      Node* s = uses.readers(tail)[0];
      Node* m = uses.readers(tail)[1];
      if(isOp(m, "sigmoid")) std::swap(s, m);
      if(isOp(s, "sigmoid") && isOp(m, "mul") && uses.only(s) == m && m->numChildren() == 2 &&
         ((m->child(0).get() == tail && m->child(1).get() == s) || (m->child(0).get() == s && m->child(1).get() == tail))) {
        attrs.emplace_back("activation", attr("swish"));
        chain.push_back(s);
        chain.push_back(m);
        tail = m;
      }
    }
    // The residual add and the relu after it.
    Expr residual;
    Node* add = uses.only(tail);
    if(isOp(add, "add") && add->numChildren() == 2 && add->child(0).get() != add->child(1).get()) {
      Expr r = add->child(add->child(0).get() == tail ? 1 : 0);
      if(r->shape() == tail->shape() && r->value_type() == tail->value_type()) {
        residual = r;
        attrs.emplace_back("residual", attr(int64_t(1)));
        chain.push_back(add);
        tail = add;
        Node* relu = uses.only(tail);
        if(isOp(relu, "relu")) {
          attrs.emplace_back("post_activation", attr("relu"));
          chain.push_back(relu);
          tail = relu;
        }
      }
    }
    if(tail == conv) continue;
    std::vector<Expr> in;
    for(size_t i = 0; i < conv->numChildren(); ++i) in.push_back(conv->child(i));
    if(residual) in.push_back(residual);
    g.redefine(Expr(tail), fused, in, attrs);
    // The rest, last first, so each has no consumer left when retired.
    for(size_t i = chain.size() - 1; i-- > 0;) g.retire(Expr(chain[i]));
    // The consumer map is now stale only in naming the chain's nodes where
    // the fused node stands (same counts); a retired or fused node is never
    // taken for an activation or add, so later chains stay legal.
    ++count;
  }
  return count;
}

}  // namespace onyx
