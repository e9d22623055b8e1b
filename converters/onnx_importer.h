// ONNX graph -> ExpressionGraph. Every node imports through the one rule
// table (converters/onnx_rules.h); control flow builds the branch taken and
// unrolls loops, so the graph holds for the input values given. Users go
// through the runtime (runtime/model.h: importGraph, runtime/session.h).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <onyx/converters/onnx_exporter.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/onnx_import.h>

namespace onyx {

struct OnnxModelFile;  // onnx/model_file.h (protobuf stays out of this header)

struct ImportOptions {
  // Float initializers become trainable params (else shared constants), and,
  // with the graph not in inference mode, layers with running statistics
  // normalise with the batch's (see OnnxImportCtx::training()).
  bool trainable = false;
};

// A model's graph imported into an ExpressionGraph for some input values.
struct ImportedGraph {
  // The tensor and sequence outputs named as in the model (absent optional
  // outputs in absentOutputs), the model's symbolic input dims for the tensor
  // inputs given, graph name, producer and doc strings: what a graph file
  // (ONNX or native) writes.
  GraphSpec spec;
  // Every graph output by name, absent optionals included (what a session returns).
  std::map<std::string, OnnxValue> outputs;
  // Input nodes created for tensor inputs, by name (for rebinding).
  std::map<std::string, Expr> inputNodes;
  // The structure read input values (NonZero, If on an input, ...): the
  // graph holds for these values only.
  bool valueDependent = false;
  // Buffers to update after a training step (BatchNormalization's running
  // mean and variance, non-trainable params): (param, its next value).
  std::vector<std::pair<Expr, Expr>> stateUpdates;
};

// Builds the model's main graph into `graph` with `inputs` bound by name
// (tensors as the graph's input nodes; sequences and optionals as given);
// `initializers` are the model's, decoded once (Model::initializers()).
// Errors are one-line onyx::Errors naming the file, node, op and opset.
ImportedGraph importOnnxGraph(const OnnxModelFile& file, const std::map<std::string, Tensor>& initializers,
                              ExpressionGraph& graph, const std::map<std::string, OnnxValue>& inputs,
                              ImportOptions options = {});

// Copies each state update's computed value into its param (after forward()).
void applyStateUpdates(const ImportedGraph& g);

}  // namespace onyx
