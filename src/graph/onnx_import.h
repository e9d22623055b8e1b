// How an ONNX node becomes graph expressions: the import context, the
// contract between the ONNX rules' import functions (graph/onnx_rule.h: on
// registry ops in src/ops, composites in converters/) and the importer in
// converters/ (which parses the protobuf and implements OnnxImportCtx).
// Protobuf never leaks into src/.
//
// An import function reads the node's inputs and attributes, builds
// expressions and sets the outputs:
//   ...onnx("Swish", 24).importer([](OnnxImportCtx& c) {
//        double alpha = c.attrFloat("alpha", 1.0);
//        Expr x = c.input(0);
//        c.setOutput(0, alpha == 1.0 ? swish(x) : x * sigmoid(x * alpha));
//      })
// An attribute the function never reads is an import error naming it (so a
// rule cannot silently drop an attribute), except consumed_inputs of opsets
// before 6, an in-place hint that the importer ignores for every op.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <onyx/core/error.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

class ExpressionGraph;

// A value flowing between ONNX nodes: a tensor, a sequence of tensors, an
// absent optional, a map or a sequence of maps.
struct OnnxValue {
  // Map: `tensor` holds the keys [K] (int64 or string) and `mapValues` the
  // values [K]. MapSequence: N maps that share their keys (what ZipMap
  // makes): `tensor` holds the keys [K] and `mapValues` the values [N, K],
  // row n being map n's.
  enum class Kind { Tensor, Sequence, None, Map, MapSequence };
  Kind kind = Kind::None;
  Expr tensor;
  std::vector<Expr> sequence;
  Expr mapValues;
  Type elemType = Type::undefined;  // for empty sequences / typed None
  static OnnxValue of(Expr e) { OnnxValue v; v.kind = Kind::Tensor; v.tensor = e; return v; }
  static OnnxValue seq(std::vector<Expr> s, Type t = Type::undefined) {
    OnnxValue v; v.kind = Kind::Sequence; v.sequence = std::move(s); v.elemType = t; return v;
  }
  static OnnxValue none(Type t = Type::undefined) { OnnxValue v; v.elemType = t; return v; }
  static OnnxValue map(Expr keys, Expr values, Kind k = Kind::Map) {
    OnnxValue v; v.kind = k; v.tensor = keys; v.mapValues = values; return v;
  }
};

class OnnxImportCtx {
public:
  virtual ~OnnxImportCtx() = default;

  // ---- the node
  virtual const std::string& opType() const = 0;
  virtual const std::string& domain() const = 0;
  virtual const std::string& nodeName() const = 0;
  virtual int opset() const = 0;  // the model's opset for this node's domain
  virtual ExpressionGraph& graph() = 0;

  // ---- inputs (ONNX optional inputs may be absent: an empty name)
  virtual size_t numInputs() const = 0;
  virtual bool hasInput(size_t i) const = 0;
  virtual OnnxValue inputValue(size_t i) = 0;  // any kind
  Expr input(size_t i);                        // a tensor; fails if absent or not a tensor
  std::vector<Expr> inputSequence(size_t i);   // a sequence; fails otherwise
  // The data of input i, computed now: for inputs that steer the graph's
  // structure (a Reshape's shape, Slice's starts, TopK's k, If's condition).
  // Reading data that depends on a graph input makes the built graph valid
  // for these input values only (the session then rebuilds it per run).
  virtual Tensor value(size_t i) = 0;
  // The same for any expression built during the import (a Loop body's
  // condition, say).
  virtual Tensor valueOf(Expr e) = 0;
  // The value named `name` as this node sees it (an earlier node's output,
  // an initializer or a graph input, of this graph or an enclosing one): for
  // ops that name values in attributes (Gradient's y). Fails naming the node
  // when no such value is visible here.
  virtual OnnxValue valueByName(const std::string& name) = 0;
  std::vector<int64_t> ints(size_t i);  // value(i) as int64s
  double scalar(size_t i);              // value(i)'s only element
  // value(i)'s only element as an exact int64 (an integer tensor read as it
  // is; a float one must hold a finite value in int64's range).
  int64_t intScalar(size_t i);

  // ---- training
  // Whether the graph is built for a training step: the initializers are
  // trainable params and the graph is not in inference mode. Layers with
  // running statistics (BatchNormalization) then normalise with the batch's
  // statistics, as a framework's train() mode does.
  virtual bool training() const = 0;
  // Records that, after a training step, `state` (a param holding a buffer
  // such as a running mean) takes the value of `next`; the param stops being
  // trainable. The caller applies the updates (applyStateUpdates).
  virtual void updateState(Expr state, Expr next) = 0;
  // Input i as a buffer that training updates (a running statistic), when
  // the graph has trainable params: a non-trainable param. That is the
  // initializer itself when only this input reads it, by its own name;
  // otherwise (read through Identity, or shared with other inputs, as
  // exporters that merge equal initializers produce) a param of its own,
  // named after the input value, that starts from its value. Without
  // trainable params: input(i).
  virtual Expr stateInput(size_t i) = 0;

  // ---- attributes (reading an attribute marks it handled: an attribute
  // that the import never reads is reported as unsupported)
  virtual bool hasAttr(const char* name) const = 0;
  virtual int64_t attrInt(const char* name, int64_t def) = 0;
  virtual double attrFloat(const char* name, double def) = 0;
  virtual std::string attrString(const char* name, const std::string& def) = 0;
  virtual std::vector<int64_t> attrInts(const char* name, const std::vector<int64_t>& def = {}) = 0;
  virtual std::vector<double> attrFloats(const char* name, const std::vector<double>& def = {}) = 0;
  virtual std::vector<std::string> attrStrings(const char* name) = 0;
  virtual Tensor attrTensor(const char* name) = 0;  // fails if absent
  // Required forms: fail naming the attribute when absent.
  int64_t attrInt(const char* name);
  double attrFloat(const char* name);
  std::string attrString(const char* name);
  // Marks an attribute handled without reading it (e.g. a hint the import
  // may ignore, such as a training-only attribute in inference).
  virtual void ignoreAttr(const char* name) = 0;
  // Imports the graph held by attribute `name` (If/Loop/Scan bodies) with
  // its formal inputs bound to `inputs`; names of the enclosing graphs stay
  // visible. Returns its outputs. Can be called repeatedly (loop unrolling).
  virtual std::vector<OnnxValue> subgraph(const char* name, const std::vector<OnnxValue>& inputs) = 0;
  virtual size_t subgraphNumInputs(const char* name) = 0;
  virtual size_t subgraphNumOutputs(const char* name) = 0;

  // ---- outputs (ONNX optional outputs may be unused: an empty name)
  virtual size_t numOutputs() const = 0;
  virtual bool wantsOutput(size_t i) const = 0;
  virtual void setOutputValue(size_t i, OnnxValue v) = 0;
  void setOutput(size_t i, Expr e) { setOutputValue(i, OnnxValue::of(e)); }
  // The element type the model declares for output i, if known (undefined otherwise).
  virtual Type declaredOutputType(size_t i) const = 0;

  // ---- building helpers
  // A node of registry op `op` on `inputs` with attributes by name.
  Expr make(const char* op, const std::vector<Expr>& inputs,
            const std::vector<std::pair<std::string, AttrValue>>& attrs = {});
  Expr constant(const Tensor& t);  // a constant node holding t's values

  // ---- errors: an onyx::Error "node 'name' (Op, opset N): message"
  template <class... A>
  [[noreturn]] void fail(const A&... a) const { failMsg(str(a...)); }
  template <class... A>
  void check(bool cond, const A&... a) const { if(!cond) failMsg(str(a...)); }
  // normalizeAxis (core/shape.h) whose error names the node.
  int axis(int64_t axis, int rank, const char* what = "axis") const;
  std::string where() const;

private:
  [[noreturn]] void failMsg(const std::string& msg) const;
};

}  // namespace onyx
