#include <cstdlib>
#include <cstring>
#include <unordered_map>
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

// The index of a fused_conv's residual input, or -1 (x_scale's input, when
// set, comes after it).
int residualIndex(const Node* n) {
  if(!isOp(n, "fused_conv") || !n->attrs().i("residual")) return -1;
  return int(n->numChildren()) - 1 - (n->attrs().i("x_scale") ? 1 : 0);
}

// An op that runs on channel-blocked float32 [N, C, H, W] tensors (C a
// multiple of b) as well as on plain ones: a 2-D max or average pool, a
// per-channel affine (batch norm), a concatenation along the channels (each
// input a multiple of b), all under their `block`; relu, which does not see
// the layout at all.
size_t imageInputs(const Node* n);
bool joinLike(const Node* n, int b) {
  if(n->kind() != NodeKind::Op || n->value_type() != Type::float32 || n->shape().rank() != 4 ||
     n->shape()[1] % b != 0)
    return false;
  if(isOp(n, "max_pool") || isOp(n, "average_pool") || isOp(n, "relu")) return n->child(0)->shape().rank() == 4;
  if(isOp(n, "concat")) {
    const int64_t axis = n->attrs().i("axis");
    if(axis != 1 && axis != -3) return false;
  } else if(!isOp(n, "channel_affine")) {
    return false;
  }
  // A concatenation's inputs, a channel_affine's x parts: each a multiple of b.
  for(size_t i = 0; i < imageInputs(n); ++i)
    if(n->child(i)->shape().rank() != 4 || n->child(i)->shape()[1] % b != 0) return false;
  return true;
}

// The inputs of such an op that hold images (a channel_affine's s and t, its
// last two, do not).
size_t imageInputs(const Node* n) {
  if(isOp(n, "concat")) return n->numChildren();
  return isOp(n, "channel_affine") ? n->numChildren() - 2 : 1;
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
  // The candidates: convolution outputs, and the pools, batch norms, relus
  // and channel concatenations between them, none of them kept or unread.
  std::unordered_set<const Node*> cand;
  for(const Expr& e : nodes) {
    const Node* n = e.get();
    if((convLike(n) || joinLike(n, b)) && !uses.kept(n) && !uses.readers(n).empty()) cand.insert(n);
  }
  // Channel-blocked, except a tensor that a depthwise convolution with a
  // plain output reads (EfficientNet's, whose squeeze-and-excitation ops
  // read it): that one is kept channels-last (NHWC, layout 1), what
  // oneDNN's depthwise kernel for AVX-512 (brdgmm) reads and writes; blocked,
  // it was reordered into NHWC on every run (1.7 of EfficientNet-B0's 22 ms
  // on one core). A depthwise convolution between blocked tensors
  // (MobileNetV2's) has a blocked kernel and stays so.
  const char* force = std::getenv("ONYX_CONV_LAYOUT");
  auto layoutFor = [&](const Node* n) {
    if(joinLike(n, b)) return b;
    bool nhwc = false;
    for(const Node* r : uses.readers(n)) nhwc = nhwc || (convLike(r) && depthwise(r) && !cand.count(r));
    int layout = nhwc && b == 16 ? 1 : b;
    if(force && std::strcmp(force, "nhwc") == 0) layout = 1;
    if(force && std::strcmp(force, "blocked") == 0) layout = b;
    return layout == 1 || n->shape()[1] % b == 0 ? layout : 0;
  };
  // Drop what cannot stay so until nothing changes: a value with a reader
  // that is neither a convolution taking it as its image or residual (never
  // as W or b) nor a pool or concatenation that stays blocked itself; a
  // pool or concatenation with an input that does not stay blocked; a
  // channels-last value that a pool or concatenation reads (they take the
  // blocked layout only).
  for(bool changed = true; changed;) {
    changed = false;
    for(auto it = cand.begin(); it != cand.end();) {
      const Node* n = *it;
      const int layout = layoutFor(n);
      bool ok = layout != 0;
      for(const Node* r : uses.readers(n)) {
        if(!ok) break;
        if(convLike(r)) {
          for(size_t i = 0; ok && i < r->numChildren(); ++i)
            if(r->child(i).get() == n) ok = i == 0 || int(i) == residualIndex(r);
        } else {
          ok = joinLike(r, b) && cand.count(r) && layout == b;
          for(size_t i = imageInputs(r); ok && i < r->numChildren(); ++i) ok = r->child(i).get() != n;
        }
      }
      if(ok && joinLike(n, b))
        for(size_t i = 0; ok && i < imageInputs(n); ++i) ok = cand.count(n->child(i).get()) > 0;
      if(ok) {
        ++it;
      } else {
        it = cand.erase(it);
        changed = true;
      }
    }
  }
  if(cand.empty()) return 0;
  std::unordered_map<const Node*, int> blocked;
  for(const Node* n : cand) blocked.emplace(n, layoutFor(n));
  auto layoutOf = [&](const Node* n) {
    auto it = blocked.find(n);
    return int64_t(it == blocked.end() ? 0 : it->second);
  };
  // Every convolution that writes or reads one becomes a fused_conv saying
  // so; every pool and concatenation kept blocked gets its block.
  const OpDef& fused = Registry::instance().get("fused_conv");
  for(const Expr& e : nodes) {
    Node* n = e.get();
    const bool join = joinLike(n, b) && blocked.count(n) && !isOp(n, "relu");  // (relu has no layout to say)
    int64_t xb = 0, yb = 0, rb = 0;
    if(!join && convLike(n)) {
      const int res = residualIndex(n);
      xb = layoutOf(n->child(0).get());
      yb = layoutOf(n);
      rb = res >= 0 ? layoutOf(n->child(size_t(res)).get()) : 0;
    }
    if(!join && !xb && !yb && !rb) continue;
    std::vector<Expr> in;
    for(size_t i = 0; i < n->numChildren(); ++i) in.push_back(n->child(i));
    std::vector<std::pair<std::string, AttrValue>> attrs;
    const Attrs a = n->attrs();
    if(join) {
      for(const AttrSpec& spec : n->op()->attrSpecs)
        attrs.emplace_back(spec.name, spec.name == "block" ? attr(int64_t(b)) : a[spec.name.c_str()]);
      g.redefine(e, *n->op(), in, attrs);
      continue;
    }
    for(const AttrSpec& spec : n->op()->attrSpecs) attrs.emplace_back(spec.name, a[spec.name.c_str()]);
    attrs.emplace_back("x_block", attr(xb));
    attrs.emplace_back("y_block", attr(yb));
    attrs.emplace_back("residual_block", attr(rb));
    g.redefine(e, fused, in, attrs);
  }
  return blocked.size();
}

}  // namespace onyx
