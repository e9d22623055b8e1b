// Running a model: a Session builds one graph per input-shape signature and
// keeps it (unless the model's structure depends on input values, as with
// NonZero or If on an input: then it rebuilds per run).
//
//   auto model = onyx::Model::load("model.onnx");
//   onyx::Session session(model, {onyx::cpu(), 2});     // device, threads
//   auto out = session.run({{"input", tensor}});         // named inputs -> named outputs
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onyx/core/device.h>
#include <onyx/core/tensor.h>
#include <onyx/runtime/model.h>

namespace onyx {

class ExpressionGraph;

struct SessionOptions {
  DeviceId device = {};
  int threads = 0;  // 0: leave the OpenMP default
  // Initializers become trainable params (for fine-tuning) instead of constants.
  bool trainable = false;
  // Inference graphs fold convolution epilogues into fused_conv
  // (runtime/fuse_conv.h); off: the graph as imported (for comparisons).
  bool fuse = true;
};

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

}  // namespace onyx
