#include <onyx/graph/passes/uses.h>

#include <cmath>

#include <onyx/graph/op_def.h>

namespace onyx {
namespace passes {

Uses::Uses(const ExpressionGraph& g, const std::vector<Expr>& keep) {
  for(const Expr& e : keep)
    if(e) kept_.insert(e.get());
  for(const Expr& e : g.nodes())
    for(size_t i = 0; i < e->numChildren(); ++i) readers_[e->child(i).get()].push_back(e.get());
}

const std::vector<Node*>& Uses::readers(const Node* n) const {
  static const std::vector<Node*> none;
  auto it = readers_.find(n);
  return it == readers_.end() ? none : it->second;
}

Node* Uses::only(const Node* n) const {
  if(kept(n)) return nullptr;
  const auto& r = readers(n);
  return r.size() == 1 ? r[0] : nullptr;
}

bool isOp(const Node* n, const char* name) { return n && n->kind() == NodeKind::Op && n->op()->name == name; }

bool scalarConstant(const Node* n, double& v) {
  if(!n || n->kind() != NodeKind::Constant || n->shape().elements() != 1) return false;
  Tensor t = const_cast<Node*>(n)->val();
  if(!t) return false;
  if(!t->onHost()) t = t->hostCopy();
  v = t->getAsDouble(0);
  return true;
}

bool isScalar(const Node* n, double v) {
  double x;
  return scalarConstant(n, x) && std::fabs(x - v) <= 1e-6 * std::fabs(v);
}

Node* otherInput(const Node* n, const Node* one) {
  if(n->numChildren() != 2) return nullptr;
  if(n->child(0).get() == one) return n->child(1).get();
  if(n->child(1).get() == one) return n->child(0).get();
  return nullptr;
}

Node* swapsLastTwo(const Node* t) {
  if(!isOp(t, "transpose")) return nullptr;
  Node* in = t->child(0).get();
  const int r = in->shape().rank();
  if(r < 2) return nullptr;
  const IntList& perm = t->attrs().ints("perm");
  if(perm.empty()) return r == 2 ? in : nullptr;  // empty: all dims reversed
  if(static_cast<int>(perm.size()) != r) return nullptr;
  for(int i = 0; i < r; ++i)
    if(perm[static_cast<size_t>(i)] != (i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i)) return nullptr;
  return in;
}

}  // namespace passes
}  // namespace onyx
