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
#include <onyx/graph/passes/passes.h>
#include <onyx/graph/profiler.h>
#include <onyx/runtime/model.h>

namespace onyx {

class ExpressionGraph;

struct SessionOptions {
  DeviceId device = {};
  int threads = 0;  // 0: leave the OpenMP default; at most host::kMaxThreads (1024)
  // Initializers become trainable params (for fine-tuning) instead of constants.
  bool trainable = false;
  // The graph passes run on each graph built (graph/passes/passes.h): none,
  // basic (constant folding, no-op elimination, pruning) or all (basic and
  // the fusions: batch norm into conv, GELU, matmul + bias, conv epilogues).
  OptLevel optimization = OptLevel::all;
  // Passes of that level not to run, by name (passNames()).
  std::vector<std::string> disabledPasses;
  // Times every node of every run into profiler() (graph/profiler.h).
  bool profile = false;
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
  // The passes that rewrote the last run's graph, with their counts.
  const PassCounts& passesFired() const;
  // With SessionOptions::profile: the node times of every run so far (reset()
  // it to start over, e.g. after warm-up runs); null otherwise.
  const std::shared_ptr<Profiler>& profiler() const { return profiler_; }

private:
  struct Cached;
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::shared_ptr<Profiler> profiler_;
  std::map<std::string, std::unique_ptr<Cached>> cache_;
  std::unique_ptr<Cached> scratch_;  // the last value-dependent graph
  Cached* last_ = nullptr;
  size_t built_ = 0;
};

}  // namespace onyx
