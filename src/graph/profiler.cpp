#include <onyx/graph/profiler.h>

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include <onyx/graph/node.h>
#include <onyx/io/json.h>
#include <onyx/io/npz.h>

namespace onyx {

namespace {

std::string describe(const Node& n) {
  std::ostringstream o;
  for(size_t i = 0; i < n.numChildren(); ++i) {
    Expr c = n.child(i);
    o << (i ? ", " : "") << c->shape() << ' ' << typeName(c->value_type());
  }
  o << " -> " << n.shape() << ' ' << typeName(n.value_type());
  return o.str();
}

}  // namespace

void Profiler::record(const Node& n, Clock::time_point start, Clock::time_point end) {
  Key key{&n, n.getId(), n.op()};
  auto it = index_.find(key);
  size_t i;
  if(it == index_.end()) {
    i = nodes_.size();
    index_.emplace(key, i);
    NodeStats s;
    s.name = n.name().empty() ? "#" + std::to_string(n.getId()) : n.name();
    s.op = n.type();
    s.shapes = describe(n);
    nodes_.push_back(std::move(s));
  } else {
    i = it->second;
  }
  double ms = std::chrono::duration<double, std::milli>(end - start).count();
  nodes_[i].totalMs += ms;
  ++nodes_[i].calls;
  if(events_.size() < kTraceEvents)
    events_.push_back({i, std::chrono::duration<double, std::micro>(start - origin_).count(), ms * 1000});
}

void Profiler::reset() {
  index_.clear();
  nodes_.clear();
  events_.clear();
  origin_ = Clock::now();
  runs_ = 0;
}

double Profiler::totalMs() const {
  double t = 0;
  for(const auto& n : nodes_) t += n.totalMs;
  return t;
}

std::vector<Profiler::OpStats> Profiler::byOpType() const {
  std::map<std::string, OpStats> m;
  for(const auto& n : nodes_) {
    OpStats& s = m[n.op];
    s.op = n.op;
    s.totalMs += n.totalMs;
    s.calls += n.calls;
    ++s.nodes;
  }
  std::vector<OpStats> v;
  for(auto& kv : m) v.push_back(kv.second);
  std::stable_sort(v.begin(), v.end(), [](const OpStats& a, const OpStats& b) { return a.totalMs > b.totalMs; });
  return v;
}

std::vector<Profiler::NodeStats> Profiler::topNodes(size_t count) const {
  std::vector<NodeStats> v = nodes_;
  std::stable_sort(v.begin(), v.end(), [](const NodeStats& a, const NodeStats& b) { return a.totalMs > b.totalMs; });
  if(v.size() > count) v.resize(count);
  return v;
}

std::string Profiler::report(size_t top) const {
  std::ostringstream o;
  double total = totalMs();
  double runs = static_cast<double>(std::max<size_t>(runs_, 1));
  double pct = total > 0 ? 100.0 / total : 0.0;
  o << std::fixed;
  o << "profile: " << runs_ << " run(s), " << std::setprecision(3) << total / runs << " ms of node time per run, "
    << nodes_.size() << " nodes\n";
  o << "per op type:\n";
  o << "  " << std::left << std::setw(22) << "op" << std::right << std::setw(12) << "ms/run" << std::setw(8) << "%"
    << std::setw(8) << "nodes" << '\n';
  for(const auto& s : byOpType())
    o << "  " << std::left << std::setw(22) << s.op << std::right << std::setw(12) << std::setprecision(3)
      << s.totalMs / runs << std::setw(8) << std::setprecision(1) << s.totalMs * pct << std::setw(8) << s.nodes
      << '\n';
  if(top > 0) {
    o << "top " << std::min(top, nodes_.size()) << " nodes:\n";
    for(const auto& n : topNodes(top))
      o << "  " << std::right << std::setw(10) << std::setprecision(3) << n.totalMs / runs << " ms "
        << std::setw(5) << std::setprecision(1) << n.totalMs * pct << "%  " << n.op << " '" << n.name << "'  "
        << n.shapes << '\n';
  }
  return o.str();
}

void Profiler::writeChromeTrace(const std::string& path) const {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  o << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for(const Event& e : events_) {
    const NodeStats& n = nodes_[e.node];
    o << (first ? "" : ",\n") << "{\"name\":" << json::quote(n.name) << ",\"cat\":" << json::quote(n.op)
      << ",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":" << e.startUs << ",\"dur\":" << e.durUs
      << ",\"args\":{\"op\":" << json::quote(n.op) << ",\"shapes\":" << json::quote(n.shapes) << "}}";
    first = false;
  }
  o << "\n]}\n";
  io::writeFileAtomic(path, o.str());
}

}  // namespace onyx
