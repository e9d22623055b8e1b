// Running a model: a Session builds one graph per input-shape signature and
// keeps it (unless the model's structure depends on input values, as with
// NonZero or If on an input: then it rebuilds per run).
//
//   auto model = onyx::Model::load("model.onnx");
//   onyx::Session session(model, {onyx::cpu(), 2});     // device, threads
//   auto out = session.run({{"input", tensor}});         // named inputs -> named outputs
//
// Thread safety: run() and runValues() may be called from any number of
// threads at once on one Session. Each run takes a graph for its signature
// out of the cache (or builds one) and owns it until it returns, so
// concurrent runs of one signature use separate graphs; the cache holds at
// most SessionOptions::maxCachedGraphs of them, least recently used first
// out. `threads` applies to the calling thread's parallel regions only
// (OpenMP's per-thread setting), so sessions with different counts coexist.
#pragma once
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <onyx/core/device.h>
#include <onyx/core/tensor.h>
#include <onyx/graph/expression_graph.h>
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
  // float32, or bfloat16: float32 matrix products and convolutions on
  // bfloat16-rounded operands (ComputePrecision; float32 where the CPU has
  // no bfloat16 instructions). Outputs are float32 either way, within
  // bfloat16's rounding of the float32 ones.
  ComputePrecision precision = ComputePrecision::float32;
  // Passes of that level not to run, by name (passNames()).
  std::vector<std::string> disabledPasses;
  // Times every node of every run into profiler() (graph/profiler.h);
  // profiled runs of one session run one at a time.
  bool profile = false;
  // The most graphs kept for reuse (all signatures, and the extra copies
  // concurrent runs of one signature make), least recently used dropped
  // first. 0: none kept (every run builds its graph).
  size_t maxCachedGraphs = 64;
  // The most memory one run's graph may take for its values, in bytes (0: no
  // limit). A run that needs more stops with an onyx::Error naming the
  // request, instead of the process being killed for memory.
  size_t maxMemoryBytes = 0;
  // The most iterations one Loop, or steps one Scan, may unroll while a
  // graph is built (Onyx unrolls them): more is an onyx::Error naming the
  // node, instead of a graph that grows without bound.
  int64_t maxLoopIterations = int64_t(1) << 20;
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
  // Number of graphs built so far (one per input-shape signature, plus one
  // per rebuild: a graph dropped from the cache, a value-dependent model, a
  // signature run by several threads at once).
  size_t graphsBuilt() const;
  // Graphs held in the cache now.
  size_t graphsCached() const;
  // Drops every cached graph (runs in progress keep theirs).
  void clearCache();
  // The graph of the last run to finish (for inspection, training and export).
  std::shared_ptr<ExpressionGraph> lastGraph() const;
  // The passes that rewrote the last run's graph, with their counts.
  PassCounts passesFired() const;
  // With SessionOptions::profile: the node times of every run so far (reset()
  // it to start over, e.g. after warm-up runs); null otherwise.
  const std::shared_ptr<Profiler>& profiler() const { return profiler_; }

private:
  struct Cached;
  std::shared_ptr<Cached> take(const std::string& key);
  void give(const std::string& key, std::shared_ptr<Cached> c);

  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::shared_ptr<Profiler> profiler_;
  // Idle graphs, most recently returned first; a run takes the first of its
  // signature and gives it back when done.
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<Cached>>> idle_;
  std::shared_ptr<Cached> last_;
  size_t built_ = 0;
  std::mutex profileMutex_;  // profiled runs one at a time
};

}  // namespace onyx
