// Node and Expr. Nodes of one graph build live in the graph's node pool and
// are destroyed by clear(); an Expr is a (pointer, generation) handle, so using
// an Expr after clear() is reported instead of reading freed memory. Params are
// the exception: they persist across clear() with their values and gradients.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <onyx/core/error.h>
#include <onyx/core/small_vector.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/attrs.h>

namespace onyx {

class Node;
class ExpressionGraph;
struct OpDef;

class Expr {
public:
  Expr() = default;
  Expr(std::nullptr_t) {}
  explicit Expr(Node* n);
  Node* operator->() const { check(); return n_; }
  Node& operator*() const { check(); return *n_; }
  Node* get() const { return n_; }
  explicit operator bool() const { return n_ != nullptr; }
  bool operator==(const Expr& o) const { return n_ == o.n_; }
  bool operator!=(const Expr& o) const { return n_ != o.n_; }
  bool operator==(std::nullptr_t) const { return n_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return n_ != nullptr; }
  bool valid() const;

private:
  void check() const;
  Node* n_ = nullptr;
  uint32_t gen_ = 0;
};

using Rng = std::mt19937_64;
// Fills a freshly allocated tensor (see node_initializers.h).
using NodeInitializer = std::function<void(TensorBase&, Rng&)>;

enum class NodeKind : uint8_t { Op, Constant, Param, Input };

// Attribute values of a node viewed through its op's schema.
class Attrs {
public:
  Attrs(const OpDef* op, const AttrValue* values) : op_(op), v_(values) {}
  int64_t i(const char* name) const;
  double f(const char* name) const;
  const std::string& s(const char* name) const;
  const IntList& ints(const char* name) const;
  const FloatList& floats(const char* name) const;
  const AttrValue& operator[](const char* name) const;

private:
  const OpDef* op_;
  const AttrValue* v_;
};

class Node {
public:
  // Seed API.
  size_t getId() const { return id_; }
  const std::string& type() const;  // friendly op name, or "param"/"const"/"input"
  const Shape& shape() const { return shape_; }
  Type value_type() const { return type_; }
  Tensor& val();
  Tensor& grad();
  bool trainable() const { return trainable_; }
  void setTrainable(bool t);
  size_t numChildren() const { return children_.size(); }
  Expr child(size_t i) const;
  ExpressionGraph* graph() const { return graph_; }
  const std::string& name() const { return name_; }
  void set_name(const std::string& n) { name_ = n; }
  void markCheckpoint() { checkpoint_ = true; }
  bool isCheckpoint() const { return checkpoint_; }
  void debug(const std::string& message) { debugMsg_ = message; retainGrad_ = true; }
  const std::string& debugMessage() const { return debugMsg_; }
  // Keep this node's gradient after backward() (params always keep theirs).
  void retainGrad() { retainGrad_ = true; }
  // Keep this node's value after forward() even in inference mode, where
  // values are freed after their last consumer (graph outputs).
  void keepValue() { keep_ = true; }

  // Registry side.
  NodeKind kind() const { return kind_; }
  bool isLeaf() const { return kind_ != NodeKind::Op; }
  const OpDef* op() const { return op_; }
  Attrs attrs() const { return {op_, attrs_.data()}; }
  const SmallVec<AttrValue, 2>& attrValues() const { return attrs_; }
  size_t hash() const { return hash_; }
  bool equal(const Node& o) const;

  // Input nodes: bind a tensor for the next forward().
  void bind(const Tensor& t);

  // State a kernel derives from this node's attributes and constant inputs
  // and keeps between runs (conv: its constant W reordered to oneDNN's
  // layout). The node's own kernel owns the slot and checks that what it
  // derived from is still current; cleared when the node is destroyed.
  std::shared_ptr<void>& kernelState() { return kernelState_; }

private:
  friend class ExpressionGraph;
  friend class Expr;
  friend struct GradCtx;
  Node() = default;
  void computeHash();

  uint32_t gen_ = 0;
  NodeKind kind_ = NodeKind::Op;
  bool trainable_ = false;
  bool checkpoint_ = false;
  bool retainGrad_ = false;
  bool keep_ = false;
  bool needsGrad_ = false;   // during backward
  bool backwardNode_ = false;
  bool recomputed_ = false;
  size_t id_ = 0;
  const OpDef* op_ = nullptr;
  ExpressionGraph* graph_ = nullptr;
  SmallVec<Node*, 3> children_;
  SmallVec<AttrValue, 2> attrs_;
  Shape shape_;
  Type type_ = Type::float32;
  Tensor val_, grad_;
  Node* adj_ = nullptr;      // gradient expression during backward
  int64_t pending_ = 0;      // consumers not yet run (memory planning)
  size_t hash_ = 0;
  std::string name_;
  std::string debugMsg_;
  NodeInitializer init_;
  std::shared_ptr<void> kernelState_;
};

}  // namespace onyx
