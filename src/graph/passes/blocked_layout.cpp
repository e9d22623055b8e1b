#include <cstdlib>
#include <cstring>
#include <unordered_map>

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

// The index of a fused_conv's residual input, or -1 (x_scale's input, when
// set, comes after it).
int residualIndex(const Node* n) {
  if(!isOp(n, "fused_conv") || !n->attrs().i("residual")) return -1;
  return int(n->numChildren()) - 1 - (n->attrs().i("x_scale") ? 1 : 0);
}

// A depthwise convolution (one input channel per group).
bool depthwise(const Node* n) {
  const int64_t c = n->child(0)->shape()[1];
  return c > 1 && n->attrs().i("group") == c;
}

}  // namespace

size_t blockConvChains(ExpressionGraph& g, const std::vector<Expr>& keep) {
  const int b = host::dnnlChannelBlock();
  if(b == 0) return 0;
  passes::Uses uses(g, keep);
  const std::vector<Expr> nodes = g.nodes();
  // The conv outputs that stay blocked: every reader is a convolution that
  // takes it as its image or its residual (never as W or b).
  std::unordered_map<const Node*, bool> convRead;
  for(const Expr& e : nodes) {
    const Node* n = e.get();
    if(!convLike(n) || uses.kept(n) || uses.readers(n).empty()) continue;
    bool ok = true;
    for(const Node* r : uses.readers(n)) {
      ok = ok && convLike(r);
      for(size_t i = 0; ok && i < r->numChildren(); ++i)
        if(r->child(i).get() == n) ok = i == 0 || int(i) == residualIndex(r);
      if(!ok) break;
    }
    if(ok) convRead.emplace(n, true);
  }
  // Channel-blocked, except a tensor that a depthwise convolution with a
  // plain output reads (EfficientNet's, whose squeeze-and-excitation ops
  // read it): that one is kept channels-last (NHWC, layout 1), what
  // oneDNN's depthwise kernel for AVX-512 (brdgmm) reads and writes; blocked,
  // it was reordered into NHWC on every run (1.7 of EfficientNet-B0's 22 ms
  // on one core). A depthwise convolution between blocked tensors
  // (MobileNetV2's) has a blocked kernel and stays so.
  const char* force = std::getenv("ONYX_CONV_LAYOUT");
  std::unordered_map<const Node*, int> blocked;
  for(const auto& kv : convRead) {
    const Node* n = kv.first;
    bool nhwc = false;
    for(const Node* r : uses.readers(n)) nhwc = nhwc || (depthwise(r) && !convRead.count(r));
    int layout = nhwc && b == 16 ? 1 : b;
    if(force && std::strcmp(force, "nhwc") == 0) layout = 1;
    if(force && std::strcmp(force, "blocked") == 0) layout = b;
    if(layout == 1 || n->shape()[1] % b == 0) blocked.emplace(n, layout);
  }
  if(blocked.empty()) return 0;
  auto layoutOf = [&](const Node* n) {
    auto it = blocked.find(n);
    return int64_t(it == blocked.end() ? 0 : it->second);
  };
  // Every convolution that writes or reads one becomes a fused_conv saying so.
  const OpDef& fused = Registry::instance().get("fused_conv");
  for(const Expr& e : nodes) {
    Node* n = e.get();
    if(!convLike(n)) continue;
    const int res = residualIndex(n);
    const int64_t xb = layoutOf(n->child(0).get());
    const int64_t yb = layoutOf(n);
    const int64_t rb = res >= 0 ? layoutOf(n->child(size_t(res)).get()) : 0;
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
