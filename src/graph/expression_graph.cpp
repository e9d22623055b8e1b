#include <onyx/graph/expression_graph.h>

#include <new>
#include <stdexcept>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <unordered_map>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/logging.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/io/npz.h>

namespace onyx {

// ---------------------------------------------------------------- Expr / Node

Expr::Expr(Node* n) : n_(n), gen_(n ? n->gen_ : 0) {}

bool Expr::valid() const { return n_ && n_->gen_ == gen_; }

void Expr::check() const {
  ONYX_CHECK(n_, "use of a null expression");
  ONYX_CHECK(n_->gen_ == gen_,
             "use of an expression whose graph was cleared (graph->clear() ends every node but params; rebuild it)");
}

const std::string& Node::type() const {
  static const std::string kinds[] = {"op", "const", "param", "input"};
  return kind_ == NodeKind::Op ? op_->name : kinds[static_cast<int>(kind_)];
}

Expr Node::child(size_t i) const {
  ONYX_ASSERT(i < children_.size(), "child ", i, " of a node with ", children_.size(), " children");
  return Expr(children_[i]);
}

Tensor& Node::val() { return val_; }

Tensor& Node::grad() {
  if(!grad_ && adj_ && adj_->val_) grad_ = adj_->val_;
  return grad_;
}

void Node::setTrainable(bool t) {
  ONYX_CHECK(kind_ == NodeKind::Param || !t, "only params can be made trainable (node ", id_, " is a ", type(), ")");
  trainable_ = t;
}

void Node::bind(const Tensor& t) {
  ONYX_CHECK(kind_ == NodeKind::Input, "bind() on node ", id_, " of type ", type(), ": only inputs can be bound");
  ONYX_CHECK(t, "input '", name_, "': binding a null tensor");
  ONYX_CHECK(t->shape() == shape_, "input '", name_, "' was declared with shape ", shape_,
             " but bound to a tensor of shape ", t->shape(), "; rebuild the graph for a new shape");
  ONYX_CHECK(t->type() == type_, "input '", name_, "' was declared as ", type_, " but bound to a ", t->type(),
             " tensor; cast the data first");
  if(t->getDeviceId() == graph_->getDeviceId()) {
    val_ = t;  // bound, not copied
  } else {
    val_ = TensorBase::create(shape_, type_, graph_->workspace());
    val_->copyFrom(*t);
  }
}

void Node::computeHash() {
  size_t h = reinterpret_cast<size_t>(op_);
  auto mix = [&](size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for(auto* c : children_) mix(reinterpret_cast<size_t>(c));
  for(auto& a : attrs_) mix(attrHash(a));
  mix(static_cast<size_t>(type_));
  hash_ = h;
}

bool Node::equal(const Node& o) const {
  return op_ == o.op_ && kind_ == NodeKind::Op && o.kind_ == NodeKind::Op && children_ == o.children_ &&
         attrs_ == o.attrs_ && type_ == o.type_ && shape_ == o.shape_;
}

// -------------------------------------------------------------------- Params

Expr Parameters::get(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? Expr() : it->second;
}

int64_t Parameters::totalElements() const {
  int64_t n = 0;
  for(auto& p : ordered_) n += p->shape().elements();
  return n;
}

// --------------------------------------------------------------------- Graph

ComputePrecision parseComputePrecision(const std::string& name, const std::string& what) {
  if(name == "float32" || name == "fp32") return ComputePrecision::float32;
  if(name == "bf16" || name == "bfloat16") return ComputePrecision::bfloat16;
  throw Error(str(what, ": unknown precision '", name, "'; use float32 or bf16"));
}

const char* computePrecisionName(ComputePrecision p) {
  return p == ComputePrecision::bfloat16 ? "bf16" : "float32";
}

bool bf16Available() { return host::dnnlHasBf16(); }

ExpressionGraph::ExpressionGraph() : workspace_(New<Allocator>(DeviceId{})), params_(New<Parameters>()) {}

ExpressionGraph::~ExpressionGraph() {
  for(auto* b : blocks_) {
    for(size_t i = 0; i < kBlockNodes; ++i) b[i].~Node();
    ::operator delete(b);
  }
}

void ExpressionGraph::setDevice(DeviceId device) {
  if(device.type == DeviceType::gpu) {
    std::string why = gpuUnavailable(device.no);
    ONYX_CHECK(why.empty(), "setDevice(", device.toString(), "): ", why);
  }
  if(device == device_) return;
  ONYX_CHECK(count_ == 0 && params_->size() == 0, "setDevice() must be called before building the graph");
  device_ = device;
  workspace_ = New<Allocator>(device);
}

void ExpressionGraph::reserveWorkspaceMB(size_t mb) { workspace_->reserve(mb << 20); }

Node* ExpressionGraph::newNode(NodeKind kind) {
  size_t b = count_ / kBlockNodes;
  if(b == blocks_.size()) {
    blocks_.push_back(static_cast<Node*>(::operator new(kBlockNodes * sizeof(Node))));
    for(size_t i = 0; i < kBlockNodes; ++i) new(blocks_[b] + i) Node();  // gen 0: matches no Expr
  }
  Node* n = blocks_[b] + count_ % kBlockNodes;
  ++count_;
  n->gen_ = ++generation_;  // unique per node built, so stale Exprs are caught
  n->kind_ = kind;
  n->graph_ = this;
  n->id_ = nextId_++;
  return n;
}

std::vector<Expr> ExpressionGraph::nodes() const {
  std::vector<Expr> v;
  v.reserve(count_);
  for(size_t i = 0; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    if(n->gen_ != 0) v.emplace_back(n);  // not retired
  }
  return v;
}

void ExpressionGraph::truncate(size_t mark) {
  dropFrom(mark);
  cseRebuild();
}

void ExpressionGraph::dropFrom(size_t mark) {
  for(size_t i = mark; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    n->~Node();
    new(n) Node();  // releases values, names, initializers; gen 0
  }
  count_ = mark;
}

void ExpressionGraph::cseRebuild() {
  std::fill(cse_.begin(), cse_.end(), nullptr);
  cseCount_ = 0;
  for(size_t i = 0; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    if(n->kind_ == NodeKind::Op && !n->op_->isStochastic) cseInsert(n);
  }
}

void ExpressionGraph::redefine(Expr e, const OpDef& op, const std::vector<Expr>& inputs,
                               const std::vector<std::pair<std::string, AttrValue>>& attrs) {
  Node* node = e.operator->();
  ONYX_ASSERT(node->graph_ == this && node->kind_ == NodeKind::Op, "redefine: not an op node of this graph");
  ONYX_ASSERT(static_cast<int>(inputs.size()) >= op.minInputs &&
                  (op.maxInputs < 0 || static_cast<int>(inputs.size()) <= op.maxInputs),
              "redefine: ", op.name, " with ", inputs.size(), " inputs");
  SmallVec<Node*, 3> children;
  bool trainable = false;
  for(const Expr& in : inputs) {
    Node* c = in.operator->();
    // A leaf has its value before any op runs: it may be one made for the rewrite.
    ONYX_ASSERT(c->graph_ == this && (c->id_ < node->id_ || c->kind_ != NodeKind::Op), "redefine: input ",
                c->type(), " #", c->id_, " is not built before node #", node->id_);
    children.push_back(c);
    trainable = trainable || c->trainable_;
  }
  SmallVec<AttrValue, 2> values;
  for(auto& s : op.attrSpecs) values.push_back(s.defaultValue);
  for(const auto& a : attrs) {
    int i = op.attrIndex(a.first.c_str());
    ONYX_ASSERT(i >= 0 && values[size_t(i)].index() == a.second.index(), "redefine: ", op.name, " attribute '",
                a.first, "'");
    values[size_t(i)] = a.second;
  }
  // Inferred before anything changes: a failing rewrite leaves the node as it was.
  InferCtx ctx{op, children, Attrs(&op, values.data()), Shape(), Type::undefined};
  op.inferFn(ctx);
  ONYX_ASSERT(ctx.shape == node->shape_ && ctx.type == node->type_, "redefine: ", op.name, " gives ", ctx.shape,
              " ", ctx.type, " for a node of ", node->shape_, " ", node->type_);
  node->op_ = &op;
  node->children_ = children;
  node->attrs_ = values;
  node->trainable_ = trainable;
  node->val_ = nullptr;
  node->kernelState_.reset();
  node->computeHash();
  cseRebuild();
}

void ExpressionGraph::retire(Expr e) {
  Node* node = e.operator->();
  ONYX_ASSERT(node->graph_ == this && node->kind_ == NodeKind::Op, "retire: not an op node of this graph");
  for(size_t i = 0; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    for(Node* c : n->children_) ONYX_ASSERT(c != node, "retire: node #", node->id_, " is used by #", n->id_);
  }
  drop(node);
  cseRebuild();
}

void ExpressionGraph::drop(Node* node) {
  // A leaf with no value that matches no Expr: forward() skips leaves other
  // than inputs, and nodes() skips generation 0.
  node->kind_ = NodeKind::Constant;
  node->gen_ = 0;
  node->op_ = nullptr;
  node->children_.clear();
  node->attrs_.clear();
  node->val_ = nullptr;
  node->kernelState_.reset();
  node->keep_ = false;
}

size_t ExpressionGraph::replaceUses(Expr fromE, Expr toE) {
  Node* from = fromE.operator->();
  Node* to = toE.operator->();
  ONYX_ASSERT(from->graph_ == this && to->graph_ == this, "replaceUses: nodes of another graph");
  ONYX_ASSERT(from->shape_ == to->shape_ && from->type_ == to->type_, "replaceUses: ", from->shape_, " ",
              from->type_, " by ", to->shape_, " ", to->type_);
  size_t rewired = 0;
  for(size_t i = 0; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    bool changed = false;
    for(Node*& c : n->children_)
      if(c == from) {
        ONYX_ASSERT(to->id_ < n->id_ || to->kind_ != NodeKind::Op, "replaceUses: #", to->id_,
                    " is not built before its new reader #", n->id_);
        c = to;
        changed = true;
        ++rewired;
      }
    if(changed) {
      n->computeHash();
      n->kernelState_.reset();
    }
  }
  if(rewired) cseRebuild();
  return rewired;
}

void ExpressionGraph::makeConstant(Expr e, Tensor value) {
  Node* node = e.operator->();
  ONYX_ASSERT(node->graph_ == this && node->kind_ == NodeKind::Op, "makeConstant: not an op node of this graph");
  ONYX_ASSERT(value && value->shape() == node->shape_ && value->type() == node->type_, "makeConstant: a value of ",
              value ? value->shape() : Shape(), " for node #", node->id_, " of ", node->shape_, " ", node->type_);
  node->kind_ = NodeKind::Constant;
  node->op_ = nullptr;
  node->children_.clear();
  node->attrs_.clear();
  node->val_ = std::move(value);
  node->kernelState_.reset();
  cseRebuild();
}

size_t ExpressionGraph::prune(const std::vector<Expr>& keep) {
  std::vector<char> live(count_, 0);
  std::vector<Node*> order(count_);
  for(size_t i = 0; i < count_; ++i) order[i] = blocks_[i / kBlockNodes] + i % kBlockNodes;
  // Node i sits at position i of the pool (build order), so a reverse sweep
  // marks every producer after all of its readers.
  // Params live outside the pool and always stay; inputs stay (they are
  // bound by name); a constant goes with its last reader.
  std::unordered_map<const Node*, size_t> pos;
  for(size_t i = 0; i < count_; ++i) pos[order[i]] = i;
  for(const Expr& k : keep) {
    auto it = k ? pos.find(k.get()) : pos.end();
    if(it != pos.end()) live[it->second] = 1;
  }
  for(size_t i = count_; i-- > 0;) {
    Node* n = order[i];
    if(n->gen_ == 0) continue;
    if(n->keep_ || n->checkpoint_ || !n->debugMsg_.empty() || n->kind_ == NodeKind::Input) live[i] = 1;
    if(!live[i]) continue;
    for(Node* c : n->children_) {
      auto it = pos.find(c);
      if(it != pos.end()) live[it->second] = 1;
    }
  }
  size_t dropped = 0;
  for(size_t i = 0; i < count_; ++i) {
    Node* n = order[i];
    if(live[i] || n->gen_ == 0) continue;
    drop(n);
    ++dropped;
  }
  if(dropped) cseRebuild();
  return dropped;
}

void ExpressionGraph::clear() {
  truncate(0);
  nextId_ = 0;
  inputs_.clear();
  for(auto& kv : paramNodes_) {
    kv.second->adj_ = nullptr;
    kv.second->id_ = nextId_++;
  }
}

// ---- leaves

// Initializers write host memory: device tensors are filled through a host copy.
void ExpressionGraph::runInit(const NodeInitializer& init, TensorBase& dst) {
  if(dst.onHost()) return init(dst, rng_);
  Tensor h = TensorBase::create(dst.shape(), dst.type());
  init(*h, rng_);
  dst.copyFrom(*h);
}

Expr ExpressionGraph::constant(const Shape& shape, const NodeInitializer& init, Type type) {
  Node* n = newNode(NodeKind::Constant);
  n->shape_ = shape;
  n->type_ = type == Type::undefined ? defaultType_ : type;
  n->val_ = TensorBase::create(shape, n->type_, workspace_);
  if(init) runInit(init, *n->val_);
  return Expr(n);
}

Expr ExpressionGraph::constant(const Tensor& value) {
  ONYX_CHECK(value != nullptr, "constant(Tensor): null tensor");
  Node* n = newNode(NodeKind::Constant);
  n->shape_ = value->shape();
  n->type_ = value->type();
  if(value->getDeviceId() == device_) {
    n->val_ = value;
  } else {
    // A host tensor (an ONNX initializer, say) on a GPU graph: one copy.
    n->val_ = TensorBase::create(value->shape(), value->type(), device_);
    n->val_->copyFrom(*value);
  }
  return Expr(n);
}

Expr ExpressionGraph::ones(const Shape& shape, Type type) { return constant(shape, inits::ones(), type); }
Expr ExpressionGraph::zeros(const Shape& shape, Type type) { return constant(shape, inits::zeros(), type); }

Expr ExpressionGraph::scalar(double v, Type type) {
  Node* n = newNode(NodeKind::Constant);
  n->type_ = type;
  n->val_ = TensorBase::create(Shape(), type, workspace_);
  n->val_->set(v);
  return Expr(n);
}

Expr ExpressionGraph::indices(const std::vector<int64_t>& v) {
  return constant({static_cast<int64_t>(v.size())}, inits::fromVector(v), Type::int64);
}

Expr ExpressionGraph::param(const std::string& name, const Shape& shape, const NodeInitializer& init, Type type,
                            bool trainable) {
  ONYX_CHECK(!name.empty(), "param(): a param needs a name");
  if(type == Type::undefined) type = defaultType_;
  auto it = paramNodes_.find(name);
  if(it != paramNodes_.end()) {
    Node* p = it->second.get();
    ONYX_CHECK(p->shape_ == shape, "param '", name, "' already exists with shape ", p->shape_,
               " but was requested with shape ", shape, "; use a new name or the same shape");
    ONYX_CHECK(p->type_ == type, "param '", name, "' already exists with type ", p->type_,
               " but was requested with type ", type);
    return Expr(p);
  }
  ONYX_CHECK(!inputs_.count(name), "param '", name, "': an input already has this name");
  auto node = std::unique_ptr<Node>(new Node());
  Node* p = node.get();
  p->gen_ = 0;  // params never die with a clear()
  p->kind_ = NodeKind::Param;
  p->graph_ = this;
  p->id_ = nextId_++;
  p->name_ = name;
  p->shape_ = shape;
  p->type_ = type;
  p->trainable_ = trainable;
  p->val_ = TensorBase::create(shape, type, device_);
  auto pending = pendingLoaded_.find(name);
  if(pending != pendingLoaded_.end()) {
    ONYX_CHECK(pending->second->shape() == shape, "param '", name, "' has shape ", shape,
               " but the loaded model has it as ", pending->second->shape());
    p->val_->copyFrom(*pending->second);
    pendingLoaded_.erase(pending);
  } else if(init) {
    runInit(init, *p->val_);
  } else {
    p->val_->set(0.0);
  }
  paramNodes_[name] = std::move(node);
  Expr e(p);
  params_->ordered_.push_back(e);
  params_->byName_[name] = e;
  return e;
}

Expr ExpressionGraph::input(const std::string& name, const Shape& shape, Type type) {
  ONYX_CHECK(!name.empty(), "input(): an input needs a name");
  ONYX_CHECK(!inputs_.count(name) && !paramNodes_.count(name), "input '", name, "' is already defined in this graph");
  Node* n = newNode(NodeKind::Input);
  n->name_ = name;
  n->shape_ = shape;
  n->type_ = type == Type::undefined ? defaultType_ : type;
  inputs_[name] = n;
  return Expr(n);
}

void ExpressionGraph::bindInput(const std::string& name, const Tensor& t) {
  auto it = inputs_.find(name);
  ONYX_CHECK(it != inputs_.end(), "bindInput: no input named '", name, "' in this graph");
  it->second->bind(t);
}

Expr ExpressionGraph::get(const std::string& name) const {
  auto it = inputs_.find(name);
  if(it != inputs_.end()) return Expr(it->second);
  return params_->get(name);
}

// ---- building

void ExpressionGraph::setAttrs(Node* node, const OpDef& op, const char* name, const AttrValue& v) {
  // Attributes also arrive by name from files (native format, ONNX), so a
  // bad one is the caller's input error, not an internal invariant.
  // The half-built node is dropped before throwing, so the graph stays usable.
  int i = op.attrIndex(name);
  bool ok = i >= 0 && (v.index() == op.attrSpecs[i].defaultValue.index() ||
                       (v.index() == 0 && op.attrSpecs[i].kind() == AttrKind::Float));
  if(!ok) {
    ONYX_ASSERT(node == blocks_[(count_ - 1) / kBlockNodes] + (count_ - 1) % kBlockNodes, "attributes set on an old node");
    truncate(count_ - 1);
    --nextId_;
    if(i < 0) fail(op.name, ": unknown attribute '", name, "'");
    fail(op.name, ": attribute '", name, "' has the wrong kind of value (", attrToString(v), ")");
  }
  if(v.index() == 0 && op.attrSpecs[i].kind() == AttrKind::Float)
    node->attrs_[i] = static_cast<double>(std::get<int64_t>(v));
  else
    node->attrs_[i] = v;
}

Expr ExpressionGraph::makeImpl(const OpDef& op, const Expr* inputs, size_t n) {
  ONYX_CHECK(static_cast<int>(n) >= op.minInputs && (op.maxInputs < 0 || static_cast<int>(n) <= op.maxInputs),
             op.name, ": expects ", op.minInputs == op.maxInputs ? str(op.minInputs) : str(op.minInputs, "..", op.maxInputs < 0 ? std::string("n") : str(op.maxInputs)),
             " inputs, got ", n);
  for(size_t i = 0; i < n; ++i)
    ONYX_CHECK(inputs[i]->graph_ == this, op.name, ": input ", i, " belongs to a different graph");
  Node* node = newNode(NodeKind::Op);
  node->op_ = &op;
  for(size_t i = 0; i < n; ++i) {
    Node* c = inputs[i].get();
    node->children_.push_back(c);
    node->trainable_ = node->trainable_ || c->trainable_;
  }
  node->attrs_.reserve(op.attrSpecs.size());
  for(auto& s : op.attrSpecs) node->attrs_.push_back(s.defaultValue);
  return Expr(node);
}

void ExpressionGraph::inferNode(Node* node) {
  const OpDef& op = *node->op_;
  InferCtx ctx{op, node->children_, node->attrs(), Shape(), Type::undefined};
  try {
    op.inferFn(ctx);
  } catch(...) {
    dropFrom(count_ - 1);  // the half-built node must not stay in the graph (not in the CSE table yet)
    --nextId_;
    throw;
  }
  ONYX_ASSERT(ctx.type != Type::undefined, "op '", op.name, "' inferred no output type");
  node->shape_ = ctx.shape;
  node->type_ = ctx.type;
}

Expr ExpressionGraph::finish(Node* node) {
  inferNode(node);
  node->computeHash();
  if(!node->op_->isStochastic) {
    if(Node* same = cseFind(node)) {
      // Common subexpression: reuse the existing node. The new one was never
      // in the CSE table, so no rebuild: one per hit made an unrolled Loop
      // of repeated expressions quadratic (a fuzzer input ran minutes).
      dropFrom(count_ - 1);
      --nextId_;
      return Expr(same);
    }
    cseInsert(node);
  }
  return Expr(node);
}

Expr ExpressionGraph::make(const OpDef& op, std::initializer_list<Expr> inputs,
                           std::initializer_list<std::pair<const char*, AttrValue>> attrs) {
  Expr e = makeImpl(op, inputs.begin(), inputs.size());
  for(auto& a : attrs) setAttrs(e.get(), op, a.first, a.second);
  return finish(e.get());
}

Expr ExpressionGraph::make(const OpDef& op, const std::vector<Expr>& inputs,
                           std::initializer_list<std::pair<const char*, AttrValue>> attrs) {
  Expr e = makeImpl(op, inputs.data(), inputs.size());
  for(auto& a : attrs) setAttrs(e.get(), op, a.first, a.second);
  return finish(e.get());
}

Expr ExpressionGraph::make(const OpDef& op, const std::vector<Expr>& inputs,
                           const std::vector<std::pair<std::string, AttrValue>>& attrs) {
  Expr e = makeImpl(op, inputs.data(), inputs.size());
  for(auto& a : attrs) setAttrs(e.get(), op, a.first.c_str(), a.second);
  return finish(e.get());
}

Node* ExpressionGraph::cseFind(Node* n) {
  if(cse_.empty()) return nullptr;
  size_t mask = cse_.size() - 1;
  for(size_t i = n->hash_ & mask;; i = (i + 1) & mask) {
    Node* c = cse_[i];
    if(!c) return nullptr;
    if(c != n && c->hash_ == n->hash_ && c->equal(*n)) return c;
  }
}

void ExpressionGraph::cseErase(Node* n) {
  if(cse_.empty()) return;
  const size_t mask = cse_.size() - 1;
  size_t i = n->hash_ & mask;
  while(cse_[i] && cse_[i] != n) i = (i + 1) & mask;
  if(!cse_[i]) return;
  cse_[i] = nullptr;
  --cseCount_;
  // The rest of its probe run goes in again, so that no later entry is cut
  // off from its home slot by the hole.
  for(size_t j = (i + 1) & mask; cse_[j]; j = (j + 1) & mask) {
    Node* m = cse_[j];
    cse_[j] = nullptr;
    --cseCount_;
    cseInsert(m);
  }
}

void ExpressionGraph::cseInsert(Node* n) {
  if((cseCount_ + 1) * 2 > cse_.size()) {
    std::vector<Node*> old;
    old.swap(cse_);
    cse_.assign(std::max<size_t>(64, old.size() * 2), nullptr);
    cseCount_ = 0;
    for(Node* o : old)
      if(o) cseInsert(o);
  }
  size_t mask = cse_.size() - 1;
  size_t i = n->hash_ & mask;
  while(cse_[i]) i = (i + 1) & mask;
  cse_[i] = n;
  ++cseCount_;
}

// ---- execution

void ExpressionGraph::computeNode(Node* n) {
  const OpDef& op = *n->op_;
  const KernelFn& k = op.kernels[static_cast<int>(device_.type)];
  ONYX_CHECK(static_cast<bool>(k), op.name, ": no kernel for device ", device_.toString());
  for(Node* c : n->children_) ensureValue(c);
  // A view shares its input's memory. In training, not of a param: the
  // optimizer updates params in place. Gradients are never written in place
  // while the graph can read them (accumulation adds new nodes; a param's
  // gradient tensor is written by its node or copied into, and only the
  // caller writes it afterwards), so a backward node may view another's
  // value.
  if(op.isView && (inference_ || n->children_[0]->kind_ != NodeKind::Param) &&
     n->type_ != Type::string && n->children_[0]->val_->getDeviceId() == device_) {
    n->val_ = n->children_[0]->val_->reshaped(n->shape_);
    if(!n->debugMsg_.empty() && !n->backwardNode_) printDebug(n, false);
    return;
  }
  // String tensors own their memory (a workspace holds fixed-size elements
  // only), on the host, where the string kernels run.
  // Bad data found while running (an index out of range, say) or memory the
  // output cannot have: the error names the node.
  auto who = [&] {
    return n->name_.empty() ? str("op ", op.name, " (node ", n->id_, ")") : str("node '", n->name_, "' (", op.name, ")");
  };
  try {
    auto out = gradOut_.empty() ? gradOut_.end() : gradOut_.find(n);
    if(out != gradOut_.end()) {
      n->val_ = out->second;
      gradOut_.erase(out);
    } else {
      n->val_ = n->type_ == Type::string ? TensorBase::create(n->shape_, Type::string)
                                         : TensorBase::create(n->shape_, n->type_, workspace_);
    }
    KernelCtx ctx{*n, *n->val_, {}, n->attrs(), rng_, *this};
    for(Node* c : n->children_) ctx.in.push_back(c->val_.get());
    k(ctx);
  } catch(const Error& e) {
    std::string msg = e.what();
    if(msg.find(who()) != std::string::npos) throw;
    throw Error(str(who(), ": ", msg));
  } catch(const std::bad_alloc&) {
    throw Error(str(who(), ": out of memory (output ", n->shape_, " ", n->type_, ")"));
  } catch(const std::length_error&) {
    throw Error(str(who(), ": out of memory (output ", n->shape_, " ", n->type_, ")"));
  }
  if(!n->debugMsg_.empty() && !n->backwardNode_) printDebug(n, false);
}

void ExpressionGraph::ensureValue(Node* n) {
  if(n->val_) return;
  ONYX_CHECK(n->kind_ != NodeKind::Input, "input '", n->name_, "' has no value: bind a tensor before forward()");
  ONYX_ASSERT(n->kind_ == NodeKind::Op, "leaf node ", n->id_, " has no value");
  // Freed by memory planning (checkpointing): recompute from its inputs.
  n->recomputed_ = true;
  computeNode(n);
  // Inputs recomputed only for this node die now; those that backward nodes
  // still read are counted in pending_ and die after their last reader.
  for(Node* c : n->children_)
    if(c->recomputed_ && c->pending_ <= 0) {
      c->val_.reset();
      c->recomputed_ = false;
    }
}

void ExpressionGraph::releaseValue(Node* n) {
  if(n->kind_ == NodeKind::Op && !n->debugMsg_.size() && !n->checkpoint_ && !n->keep_) n->val_.reset();
}

Tensor ExpressionGraph::value(Expr e) {
  Node* root = e.get();
  ONYX_CHECK(root && e.valid(), "value(): invalid expression");
  if(root->val_) return root->val_;
  // Iterative post-order over the nodes that still lack a value.
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while(!stack.empty()) {
    auto& top = stack.back();
    Node* n = top.first;
    if(top.second < n->children_.size()) {
      Node* c = n->children_[top.second++];
      if(!c->val_) {
        ONYX_CHECK(c->kind_ != NodeKind::Input, "input '", c->name_, "' has no value: bind a tensor before value()");
        stack.push_back({c, 0});
      }
      continue;
    }
    if(!n->val_) computeNode(n);
    stack.pop_back();
  }
  return root->val_;
}

// computeNode, timed into the profiler when one is set (forward's nodes and
// backward's gradient nodes alike).
void ExpressionGraph::computeTimed(Node* n) {
  if(!profiler_) return computeNode(n);
  auto t0 = Profiler::Clock::now();
  computeNode(n);
  // GPU kernels run asynchronously: wait for the node's, or its time would
  // be its launch's and the next blocking copy's.
  if(device_.type == DeviceType::gpu) gpuBackend().synchronize(device_.no);
  profiler_->record(*n, t0, Profiler::Clock::now());
}

void ExpressionGraph::forward() {
  // Count consumers so intermediate values can be freed after their last use
  // when the graph is for inference or checkpointed training.
  bool freeing = inference_ || checkpointing_;
  std::vector<Node*> order;
  order.reserve(count_);
  for(size_t i = 0; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    n->pending_ = 0;
    n->recomputed_ = false;
    order.push_back(n);
  }
  for(Node* n : order)
    for(Node* c : n->children_) ++c->pending_;
  for(Node* n : order) {
    if(n->kind_ == NodeKind::Input) ONYX_CHECK(n->val_, "input '", n->name_, "' has no value: bind a tensor before forward()");
    if(n->kind_ != NodeKind::Op) continue;
    computeTimed(n);
    if(freeing) {
      for(Node* c : n->children_)
        if(--c->pending_ == 0) releaseValue(c);
    }
  }
  if(profiler_) profiler_->endRun();
  for(Node* n : order)
    if(n->kind_ == NodeKind::Param && !n->debugMsg_.empty()) printDebug(n, false);
  for(auto& kv : paramNodes_)
    if(!kv.second->debugMsg_.empty()) printDebug(kv.second.get(), false);
}

void GradCtx::add(size_t i, Expr g) {
  Node* c = node->children_[i];
  if(!c->needsGrad_ || !g) return;
  if(g->shape() != c->shape()) {
    // Undo broadcasting: sum over the broadcast dims, then drop/restore rank.
    const Shape& gs = g->shape();
    const Shape& cs = c->shape();
    int off = gs.rank() - cs.rank();
    ONYX_ASSERT(off >= 0, "gradient of shape ", gs, " for input of shape ", cs, " in op ", node->type());
    IntList axes;
    for(int a = 0; a < gs.rank(); ++a)
      if(a < off || (cs.dims()[a - off] == 1 && gs.dims()[a] != 1)) axes.push_back(a);
    const OpDef& sum = Registry::instance().get("sum");
    if(!axes.empty()) g = graph.make(sum, {g}, {{"axes", axes}, {"keepdims", int64_t(1)}});
    if(g->shape() != cs) g = graph.make(Registry::instance().get("reshape"), {g}, {{"shape", attr(cs.vec())}});
  }
  if(g->value_type() != c->value_type())
    g = graph.make(Registry::instance().get("cast"), {g}, {{"to", int64_t(c->value_type())}});
  if(c->adj_) {
    if(Node* merged = graph.mergeAdjoints(c->adj_, g.get())) {
      c->adj_ = merged;
      return;
    }
    g = graph.make(Registry::instance().get("add"), {Expr(c->adj_), g});
  }
  c->adj_ = g.get();
}

// Two gradients of one tensor folded into one node where one kernel does
// both in a pass, instead of the two nodes and an add between them. Only for
// nodes this backward made and nothing reads yet (an adjoint is read only
// once its node's own rule runs, after every contribution), of one shape and
// type; the two leave the graph. On CPU graphs:
// - two scatter_adds into zeros of the tensor's shape (the gradients of
//   gathers from it along one axis: a fused QKV projection split by three
//   Gathers) -> one scatter_add of all their pairs (updates, indices): one
//   zero fill and one pass instead of a zero-filled tensor per gather. (Its
//   GPU kernel of several pairs is compiled but has not run on a GPU yet.)
// - dy * f (f per channel: a training batch_normalize's part of dx) and
//   batch_moments_grad(x, m, dm) (the statistics' part) -> batch_moments_grad
//   (x, m, dm, dy, f): a batch norm's whole dx in one pass over dy and x.
Node* ExpressionGraph::mergeAdjoints(Node* adj, Node* g) {
  static const OpDef& scatter = Registry::instance().get("scatter_add");
  static const OpDef& mul = Registry::instance().get("mul");
  static const OpDef& momentsGrad = Registry::instance().get("batch_moments_grad");
  if(device_.type != DeviceType::cpu || adj == g || adj->kind_ != NodeKind::Op || g->kind_ != NodeKind::Op ||
     adj->id_ < backwardFirstId_ || g->id_ < backwardFirstId_ || adj->shape_ != g->shape_ || adj->type_ != g->type_)
    return nullptr;
  std::vector<Expr> in;
  Expr merged;
  if(adj->op_ == &scatter && g->op_ == &scatter && adj->attrs_ == g->attrs_) {
    for(Node* c : adj->children_) in.emplace_back(c);
    for(Node* c : g->children_) in.emplace_back(c);
    merged = make(scatter, in, {{"axis", adj->attrs_[0]}, {"dim", adj->attrs_[1]}});
  } else if(adj->op_ == &mul && g->op_ == &momentsGrad && g->children_.size() == 3 && adj->children_.size() == 2) {
    const Node* x = g->children_[0];
    const int r = x->shape_.rank();
    const int64_t C = x->shape_[1];
    // f's shape broadcasts along x's channel axis only: [C, 1, ..] or [1, C, 1, ..].
    auto perChannel = [&](const Node* f) {
      const Shape& fs = f->shape_;
      if(f->type_ != x->type_ || fs.elements() != C) return false;
      if(fs.rank() == r - 1) return fs.rank() >= 1 && fs[0] == C;
      return fs.rank() == r && fs[0] == 1 && fs[1] == C;
    };
    Node *dy = adj->children_[0], *f = adj->children_[1];
    if(!(dy->shape_ == x->shape_ && perChannel(f))) std::swap(dy, f);
    if(!(dy->shape_ == x->shape_ && dy->type_ == x->type_ && perChannel(f))) return nullptr;
    for(Node* c : g->children_) in.emplace_back(c);
    in.emplace_back(dy);
    in.emplace_back(f);
    merged = make(momentsGrad, in, {});
  } else {
    return nullptr;
  }
  for(Node* dead : {adj, g}) {
    cseErase(dead);
    drop(dead);
  }
  return merged.get();
}

bool GradCtx::needs(size_t i) const { return node->children_[i]->needsGrad_; }

// Seeds root's adjoint with ones and runs the backward rules of the nodes of
// `order` (the build up to now) from root down, in reverse build order. A node
// propagates when one of its inputs has needsGrad_ set; the adjoints collect
// in adj_. The rules' expressions become new nodes after `order`.
void ExpressionGraph::buildAdjoints(const std::vector<Node*>& order, Node* root) {
  // The nodes made from here on are this backward's (mergeAdjoints).
  struct BackwardIds {
    size_t& first;
    ~BackwardIds() { first = SIZE_MAX; }
  } ids{backwardFirstId_};
  backwardFirstId_ = nextId_;
  root->adj_ = ones(root->shape_, root->type_).get();
  size_t rootIdx = 0;
  for(size_t i = 0; i < order.size(); ++i)
    if(order[i] == root) rootIdx = i;
  for(size_t i = rootIdx + 1; i-- > 0;) {
    Node* n = order[i];
    if(n->kind_ != NodeKind::Op || !n->adj_) continue;
    bool wanted = false;
    for(Node* c : n->children_) wanted = wanted || c->needsGrad_;
    if(!wanted) continue;
    ONYX_CHECK(n->op_->differentiable(), "cannot differentiate through op '", n->op_->name, "' (node ", n->id_,
               "): ", n->op_->notDifferentiableWhy, "; make its inputs constants or wrap them in stop_gradient");
    GradCtx ctx{n, *this, Expr(n->adj_), n->attrs()};
    n->op_->backwardFn(ctx);
  }
}

std::vector<Expr> ExpressionGraph::gradients(Expr y, const std::vector<Expr>& xs) {
  ONYX_CHECK(y && y.valid(), "gradients(): y is a null or stale expression");
  ONYX_CHECK(y->graph_ == this, "gradients(): y belongs to a different graph");
  ONYX_CHECK(isFloat(y->type_), "gradients(): y must be a float tensor, got ", y->type_);
  for(size_t i = 0; i < xs.size(); ++i) {
    ONYX_CHECK(xs[i] && xs[i].valid(), "gradients(): x ", i, " is a null or stale expression");
    ONYX_CHECK(xs[i]->graph_ == this, "gradients(): x ", i, " belongs to a different graph");
  }
  Node* root = y.get();
  size_t forwardCount = count_;
  std::vector<Node*> order;
  order.reserve(forwardCount);
  for(size_t i = 0; i < forwardCount; ++i) order.push_back(blocks_[i / kBlockNodes] + i % kBlockNodes);
  // adj_ and needsGrad_ are scratch fields of the autodiff: clear them before
  // and after, so that a later backward() starts from a clean state.
  auto reset = [&] {
    for(auto& kv : paramNodes_) {
      kv.second->adj_ = nullptr;
      kv.second->needsGrad_ = false;
    }
    for(Node* n : order) {
      n->adj_ = nullptr;
      n->needsGrad_ = false;
    }
  };
  reset();
  // Which nodes depend on one of xs.
  for(const Expr& x : xs) x->needsGrad_ = true;
  for(Node* n : order)
    if(n->kind_ == NodeKind::Op)
      for(Node* c : n->children_) n->needsGrad_ = n->needsGrad_ || c->needsGrad_;
  std::vector<Expr> out;
  try {
    if(root->needsGrad_) buildAdjoints(order, root);
    for(const Expr& x : xs) out.push_back(x->adj_ ? Expr(x->adj_) : zeros(x->shape_, x->type_));
  } catch(...) {
    // Leave the graph as it was: drop the half-built gradient nodes.
    reset();
    nextId_ -= count_ - forwardCount;
    truncate(forwardCount);
    throw;
  }
  reset();
  return out;
}

void ExpressionGraph::backward(Expr rootExpr) {
  ONYX_CHECK(!inference_, "backward() on a graph in inference mode; call setInference(false) to train");
  ONYX_CHECK(count_ > 0, "backward() on an empty graph");
  Node* root = rootExpr ? rootExpr.operator->() : blocks_[(count_ - 1) / kBlockNodes] + (count_ - 1) % kBlockNodes;
  size_t forwardCount = count_;
  std::vector<Node*> order;
  order.reserve(forwardCount);
  for(size_t i = 0; i < forwardCount; ++i) order.push_back(blocks_[i / kBlockNodes] + i % kBlockNodes);

  // Which nodes lie on a path from a trainable param to the root.
  for(auto& kv : paramNodes_) {
    kv.second->needsGrad_ = kv.second->trainable_;
    kv.second->adj_ = nullptr;
  }
  for(Node* n : order) {
    n->adj_ = nullptr;
    n->backwardNode_ = false;
    if(n->kind_ != NodeKind::Op) { n->needsGrad_ = n->kind_ == NodeKind::Param && n->trainable_; continue; }
    n->needsGrad_ = false;
    for(Node* c : n->children_) n->needsGrad_ = n->needsGrad_ || c->needsGrad_;
  }
  if(root->kind_ == NodeKind::Param) root->needsGrad_ = root->trainable_;

  // Build the gradient expressions in reverse order.
  if(root->needsGrad_) {
    ensureValue(root);
    buildAdjoints(order, root);
  }

  // Execute the new (backward) nodes; free each value after its last use.
  for(size_t i = forwardCount; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    n->backwardNode_ = true;
    n->pending_ = 0;
  }
  // A param's whole gradient computed by a backward op node (not a view)
  // of its shape and type is written straight into the param's persistent
  // gradient tensor; the first param claims a node two params share. Only
  // a tensor nobody else holds (no handle of the caller's, no constant
  // made of it, no view): one that a node of this graph may read is
  // copied into after backward, as before.
  gradOut_.clear();
  for(auto& kv : paramNodes_) {
    Node* p = kv.second.get();
    Node* a = p->adj_;
    if(!p->trainable_ || !a || !a->backwardNode_ || a->kind_ != NodeKind::Op || a->op_->isView || a->val_ ||
       a->shape_ != p->shape_ || a->type_ != p->type_ || a->type_ == Type::string || gradOut_.count(a))
      continue;
    if(!p->grad_) p->grad_ = TensorBase::create(p->shape_, p->type_, device_);
    if(p->grad_.use_count() == 1 && p->grad_->getDeviceId() == device_) gradOut_[a] = p->grad_;
  }
  // Never left behind (a throw below): the node pool reuses addresses.
  struct ClearOnExit {
    std::unordered_map<const Node*, Tensor>& m;
    ~ClearOnExit() { m.clear(); }
  } clearGradOut{gradOut_};
  std::vector<Node*> keep;  // nodes whose gradient the user keeps
  for(auto& kv : paramNodes_)
    if(kv.second->adj_) keep.push_back(kv.second.get());
  for(Node* n : order)
    if(n->adj_ && (n->retainGrad_ || n->kind_ == NodeKind::Param)) keep.push_back(n);
  for(Node* n : order) n->pending_ = 0;
  for(Node* k : keep) ++k->adj_->pending_;
  for(size_t i = forwardCount; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    for(Node* c : n->children_) ++c->pending_;
  }
  for(size_t i = forwardCount; i < count_; ++i) {
    Node* n = blocks_[i / kBlockNodes] + i % kBlockNodes;
    if(n->kind_ == NodeKind::Op) computeTimed(n);
    for(Node* c : n->children_) {
      if(--c->pending_ > 0) continue;
      if(c->backwardNode_ || (c->recomputed_ && checkpointing_)) {
        if(c->kind_ == NodeKind::Op) c->val_.reset();
        c->recomputed_ = false;
      }
    }
  }
  // Hand gradients to their nodes; params keep a persistent gradient tensor.
  // Host copies of one type go as 256 KiB pieces over the threads (one
  // memcpy each was a serial pass over every param's gradient, 13 MB for a
  // 4-layer encoder, with the other thread idle).
  struct Piece {
    char* to;
    const char* from;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  size_t pieceBytes = 0;
  constexpr size_t kPiece = size_t(1) << 18;
  for(auto& kv : paramNodes_) {
    Node* p = kv.second.get();
    if(!p->trainable_) continue;
    if(!p->grad_) p->grad_ = TensorBase::create(p->shape_, p->type_, device_);
    if(!p->adj_) {
      p->grad_->set(0.0);
      continue;
    }
    if(p->adj_->val_ == p->grad_) continue;  // written in place
    const TensorBase& from = *p->adj_->val_;
    TensorBase& to = *p->grad_;
    if(!to.onHost() || !from.onHost() || to.type() != from.type() || to.type() == Type::string ||
       to.size() != from.size()) {
      to.copyFrom(from);
      continue;
    }
    for(size_t o = 0; o < to.bytes(); o += kPiece) {
      const size_t n = std::min(kPiece, to.bytes() - o);
      pieces.push_back({static_cast<char*>(to.raw()) + o, static_cast<const char*>(from.raw()) + o, n});
      pieceBytes += n;
    }
  }
  host::parallelFor(static_cast<int64_t>(pieces.size()), static_cast<int64_t>(pieceBytes / 4),
                    [&](int64_t b, int64_t e) {
                      for(int64_t i = b; i < e; ++i) {
                        const Piece& pc = pieces[static_cast<size_t>(i)];
                        std::memcpy(pc.to, pc.from, pc.bytes);
                      }
                    });
  for(Node* n : order) {
    if(n->kind_ == NodeKind::Param) continue;
    n->grad_ = (n->adj_ && n->retainGrad_) ? n->adj_->val_ : Tensor();
  }
  for(auto& kv : paramNodes_)
    if(!kv.second->debugMsg_.empty()) printDebug(kv.second.get(), true);
  for(Node* n : order)
    if(!n->debugMsg_.empty() && n->kind_ != NodeKind::Param && n->grad_) printDebug(n, true);
  // The gradient expressions are transient: drop them, keep the forward graph.
  for(auto& kv : paramNodes_) kv.second->adj_ = nullptr;
  for(Node* n : order) n->adj_ = nullptr;
  nextId_ -= count_ - forwardCount;
  truncate(forwardCount);
}

void ExpressionGraph::printDebug(Node* n, bool grad) const {
  Tensor t = grad ? n->grad_ : n->val_;
  if(!t) return;
  std::ostringstream os;
  os << (grad ? "Debug Grad: " : "Debug: ") << n->debugMsg_ << " op=" << n->type() << "\n" << t->debug();
  std::string s = os.str();
  if(logging::enabled()) {
    // First line through the logger (timestamped), the values as they are.
    auto nl = s.find('\n');
    logging::info(s.substr(0, nl));
    auto nl2 = s.find('\n', nl + 1);
    logging::info(s.substr(nl + 1, nl2 - nl - 1));
    std::cerr << s.substr(nl2 + 1);
  } else {
    std::cerr << s;
  }
}

MemoryStats ExpressionGraph::memoryStats() const {
  return {workspace_->peakBytes(), workspace_->bytesInUse(), workspace_->capacity()};
}

void ExpressionGraph::resetPeakMemory() { workspace_->resetPeak(); }

// ---- graphviz

std::string ExpressionGraph::graphviz() const {
  std::ostringstream os;
  os << "digraph ExpressionGraph {\n  graph[splines=ortho]\n  node[fontname=\"Helvetica\"]\n  rankdir=LR\n";
  std::vector<const Node*> all;
  for(auto& kv : paramNodes_) all.push_back(kv.second.get());
  for(size_t i = 0; i < count_; ++i) all.push_back(blocks_[i / kBlockNodes] + i % kBlockNodes);
  auto esc = [](const std::string& s) {
    std::string r;
    for(char ch : s) { if(ch == '"' || ch == '\\') r += '\\'; r += ch; }
    return r;
  };
  for(const Node* n : all) {
    std::string label = n->type() + " (" + std::to_string(n->id_) + ", " + (n->trainable_ ? "1" : "0") + ")";
    if(!n->name_.empty()) label += "\\n" + esc(n->name_);
    label += "\\n" + n->shape_.toString() + " " + typeName(n->type_);
    if(n->op_)
      for(size_t a = 0; a < n->attrs_.size(); ++a)
        if(!(n->attrs_[a] == n->op_->attrSpecs[a].defaultValue))
          label += "\\n" + n->op_->attrSpecs[a].name + "=" + esc(attrToString(n->attrs_[a]));
    const char* shape = n->kind_ == NodeKind::Param ? "box" : n->kind_ == NodeKind::Op ? "ellipse" : "octagon";
    const char* color = n->kind_ == NodeKind::Param ? (n->trainable_ ? "orange" : "gray") : n->kind_ == NodeKind::Op ? "white" : "lightblue";
    os << "  \"n" << n->id_ << "\" [shape=\"" << shape << "\", label=\"" << label << "\", style=\"filled\", fillcolor=\""
       << color << "\"]\n";
  }
  for(const Node* n : all)
    for(const Node* c : n->children_) os << "  \"n" << c->id_ << "\" -> \"n" << n->id_ << "\"\n";
  os << "}\n";
  return os.str();
}

// ---- save / load

void ExpressionGraph::save(const std::string& filename) const {
  io::NamedTensors items;
  for(auto& p : params_->all()) items.emplace_back(p->name(), p->val());
  io::saveNpz(filename, items);
}

void ExpressionGraph::load(const std::string& filename) {
  for(auto& kv : io::loadNpz(filename)) {
    auto it = paramNodes_.find(kv.first);
    if(it == paramNodes_.end()) {
      pendingLoaded_[kv.first] = kv.second;  // picked up by a later param() call
      continue;
    }
    Node* p = it->second.get();
    ONYX_CHECK(p->shape_ == kv.second->shape(), filename, ": param '", kv.first, "' has shape ", kv.second->shape(),
               " in the file but ", p->shape_, " in the graph");
    p->val_->copyFrom(*kv.second);
  }
}

}  // namespace onyx
