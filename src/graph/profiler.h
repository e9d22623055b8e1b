// Op profiler: the time of every node a graph's forward() runs, summed per op
// type and per node, and written as a Chrome trace (the JSON that
// chrome://tracing and Perfetto open), as onnxruntime's enable_profiling does.
//
//   auto prof = std::make_shared<onyx::Profiler>();
//   graph->setProfiler(prof);          // or SessionOptions::profile
//   graph->forward();
//   std::cout << prof->report(10);     // per op type, then the 10 slowest nodes
//   prof->writeChromeTrace("trace.json");
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace onyx {

class Node;

class Profiler {
public:
  using Clock = std::chrono::steady_clock;

  // One node as it was profiled (several runs of it add up).
  struct NodeStats {
    std::string name;    // the node's name (the ONNX output it computes), or "#id"
    std::string op;      // friendly op name
    std::string shapes;  // "2x3 float32, 3 float32 -> 2x3 float32"
    double totalMs = 0;
    size_t calls = 0;
  };
  struct OpStats {
    std::string op;
    double totalMs = 0;
    size_t calls = 0;
    size_t nodes = 0;
  };

  // Called by ExpressionGraph::forward() around each node's kernel.
  void record(const Node& n, Clock::time_point start, Clock::time_point end);
  // Marks the end of one forward() (the runs counted in the report).
  void endRun() { ++runs_; }
  // Forgets everything recorded (e.g. after warm-up runs).
  void reset();

  size_t runs() const { return runs_; }
  double totalMs() const;
  // By total time, slowest first.
  std::vector<OpStats> byOpType() const;
  std::vector<NodeStats> topNodes(size_t count) const;
  // A plain-text report: time per op type (ms per run, % of the node time),
  // then the `top` slowest nodes with their shapes.
  std::string report(size_t top = 20) const;
  // The Chrome trace JSON ("traceEvents", complete events with the node's
  // op and shapes as args), written to a temporary file and renamed. At most
  // kTraceEvents events are kept (the first ones recorded).
  void writeChromeTrace(const std::string& path) const;
  static constexpr size_t kTraceEvents = 200000;

private:
  struct Key {
    const Node* node;
    size_t id;
    const void* op;
    bool operator==(const Key& o) const { return node == o.node && id == o.id && op == o.op; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.node) ^ (k.id * 0x9e3779b97f4a7c15ull) ^ std::hash<const void*>()(k.op);
    }
  };
  struct Event {
    size_t node;  // index into nodes_
    double startUs, durUs;
  };
  std::unordered_map<Key, size_t, KeyHash> index_;
  std::vector<NodeStats> nodes_;
  std::vector<Event> events_;
  Clock::time_point origin_ = Clock::now();
  size_t runs_ = 0;
};

}  // namespace onyx
