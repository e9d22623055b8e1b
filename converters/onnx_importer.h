// ONNX graph -> ExpressionGraph. Internal to the library and the tools; users
// go through Model/Session (converters/model.h).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/onnx/onnx_model.h>

namespace onyx {

struct ImportOptions {
  bool trainable = false;  // initializers become trainable params (else shared constants)
};

class OnnxGraphImporter {
public:
  OnnxGraphImporter(const OnnxModelFile& file, const std::map<std::string, Tensor>& initializers,
                    ExpressionGraph& graph, ImportOptions options = {});
  // Builds the main graph with `inputs` bound (input tensors become input
  // nodes; sequences and optionals become constants). Returns the graph's
  // outputs by name. Errors name the file, node, op and opset.
  std::map<std::string, OnnxValue> build(const std::map<std::string, OnnxValue>& inputs);
  // Whether the structure read data that depends on input values.
  bool valueDependent() const { return valueDependent_; }
  // Input nodes created for tensor inputs, by name (for rebinding).
  const std::map<std::string, Expr>& inputNodes() const { return inputNodes_; }
  // Buffers to update after a training step: (param, its next value).
  const std::vector<std::pair<Expr, Expr>>& stateUpdates() const { return stateUpdates_; }

  // ---- used by the node context
  OnnxValue lookup(const std::string& name) const;
  bool isValueDependent(Node* n);
  std::vector<OnnxValue> importGraph(const ::onnx::GraphProto& g, const std::vector<OnnxValue>& inputs,
                                     const std::string& where);
  ExpressionGraph& graph() { return graph_; }
  const OnnxModelFile& file() const { return file_; }
  void markValueDependent() { valueDependent_ = true; }
  bool training() const { return options_.trainable && !graph_.isInference(); }
  bool trainable() const { return options_.trainable; }
  // How many node inputs (in every graph of the model) read value `name`.
  size_t uses(const std::string& name) const;
  void addStateUpdate(Expr state, Expr next) { stateUpdates_.emplace_back(state, next); }
  Type declaredType(const std::string& name) const;

private:
  void importNode(const ::onnx::NodeProto& node);
  void bindScope(const std::string& name, OnnxValue v);

  const OnnxModelFile& file_;
  const std::map<std::string, Tensor>& initializers_;
  ExpressionGraph& graph_;
  ImportOptions options_;
  std::vector<std::unordered_map<std::string, OnnxValue>> scopes_;
  std::unordered_map<std::string, Type> declaredTypes_;
  std::unordered_map<Node*, bool> dependsOnInput_;
  std::map<std::string, Expr> inputNodes_;
  bool valueDependent_ = false;
  std::vector<std::pair<Expr, Expr>> stateUpdates_;
  mutable std::unordered_map<std::string, size_t> uses_;
  mutable bool usesCounted_ = false;
};

// Element type and dims of a TypeProto's tensor (or sequence element).
Type onnxElemType(const ::onnx::TypeProto& t);

}  // namespace onyx
