// The op registry: one OpDef per op, declared once in its family file under
// src/ops with everything about it side by side (name, attributes, shape
// inference, kernels, backward, ONNX rules). Graph building, execution,
// autodiff, the importer/exporter, docs and the test harness all loop over it.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

struct InferCtx;
struct KernelCtx;
struct GradCtx;

using InferFn = std::function<void(InferCtx&)>;
using KernelFn = std::function<void(KernelCtx&)>;
using BackwardFn = std::function<void(GradCtx&)>;

// A kernel per device, from one definition (see ops/kernel_helpers.h): the
// GPU one is empty where the family file is not compiled by nvcc (always in
// libonyx; the CUDA plugin compiles the functor families again for it).
struct Kernels {
  KernelFn cpu, gpu;
};

struct OpDef {
  std::string name;  // friendly, unique, lower_snake_case
  std::string docString;
  std::string family;
  int minInputs = 1, maxInputs = 1;  // maxInputs -1: variadic
  std::vector<AttrSpec> attrSpecs;
  InferFn inferFn;
  // By DeviceType. The GPU kernel is set here only by anyDevice(); the
  // others are grafted on by the CUDA plugin when it loads (a GPU kernel's
  // code lives in the plugin, which libonyx never links).
  KernelFn kernels[2];
  BackwardFn backwardFn;
  std::string notDifferentiableWhy;
  std::vector<OnnxRule> onnxRules;  // see graph/onnx_rule.h
  std::string noOnnxWhy;
  bool isStochastic = false;
  // The output is input 0's elements, in order, under the node's shape
  // (reshape, flatten): the graph makes it a view of input 0's buffer
  // instead of running the kernel (no copy, no memory); in training only
  // forward nodes over non-params (ExpressionGraph::computeNode).
  bool isView = false;
  // Why the GPU runs this op's CPU kernel on host copies of the inputs and
  // uploads the result ("" for the ops that run on the GPU): random draws
  // (so that a seed gives the same values on every device) and ops without
  // a GPU form yet. The plugin makes that kernel for every op so declared.
  std::string gpuOnHostWhy;

  // Declarative builder, used as ONYX_OP(kSin, "sin").doc(..).inputs(1)...
  OpDef& doc(std::string d) { docString = std::move(d); return *this; }
  OpDef& inputs(int n) { minInputs = maxInputs = n; return *this; }
  OpDef& inputs(int lo, int hi) { minInputs = lo; maxInputs = hi; return *this; }
  OpDef& attr(const std::string& n, AttrValue def) { attrSpecs.push_back({n, std::move(def)}); return *this; }
  OpDef& infer(InferFn f) { inferFn = std::move(f); return *this; }
  // The CPU kernel. A GPU kernel is not declared here: it comes from the
  // same functor (kernel()), is one for both devices (anyDevice()), runs on
  // host copies (gpuOnHost()), or is registered by the CUDA plugin
  // (backend/cuda/plugin.h).
  OpDef& cpu(KernelFn f) { kernels[0] = std::move(f); return *this; }
  // One kernel for every device: it is written with primitives that work on
  // the tensors' own device (host code, or core/device_backend.h's element
  // movers and GEMM on a GPU).
  OpDef& anyDevice(KernelFn f) { kernels[0] = kernels[1] = std::move(f); return *this; }
  OpDef& kernel(Kernels k) {
    kernels[0] = std::move(k.cpu);
    if(k.gpu) kernels[1] = std::move(k.gpu);
    return *this;
  }
  // On a GPU, the CPU kernel runs on host copies of the inputs, for the
  // reason given (see gpuOnHostWhy).
  OpDef& gpuOnHost(std::string why) { gpuOnHostWhy = std::move(why); return *this; }
  OpDef& backward(BackwardFn f) { backwardFn = std::move(f); return *this; }
  OpDef& notDifferentiable(std::string why) { notDifferentiableWhy = std::move(why); return *this; }
  // An ONNX rule of this op (graph/onnx_rule.h): ONNX op `opType` of the
  // default domain at opsets since..until.
  OpDef& onnx(std::string opType, int since, int until = kOpsetOpen) {
    onnxRules.push_back({"", std::move(opType), since, until, nullptr, nullptr, name});
    return *this;
  }
  // The import of the last .onnx() rule (default: inputs in order,
  // attributes by name, one output; see graph/onnx_import.h).
  OpDef& importer(OnnxImportFn f) {
    ONYX_ASSERT(!onnxRules.empty(), name, ": importer() before onnx()");
    onnxRules.back().importFn = std::move(f);
    return *this;
  }
  OpDef& exporter(OnnxExportFn f) {
    ONYX_ASSERT(!onnxRules.empty(), name, ": exporter() before onnx()");
    onnxRules.back().exportFn = std::move(f);
    return *this;
  }
  OpDef& noOnnx(std::string why) { noOnnxWhy = std::move(why); return *this; }
  // A composite ONNX form for an op with no ONNX op of its own (see
  // graph/onnx_export.h): from target opset `since` on, `f` emits the nodes.
  // Export only: an ONNX file never imports back into this op.
  OpDef& onnxExport(int since, OnnxExportFn f, int until = kOpsetOpen) {
    onnxRules.push_back({"", "", since, until, nullptr, std::move(f), name});
    return *this;
  }
  OpDef& stochastic() { isStochastic = true; return *this; }
  OpDef& view() { isView = true; return *this; }

  int attrIndex(const char* name) const;  // -1 if absent
  bool differentiable() const { return static_cast<bool>(backwardFn); }
};

class Registry {
public:
  static Registry& instance();
  OpDef& define(const std::string& name, const std::string& family);
  const OpDef* find(const std::string& name) const;
  const OpDef& get(const std::string& name) const;  // throws onyx::Error if unknown
  std::vector<const OpDef*> all() const;            // sorted by name
  // Gives op `name` its GPU kernel: the CUDA plugin, as it loads, for each
  // kernel it registers. An unknown op, or one that has a GPU kernel
  // already, is a bug (in the plugin's registration).
  void setGpuKernel(const std::string& name, KernelFn f);

private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Declares an op in a family file: ONYX_OP(kSin, "sin").doc("y = sin(x)")...
#ifndef ONYX_GPU_PLUGIN
#define ONYX_OP(var, name) \
  static ::onyx::OpDef& var = ::onyx::Registry::instance().define(name, __FILE__)
#else
// The CUDA plugin compiles the functor families (CMakeLists.txt) a second
// time with nvcc, for the GPU kernels of their functors: there their ops go
// into the plugin's own registry, whose GPU kernels it grafts onto the
// registry's ops of the same names when it loads (backend/cuda/plugin.cpp).
Registry& gpuPluginRegistry();
#define ONYX_OP(var, name) \
  static ::onyx::OpDef& var = ::onyx::gpuPluginRegistry().define(name, __FILE__)
#endif

// ---- contexts handed to the op's functions ----

struct InferCtx {
  const OpDef& op;
  const SmallVec<Node*, 3>& inputs;
  Attrs attrs;
  Shape shape;                    // output, to be set
  Type type = Type::undefined;    // output, to be set

  size_t n() const { return inputs.size(); }
  const Shape& shapeOf(size_t i) const;
  Type typeOf(size_t i) const;
  // Throws onyx::Error "<op>: <message> (inputs: 2x3 float32, 3 float32)".
  template <class... A>
  [[noreturn]] void fail(const A&... a) const { failMsg(str(a...)); }
  template <class... A>
  void check(bool cond, const A&... a) const { if(!cond) failMsg(str(a...)); }
  // Requires every input to have the same element type, returns it.
  Type commonType() const;
  void requireFloat(size_t i) const;
  // normalizeAxis (core/shape.h) whose error fails the inference.
  int axis(int64_t axis, int rank, const char* what = "axis") const;
  std::string describeInputs() const;

private:
  [[noreturn]] void failMsg(const std::string& msg) const;
};

struct KernelCtx {
  Node& node;
  TensorBase& out;
  SmallVec<TensorBase*, 4> in;
  Attrs attrs;
  Rng& rng;
  ExpressionGraph& graph;
  Tensor scratch(const Shape& s, Type t);  // memory on out's device (the workspace's), freed with the handle
  // Whether the graph computes float32 matrix products and convolutions in
  // bfloat16 (ExpressionGraph::computePrecision()).
  bool bf16() const;
};

struct GradCtx {
  Node* node;
  ExpressionGraph& graph;
  Expr dy;  // gradient of the loss w.r.t. this node's output
  Attrs attrs;
  Expr y() const;                 // this node's output
  Expr x(size_t i) const;         // input i
  size_t n() const;
  bool needs(size_t i) const;     // whether input i wants a gradient
  // Accumulates g into input i's gradient; g is summed down to the input's
  // shape when the op broadcast it.
  void add(size_t i, Expr g);
};

// Shape/type inference shared by many ops.
namespace infer {
void sameAsInput0(InferCtx& c);
void broadcast(InferCtx& c);         // common type, broadcast shape
void broadcastToBool(InferCtx& c);   // common type inputs, broadcast shape, bool output
}  // namespace infer

}  // namespace onyx
