// The runtime API: load an ONNX model once, run it in sessions.
//
//   auto model = onyx::Model::load("model.onnx");        // parsed once, weights shared
//   onyx::Session session(model, {onyx::cpu(), 2});     // device, threads
//   auto out = session.run({{"input", tensor}});         // named inputs -> named outputs
//
// A Model is immutable after load(): sessions share its weights and never
// write to them. A Session builds one graph per input-shape signature and
// keeps it (unless the model's structure depends on input values, as with
// NonZero or If on an input: then it rebuilds per run).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onyx/core/device.h>
#include <onyx/core/tensor.h>
#include <onyx/converters/onnx_exporter.h>
#include <onyx/graph/onnx_import.h>

namespace onyx {

struct OnnxModelFile;
class ExpressionGraph;

// A graph input or output as the model declares it.
struct ValueInfo {
  std::string name;
  std::string kind = "tensor";      // "tensor", "sequence", "optional"
  Type type = Type::undefined;      // element type (of the tensor / sequence elements)
  std::vector<int64_t> dims;        // -1 for a symbolic or unknown dim
  std::vector<std::string> dimNames;  // symbolic names ("" if none)
  bool hasShape = false;
  std::string describe() const;     // "float32[N,3,224,224]"
};

class Model {
public:
  static std::shared_ptr<Model> load(const std::string& path);
  const std::string& path() const;
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers, decoded once (read-only: shared by every session).
  const std::map<std::string, Tensor>& initializers() const { return initializers_; }
  int opset(const std::string& domain = "") const;
  const OnnxModelFile& file() const { return *file_; }

private:
  std::shared_ptr<OnnxModelFile> file_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::map<std::string, Tensor> initializers_;
};

struct SessionOptions {
  DeviceId device = {};
  int threads = 0;  // 0: leave the OpenMP default
  // Initializers become trainable params (for fine-tuning) instead of constants.
  bool trainable = false;
};

// A value passed to or returned by a session: a tensor, a sequence of
// tensors, or an absent optional (host memory).
struct HostValue {
  OnnxValue::Kind kind = OnnxValue::Kind::None;
  Tensor tensor;
  std::vector<Tensor> sequence;
  Type elemType = Type::undefined;
  static HostValue of(Tensor t) { HostValue v; v.kind = OnnxValue::Kind::Tensor; v.tensor = std::move(t); return v; }
  static HostValue seq(std::vector<Tensor> s, Type t = Type::undefined) {
    HostValue v; v.kind = OnnxValue::Kind::Sequence; v.sequence = std::move(s); v.elemType = t; return v;
  }
  static HostValue none(Type t = Type::undefined) { HostValue v; v.elemType = t; return v; }
};
using HostValues = std::map<std::string, HostValue>;

class Session {
public:
  explicit Session(std::shared_ptr<const Model> model, SessionOptions options = {});
  ~Session();
  // Runs the model. `outputs` empty: all graph outputs. Returned tensors are
  // the session's own copies (host memory).
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs,
                                    const std::vector<std::string>& outputs = {});
  // The general form: sequence and optional inputs/outputs.
  HostValues runValues(const HostValues& inputs, const std::vector<std::string>& outputs = {});
  const Model& model() const { return *model_; }
  // Number of distinct graphs built so far (one per input-shape signature).
  size_t graphsBuilt() const { return built_; }
  // The graph of the last run (for inspection, training and export).
  std::shared_ptr<ExpressionGraph> lastGraph() const;

private:
  struct Cached;
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::map<std::string, std::unique_ptr<Cached>> cache_;
  std::unique_ptr<Cached> scratch_;  // the last value-dependent graph
  Cached* last_ = nullptr;
  size_t built_ = 0;
};

// An ONNX model imported into a graph for saving (native) or exporting: the
// graph is built for these inputs (tensors become input nodes of their
// shapes; sequences and optionals become constants), its outputs are named as
// in the model, and the model's symbolic input dims, graph name and doc
// strings are kept. valueDependent: the structure read input values (NonZero,
// If on an input, ...), so the graph holds for these values only.
//
// Training (trainable, with the graph not in inference mode): the float
// initializers are trainable params, and layers with running statistics use
// batch statistics; stateUpdates lists the buffers (BatchNormalization's
// running mean and variance, non-trainable params) with their values after
// this batch. Call applyStateUpdates after forward() to keep them.
struct ImportedGraph {
  GraphSpec spec;
  std::map<std::string, Expr> inputNodes;
  bool valueDependent = false;
  std::vector<std::pair<Expr, Expr>> stateUpdates;  // (param, next value)
};
// Copies each state update's computed value into its param (after forward()).
void applyStateUpdates(const ImportedGraph& g);
// Throws onyx::Error when an output is a sequence or an optional.
ImportedGraph importGraph(const Model& model, ExpressionGraph& graph, const HostValues& inputs, bool trainable = false);

}  // namespace onyx
