#include <string>
#include <unordered_set>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {


// A 2-D qlinear_conv: its kernel reads and writes channels-last tensors
// without transposing them on oneDNN's int8 path and on its float path
// (ops/quantized.cpp); only the exact loops, when oneDNN declines the
// problem, transpose. (Measured on the float path, alternating runs, 2
// threads: MobileNetV2 in onnxruntime's default QDQ form 13-15 ms against
// 16-23 ms plain; ResNet-50 unchanged.)
bool int8Conv(Node* n) { return isOp(n, "qlinear_conv") && n->shape().rank() == 4 && host::dnnlEnabled(); }

// Ops whose every tensor input and output share one layout when all have
// the same shape: element-wise ops whose other inputs hold one value.
bool layoutFree(const Node* n) {
  static const std::unordered_set<std::string> ops = {
      "quantize_linear", "dequantize_linear", "add", "sub", "mul", "relu", "clip", "leaky_relu",
      "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "swish", "maximum", "minimum", "qlinear_add"};
  if(n->kind() != NodeKind::Op || !ops.count(n->op()->name) || n->shape().rank() != 4) return false;
  for(size_t i = 0; i < n->numChildren(); ++i) {
    const Shape& s = n->child(i)->shape();
    if(s != n->shape() && s.elements() != 1) return false;
  }
  return true;
}

}  // namespace

size_t int8Layout(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const std::vector<Expr> nodes = g.nodes();
  std::unordered_set<Node*> convs;  // the int8 convolutions
  std::unordered_set<Node*> last;   // the values stored channels-last
  for(const Expr& e : nodes) {
    Node* n = e.get();
    if(int8Conv(n)) convs.insert(n);
    if((convs.count(n) || layoutFree(n)) && !uses.kept(n) && !uses.readers(n).empty()) last.insert(n);
  }
  // Drop what cannot stay channels-last until nothing changes: an
  // element-wise op with a full-size input stored plain, and a value with a
  // reader that is neither channels-last itself nor an int8 convolution
  // reading it as its x.
  for(bool changed = true; changed;) {
    changed = false;
    for(auto it = last.begin(); it != last.end();) {
      Node* n = *it;
      bool ok = true;
      if(!convs.count(n))
        for(size_t i = 0; ok && i < n->numChildren(); ++i) {
          Node* in = n->child(i).get();
          ok = in->shape().elements() == 1 || last.count(in);
        }
      for(Node* r : uses.readers(n)) {
        if(!ok) break;
        if(convs.count(r)) {
          for(size_t i = 1; i < r->numChildren(); ++i) ok = ok && r->child(i).get() != n;
        } else {
          ok = last.count(r) > 0;
        }
      }
      if(ok) {
        ++it;
      } else {
        it = last.erase(it);
        changed = true;
      }
    }
  }
  // A chain without an int8 convolution in it gains nothing.
  size_t marked = 0;
  for(Node* n : convs) {
    const int64_t x = last.count(n->child(0).get()) ? 1 : 0, y = last.count(n) ? 1 : 0;
    if(!x && !y) continue;
    std::vector<std::pair<std::string, AttrValue>> attrs;
    const Attrs a = n->attrs();
    for(const AttrSpec& spec : n->op()->attrSpecs)
      if(spec.name != "x_nhwc" && spec.name != "y_nhwc") attrs.emplace_back(spec.name, a[spec.name.c_str()]);
    attrs.emplace_back("x_nhwc", attr(x));
    attrs.emplace_back("y_nhwc", attr(y));
    std::vector<Expr> in;
    for(size_t i = 0; i < n->numChildren(); ++i) in.push_back(n->child(i));
    g.redefine(Expr(n), *n->op(), in, attrs);
    marked += size_t(y);
  }
  return marked;
}

}  // namespace onyx
