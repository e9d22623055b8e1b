#include <onyx/runtime/session.h>

#include <onyx/core/allocation_limit.h>

#include <cstdio>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

struct Session::Cached {
  std::shared_ptr<ExpressionGraph> graph;
  ImportedGraph imported;
  PassCounts passes;
  bool reusable = false;
};

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(options) {
  ONYX_CHECK(model_ != nullptr, "Session: null model");
  ONYX_CHECK(options_.threads >= 0 && options_.threads <= host::kMaxThreads, "threads = ", options_.threads,
             ": expected 0 (the default) to ", host::kMaxThreads);
  if(options_.profile) profiler_ = std::make_shared<Profiler>();
  static const bool warned = [] {
    if(!host::blasIsOpenMP())
      std::fprintf(stderr, "onyx: warning: the OpenBLAS loaded is not its OpenMP build; BLAS runs a second thread "
                           "pool beside OpenMP's (install libopenblas-openmp-dev)\n");
    return true;
  }();
  (void)warned;
}
Session::~Session() = default;

std::shared_ptr<ExpressionGraph> Session::lastGraph() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ ? last_->graph : nullptr;
}

PassCounts Session::passesFired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ ? last_->passes : PassCounts{};
}

size_t Session::graphsBuilt() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return built_;
}

size_t Session::graphsCached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

void Session::clearCache() {
  std::list<std::pair<std::string, std::shared_ptr<Cached>>> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  dropped.swap(idle_);
}

std::shared_ptr<Session::Cached> Session::take(const std::string& key) {
  if(key.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  for(auto it = idle_.begin(); it != idle_.end(); ++it)
    if(it->first == key) {
      auto c = std::move(it->second);
      idle_.erase(it);
      return c;
    }
  return nullptr;
}

void Session::give(const std::string& key, std::shared_ptr<Cached> c) {
  std::shared_ptr<Cached> dropped, previous;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  previous = std::move(last_);
  last_ = c;
  if(key.empty() || !c->reusable || options_.maxCachedGraphs == 0) return;
  idle_.emplace_front(key, std::move(c));
  if(idle_.size() > options_.maxCachedGraphs) {
    dropped = std::move(idle_.back().second);
    idle_.pop_back();
  }
}

namespace {

Tensor copyOut(const Tensor& t) {
  if(t->type() == Type::string) {
    Tensor c = TensorBase::create(t->shape(), t->type());
    c->strings() = t->strings();
    return c;
  }
  Tensor c = TensorBase::create(t->shape(), t->type());
  if(t->bytes()) c->copyFrom(*t);
  return c;
}

std::string signature(const HostValues& inputs) {
  std::string key;
  for(const auto& kv : inputs) {
    key += kv.first;
    key += '|';
    const HostValue& v = kv.second;
    if(v.kind != OnnxValue::Kind::Tensor) return "";  // sequences/optionals: never cached
    key += std::to_string(static_cast<int>(v.tensor->type()));
    for(auto d : v.tensor->shape().dims()) key += "," + std::to_string(d);
    key += ';';
  }
  return key;
}

HostValue toHost(const OnnxValue& v, ExpressionGraph& g) {
  switch(v.kind) {
    case OnnxValue::Kind::Tensor: return HostValue::of(copyOut(g.value(v.tensor)));
    case OnnxValue::Kind::Sequence: {
      std::vector<Tensor> s;
      for(const Expr& e : v.sequence) s.push_back(copyOut(g.value(e)));
      return HostValue::seq(std::move(s), v.elemType);
    }
    case OnnxValue::Kind::Map:
    case OnnxValue::Kind::MapSequence:
      return HostValue::map(copyOut(g.value(v.tensor)), copyOut(g.value(v.mapValues)), v.kind);
    default: return HostValue::none(v.elemType);
  }
}

}  // namespace

HostValues Session::runValues(const HostValues& inputs, const std::vector<std::string>& outputs) {
  if(options_.threads > 0) host::setNumThreads(options_.threads);
  for(const auto& kv : inputs) {
    bool known = false;
    for(const auto& i : model_->inputs()) known |= i.name == kv.first;
    known |= model_->initializers().count(kv.first) > 0;
    ONYX_CHECK(known, model_->path(), ": the model has no input '", kv.first, "'");
    if(kv.second.kind == OnnxValue::Kind::Tensor)
      ONYX_CHECK(kv.second.tensor != nullptr, model_->path(), ": input '", kv.first, "' is a null tensor");
  }
  for(const auto& o : outputs) {
    bool known = false;
    for(const auto& i : model_->outputs()) known |= i.name == o;
    ONYX_CHECK(known, model_->path(), ": the model has no output '", o, "'");
  }
  // The limit covers every single tensor this run allocates, constants
  // computed while its graph is built included; the workspace's own limit
  // (below) bounds their total.
  ScopedAllocationLimit limit(options_.maxMemoryBytes);
  ScopedLoopLimit loops(options_.maxLoopIterations);
  std::unique_lock<std::mutex> profiling;
  if(profiler_) profiling = std::unique_lock<std::mutex>(profileMutex_);
  std::string key = signature(inputs);
  std::shared_ptr<Cached> c = take(key);
  if(c) {
    for(const auto& kv : c->imported.inputNodes) kv.second->bind(inputs.at(kv.first).tensor);
    c->graph->forward();
  } else {
    c = std::make_shared<Cached>();
    c->graph = std::make_shared<ExpressionGraph>();
    ExpressionGraph& g = *c->graph;
    g.setDevice(options_.device);
    g.setComputePrecision(options_.precision);
    g.setInference(!options_.trainable);
    if(options_.maxMemoryBytes) g.workspace()->setLimit(options_.maxMemoryBytes);
    c->imported = importGraph(*model_, g, inputs, options_.trainable);
    c->reusable = !key.empty() && !c->imported.valueDependent;
    std::vector<Expr> kept;
    for(auto& kv : c->imported.outputs) {
      if(kv.second.kind != OnnxValue::Kind::Sequence && kv.second.tensor) kept.push_back(kv.second.tensor);
      if(kv.second.mapValues) kept.push_back(kv.second.mapValues);
      for(Expr& e : kv.second.sequence) kept.push_back(e);
    }
    for(Expr& e : kept) e->keepValue();
    c->passes = optimizeGraph(g, kept, options_.optimization, true, options_.disabledPasses);
    g.setProfiler(profiler_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++built_;
    }
    g.forward();
  }
  HostValues out;
  if(outputs.empty()) {
    for(const auto& o : model_->outputs()) out[o.name] = toHost(c->imported.outputs.at(o.name), *c->graph);
  } else {
    for(const auto& o : outputs) out[o] = toHost(c->imported.outputs.at(o), *c->graph);
  }
  give(key, std::move(c));
  return out;
}

std::map<std::string, Tensor> Session::run(const std::map<std::string, Tensor>& inputs,
                                           const std::vector<std::string>& outputs) {
  HostValues in;
  for(const auto& kv : inputs) in[kv.first] = HostValue::of(kv.second);
  std::map<std::string, Tensor> out;
  for(auto& kv : runValues(in, outputs)) {
    ONYX_CHECK(kv.second.kind == OnnxValue::Kind::Tensor, model_->path(), ": output '", kv.first,
               "' is not a tensor (use runValues)");
    out[kv.first] = kv.second.tensor;
  }
  return out;
}

}  // namespace onyx
