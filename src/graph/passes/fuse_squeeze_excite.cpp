#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

#include <string>
#include <utility>
#include <vector>

namespace onyx {

using passes::isOp;

namespace {

using AttrList = std::vector<std::pair<std::string, AttrValue>>;

// A float32 2-D convolution (conv or fused_conv) that reads `x` as its image
// and nowhere else, with no x_mean or x_scale of its own.
bool readsOnlyAsImage(const Node* conv, const Node* x) {
  if(!(isOp(conv, "conv") || isOp(conv, "fused_conv")) || conv->value_type() != Type::float32 ||
     conv->shape().rank() != 4 || conv->child(0).get() != x)
    return false;
  for(size_t i = 1; i < conv->numChildren(); ++i)
    if(conv->child(i).get() == x) return false;
  if(isOp(conv, "fused_conv")) {
    const Attrs a = conv->attrs();
    if(a.i("x_mean") || a.i("x_scale")) return false;
  }
  return true;
}

// conv as a fused_conv reading `x` (with `set` attributes on top of its
// own, and `extra` appended to its inputs).
void redefineAsFused(ExpressionGraph& g, Node* conv, Expr x, const AttrList& set, Expr extra) {
  const OpDef& fused = Registry::instance().get("fused_conv");
  AttrList attrs;
  const Attrs a = conv->attrs();
  for(const AttrSpec& spec : conv->op()->attrSpecs) attrs.emplace_back(spec.name, a[spec.name.c_str()]);
  for(const auto& kv : set) attrs.emplace_back(kv.first, kv.second);
  std::vector<Expr> in{x};
  for(size_t i = 1; i < conv->numChildren(); ++i) in.push_back(conv->child(i));
  if(extra) in.push_back(extra);
  g.redefine(Expr(conv), fused, in, attrs);
}

// The 4-D x's spatial axes 2 and 3, in any spelling.
bool spatialAxes(const Node* mean) {
  const Attrs a = mean->attrs();
  const IntList& axes = a.ints("axes");
  if(axes.size() != 2 || a.i("keepdims") == 0) return false;
  const int r = mean->child(0)->shape().rank();
  int64_t a0 = axes[0] < 0 ? axes[0] + r : axes[0], a1 = axes[1] < 0 ? axes[1] + r : axes[1];
  if(a0 > a1) std::swap(a0, a1);
  return a0 == 2 && a1 == 3;
}

}  // namespace

size_t fuseSqueezeExcite(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* n = e.get();
    if(n->value_type() != Type::float32 || n->shape().rank() != 4) continue;
    if(isOp(n, "mean")) {
      // mean(x) over the spatial axes, read only by a convolution (the
      // squeeze): that convolution reads x with x_mean.
      Node* x = n->child(0).get();
      Node* conv = uses.only(n);
      if(x->value_type() != Type::float32 || x->shape().rank() != 4 || !spatialAxes(n) || !conv ||
         !readsOnlyAsImage(conv, n))
        continue;
      redefineAsFused(g, conv, Expr(x), {{"x_mean", attr(int64_t(1))}}, nullptr);
      g.retire(e);
      ++count;
    } else if(isOp(n, "mul") && n->numChildren() == 2) {
      // x * s with s [N, C, 1, 1], read only by a convolution (the
      // excitation): that convolution reads x with x_scale s.
      Node* conv = uses.only(n);
      if(!conv || !readsOnlyAsImage(conv, n)) continue;
      const Shape& ys = n->shape();
      for(int side = 0; side < 2; ++side) {
        Node* x = n->child(side).get();
        Node* s = n->child(1 - side).get();
        if(x == s || x->shape() != ys || x->value_type() != Type::float32 || s->value_type() != Type::float32 ||
           s->shape() != Shape({ys[0], ys[1], 1, 1}))
          continue;
        redefineAsFused(g, conv, Expr(x), {{"x_scale", attr(int64_t(1))}}, Expr(s));
        g.retire(e);
        ++count;
        break;
      }
    }
  }
  return count;
}

}  // namespace onyx
