// ExpressionGraph: a dynamic graph rebuilt per batch (seed design), with
// reverse-mode autodiff whose backward rules are themselves graph expressions.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include <onyx/core/allocator.h>
#include <onyx/core/device.h>
#include <onyx/core/ptr.h>
#include <onyx/graph/node.h>
#include <onyx/graph/op_def.h>
#include <onyx/graph/profiler.h>

namespace onyx {

// The persistent set of a graph's params (survives clear()).
class Parameters {
public:
  const std::vector<Expr>& all() const { return ordered_; }
  std::vector<Expr>::const_iterator begin() const { return ordered_.begin(); }
  std::vector<Expr>::const_iterator end() const { return ordered_.end(); }
  size_t size() const { return ordered_.size(); }
  Expr get(const std::string& name) const;  // null Expr if absent
  int64_t totalElements() const;

private:
  friend class ExpressionGraph;
  std::vector<Expr> ordered_;
  std::map<std::string, Expr> byName_;
};

// Memory figures of the last forward/backward (workspace bytes).
struct MemoryStats {
  size_t peakBytes = 0;
  size_t inUseBytes = 0;
  size_t capacityBytes = 0;
};

// The arithmetic of float32 matrix products (matmul, affine) and
// convolutions, forward and backward. float32: as written. bfloat16: their
// operands are rounded to bfloat16 (8 significant bits, round to nearest
// even) and the products summed in float32 (oneDNN's AMX / AVX512_BF16
// kernels), about twice as fast; every stored value (activations, params,
// gradients, optimizer state) stays float32, so params keep full-precision
// master values. What PyTorch's CPU autocast to bfloat16 computes for these
// ops, and torch.set_float32_matmul_precision("medium"). On a CPU without
// bfloat16 instructions (bf16Available() false), and on GPUs, it computes
// in float32.
enum class ComputePrecision : uint8_t { float32, bfloat16 };
// "float32" / "fp32" or "bf16" / "bfloat16"; anything else is an onyx::Error
// naming `what` (a flag or option) and the accepted names.
ComputePrecision parseComputePrecision(const std::string& name, const std::string& what = "precision");
const char* computePrecisionName(ComputePrecision p);  // "float32" or "bf16"
// Whether this CPU computes bfloat16 products in hardware (AVX512_BF16 or
// AMX, detected at run time; ONYX_BF16=0 in the environment says no).
bool bf16Available();

class ExpressionGraph : public std::enable_shared_from_this<ExpressionGraph> {
public:
  ExpressionGraph();
  ~ExpressionGraph();
  ExpressionGraph(const ExpressionGraph&) = delete;
  ExpressionGraph& operator=(const ExpressionGraph&) = delete;

  // ---- set-up ----
  void setDevice(DeviceId device);
  DeviceId getDeviceId() const { return device_; }
  void reserveWorkspaceMB(size_t mb);
  void setDefaultElementType(Type t) { defaultType_ = t; }
  Type getDefaultElementType() const { return defaultType_; }
  void setInference(bool inference) { inference_ = inference; }
  bool isInference() const { return inference_; }
  void setCheckpointing(bool on) { checkpointing_ = on; }
  bool isCheckpointing() const { return checkpointing_; }
  void setSeed(uint64_t seed) { rng_.seed(seed); }
  // See ComputePrecision; float32 by default, kept across clear().
  void setComputePrecision(ComputePrecision p) { precision_ = p; }
  ComputePrecision computePrecision() const { return precision_; }
  // Times every node forward() and backward() run into `p`
  // (graph/profiler.h); null: off.
  void setProfiler(std::shared_ptr<Profiler> p) { profiler_ = std::move(p); }
  const std::shared_ptr<Profiler>& profiler() const { return profiler_; }
  Rng& rng() { return rng_; }

  // ---- leaves ----
  Expr constant(const Shape& shape, const NodeInitializer& init, Type type = Type::undefined);
  // A constant that shares `value`'s memory (no copy) when it lives on the
  // graph's device (it must not change while the graph uses it); a tensor on
  // another device is copied to the graph's once.
  Expr constant(const Tensor& value);
  Expr ones(const Shape& shape, Type type = Type::undefined);
  Expr zeros(const Shape& shape, Type type = Type::undefined);
  // A rank-0 constant (used by the scalar forms of the operators).
  Expr scalar(double v, Type type);
  // Integer labels / indices as an int64 vector.
  Expr indices(const std::vector<int64_t>& v);
  template <class I, class = std::enable_if_t<std::is_integral<I>::value && !std::is_same<I, int64_t>::value>>
  Expr indices(const std::vector<I>& v) { return indices(std::vector<int64_t>(v.begin(), v.end())); }
  // Named params persist across clear(); asking again for a name returns the
  // same param (its shape and type must match).
  Expr param(const std::string& name, const Shape& shape, const NodeInitializer& init,
             Type type = Type::undefined, bool trainable = true);
  Expr param(const std::string& name, const Shape& shape, const NodeInitializer& init, bool trainable) {
    return param(name, shape, init, Type::undefined, trainable);
  }
  // An input whose value is bound (and re-bound) with node->bind(tensor) or
  // bindInput(name, tensor) before each forward().
  Expr input(const std::string& name, const Shape& shape, Type type = Type::undefined);
  void bindInput(const std::string& name, const Tensor& t);
  Expr get(const std::string& name) const;  // param or input by name, null if absent

  // ---- building (used by the expression operators) ----
  Expr make(const OpDef& op, std::initializer_list<Expr> inputs,
            std::initializer_list<std::pair<const char*, AttrValue>> attrs = {});
  Expr make(const OpDef& op, const std::vector<Expr>& inputs,
            std::initializer_list<std::pair<const char*, AttrValue>> attrs = {});
  Expr make(const OpDef& op, const std::vector<Expr>& inputs, const std::vector<std::pair<std::string, AttrValue>>& attrs);

  // ---- rewriting (for passes over a built graph, e.g. graph/passes/fuse_conv) ----
  // Makes op node `node` compute op(inputs) with `attrs` instead, in place,
  // so its consumers and the Exprs to it stay valid. The new definition must
  // give the node's shape and type, and every input must have been built
  // before `node` (build order stays topological).
  void redefine(Expr node, const OpDef& op, const std::vector<Expr>& inputs,
                const std::vector<std::pair<std::string, AttrValue>>& attrs);
  // Drops op node `node`, which no node may use any more: forward() no longer
  // runs it, nodes() leaves it out, and Exprs to it become stale.
  void retire(Expr node);
  // Every node that reads `from` reads `to` instead (same shape and type;
  // `to` built before each of those readers). Exprs held elsewhere still
  // point to `from`. Returns the number of inputs rewired.
  size_t replaceUses(Expr from, Expr to);
  // Makes op node `node` a constant holding `value` (its shape and type, on
  // the graph's device): forward() no longer runs it, its inputs lose a
  // reader. For constant folding.
  void makeConstant(Expr node, Tensor value);
  // Drops every op node that no kept node depends on (`keep`: the graph's
  // outputs). Returns how many were dropped.
  size_t prune(const std::vector<Expr>& keep);

  // ---- execution ----
  void forward();
  // Computes `e` (and what it needs) now and returns its value: for values
  // that steer graph construction (shapes, indices) while the graph is built.
  // forward() later recomputes everything as usual.
  Tensor value(Expr e);
  // Reverse-mode autodiff from `root` (default: the last node built), seeded
  // with ones. Param gradients are overwritten (not accumulated across calls).
  void backward(Expr root = nullptr);
  void backprop() { forward(); backward(); }
  // Symbolic gradients: for each x of `xs`, the expression of d(sum of y)/dx
  // (y seeded with ones, as backward() does), built as ordinary nodes of the
  // current build with the ops' backward rules; nothing is computed. Where y
  // does not depend on x, the result is zeros of x's shape. The results are
  // evaluated by forward() like any other node and can themselves be
  // differentiated; forward() and backward() work as before afterwards.
  std::vector<Expr> gradients(Expr y, const std::vector<Expr>& xs);
  void clear();  // drops all nodes but params (and their optimizer state elsewhere)

  // ---- inspection ----
  Ptr<Parameters> params() const { return params_; }
  size_t size() const { return count_; }  // nodes in the current build
  std::vector<Expr> nodes() const;        // in build (topological) order
  std::string graphviz() const;
  MemoryStats memoryStats() const;
  void resetPeakMemory();

  // ---- params I/O (.npz, readable by numpy) ----
  void save(const std::string& filename) const;
  void load(const std::string& filename);

  // Internal: executes one node (allocates its value, runs its kernel).
  void computeNode(Node* n);
  void computeTimed(Node* n);  // computeNode, timed when a profiler is set
  Ptr<Allocator> workspace() const { return workspace_; }

private:
  void runInit(const NodeInitializer& init, TensorBase& dst);
  Node* newNode(NodeKind kind);
  Expr finish(Node* n);
  Expr makeImpl(const OpDef& op, const Expr* inputs, size_t n);
  void setAttrs(Node* node, const OpDef& op, const char* name, const AttrValue& v);
  void inferNode(Node* n);
  void ensureValue(Node* n);
  void releaseValue(Node* n);
  void truncate(size_t mark);  // dropFrom, then the CSE table rebuilt
  void dropFrom(size_t mark);  // nodes from mark on released; none may be in the CSE table
  void cseErase(Node* n);      // n out of the CSE table (if there)
  // GradCtx::add: adj and g (two gradients of one node) as one node where a
  // kernel does both (see there); the merged adjoint, or null.
  Node* mergeAdjoints(Node* adj, Node* g);
  friend struct GradCtx;
  void drop(Node* n);  // retire/prune: the node leaves the graph (its slot stays)
  void buildAdjoints(const std::vector<Node*>& order, Node* root);
  void printDebug(Node* n, bool grad) const;
  Node* cseFind(Node* n);
  void cseInsert(Node* n);
  void cseRebuild();

  DeviceId device_;
  size_t backwardFirstId_ = SIZE_MAX;  // while buildAdjoints runs: the first id of its nodes
  Ptr<Allocator> workspace_;
  Type defaultType_ = Type::float32;
  bool inference_ = false;
  ComputePrecision precision_ = ComputePrecision::float32;
  bool checkpointing_ = false;
  Rng rng_{1234};
  std::shared_ptr<Profiler> profiler_;

  // Node pool: fixed blocks, nodes addressed by index; never shrinks until
  // destruction, so a rebuilt graph reuses the same memory.
  static constexpr size_t kBlockNodes = 256;
  std::vector<Node*> blocks_;
  size_t count_ = 0;
  uint32_t generation_ = 1;
  size_t nextId_ = 0;
  std::vector<Node*> cse_;  // open addressing, sized to a power of two
  size_t cseCount_ = 0;

  Ptr<Parameters> params_;
  std::map<std::string, std::unique_ptr<Node>> paramNodes_;
  std::map<std::string, Tensor> pendingLoaded_;  // load() before param()
  std::map<std::string, Node*> inputs_;
  // backward(): the nodes that compute a param's whole gradient, with the
  // param's gradient tensor they write into (no copy afterwards).
  std::unordered_map<const Node*, Tensor> gradOut_;
};

}  // namespace onyx
