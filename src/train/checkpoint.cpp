#include <onyx/train/checkpoint.h>

#include <locale>
#include <sstream>
#include <utility>
#include <vector>

#include <onyx/core/error.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/io/json.h>
#include <onyx/io/npz.h>
#include <onyx/train/optimizers.h>

namespace onyx {

namespace {

constexpr const char* kFormat = "onyx-checkpoint";
constexpr int64_t kVersion = 1;
const std::string kParamPrefix = "param/";
const std::string kOptPrefix = "opt/";
const std::string kStateMember = "state.json";

std::string rngText(Rng& rng) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << rng;
  return os.str();
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

uint64_t getCount(const json::Value& doc, const char* key, const std::string& where) {
  int64_t v = doc.at(key, where).asInt(where + "." + key);
  ONYX_CHECK(v >= 0, where, ".", key, ": negative (", v, ")");
  return static_cast<uint64_t>(v);
}

}  // namespace

void saveCheckpoint(const std::string& path, ExpressionGraph& graph, OptimizerBase& opt, const TrainState& s) {
  std::vector<std::pair<std::string, std::string>> members;
  for(auto& p : *graph.params()) {
    ONYX_CHECK(p->val(), path, ": param '", p->name(), "' has no value");
    ONYX_CHECK(io::npyStorable(p->value_type()), path, ": param '", p->name(), "' has type ", p->value_type(),
               ", which a checkpoint (.npy) cannot store");
    members.emplace_back(kParamPrefix + p->name() + ".npy", io::npyBytes(*p->val()));
  }
  for(auto& kv : opt.state()) {
    ONYX_CHECK(kv.second, path, ": optimizer state '", kv.first, "' is empty");
    members.emplace_back(kOptPrefix + kv.first + ".npy", io::npyBytes(*kv.second));
  }

  json::Value doc = json::Value::object();
  doc.set("format", json::Value::string(kFormat));
  doc.set("version", json::Value::number(kVersion));
  doc.set("step", json::Value::number(static_cast<int64_t>(s.step)));
  doc.set("epoch", json::Value::number(static_cast<int64_t>(s.epoch)));
  doc.set("sample_offset", json::Value::number(static_cast<int64_t>(s.sampleOffset)));
  doc.set("optimizer_steps", json::Value::number(static_cast<int64_t>(opt.steps())));
  doc.set("rng", json::Value::string(s.rng.empty() ? rngText(graph.rng()) : s.rng));
  json::Value extra = json::Value::object();
  for(auto& kv : s.extra) extra.set(kv.first, json::Value::string(kv.second));
  doc.set("extra", std::move(extra));
  members.emplace_back(kStateMember, doc.dump());

  io::saveZip(path, members);  // temporary file + rename
}

TrainState loadCheckpoint(const std::string& path, ExpressionGraph& graph, OptimizerBase& opt) {
  auto members = io::loadZip(path);  // throws on a truncated/corrupt zip

  // ---- parse and check everything first; nothing changes until all is valid
  const std::string* stateText = nullptr;
  std::map<std::string, Tensor> params, slots;
  for(auto& m : members) {
    const std::string& name = m.first;
    if(name == kStateMember) {
      stateText = &m.second;
      continue;
    }
    bool isParam = startsWith(name, kParamPrefix), isOpt = startsWith(name, kOptPrefix);
    ONYX_CHECK((isParam || isOpt) && name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0, path,
               ": unexpected member '", name, "' (not a checkpoint written by saveCheckpoint?)");
    std::string key = name.substr(0, name.size() - 4);
    Tensor t = io::parseNpy(m.second, path + ":" + name);
    if(isParam) params[key.substr(kParamPrefix.size())] = t;
    else slots[key.substr(kOptPrefix.size())] = t;
  }
  ONYX_CHECK(stateText, path, ": no ", kStateMember, " member (not a checkpoint written by saveCheckpoint?)");

  const std::string where = path + ":" + kStateMember;
  json::Value doc = json::parse(*stateText, where);
  ONYX_CHECK(doc.isObject(), where, ": expected an object");
  ONYX_CHECK(doc.at("format", where).asString(where + ".format") == kFormat, where, ": format is not '", kFormat, "'");
  int64_t version = doc.at("version", where).asInt(where + ".version");
  ONYX_CHECK(version == kVersion, where, ": version ", version, " is not supported (this build reads ", kVersion, ")");
  TrainState s;
  s.step = getCount(doc, "step", where);
  s.epoch = getCount(doc, "epoch", where);
  s.sampleOffset = getCount(doc, "sample_offset", where);
  uint64_t optSteps = getCount(doc, "optimizer_steps", where);
  s.rng = doc.at("rng", where).asString(where + ".rng");
  if(const json::Value* extra = doc.find("extra")) {
    ONYX_CHECK(extra->isObject(), where, ".extra: expected an object");
    for(auto& kv : extra->members()) s.extra[kv.first] = kv.second.asString(where + ".extra." + kv.first);
  }
  Rng rng;
  {
    std::istringstream is(s.rng);
    is.imbue(std::locale::classic());
    is >> rng;
    ONYX_CHECK(!is.fail(), where, ": rng is not a serialized std::mt19937_64");
  }

  for(auto& kv : params) {
    Expr p = graph.params()->get(kv.first);
    ONYX_CHECK(p, path, ": param '", kv.first, "' is not in the graph (build the model before loading)");
    ONYX_CHECK(p->shape() == kv.second->shape(), path, ": param '", kv.first, "' has shape ", kv.second->shape(),
               " in the file but ", p->shape(), " in the graph");
    ONYX_CHECK(p->value_type() == kv.second->type(), path, ": param '", kv.first, "' has type ", kv.second->type(),
               " in the file but ", p->value_type(), " in the graph");
    ONYX_CHECK(p->val(), path, ": param '", kv.first, "' has no value in the graph");
  }
  for(auto& p : *graph.params())
    ONYX_CHECK(params.count(p->name()), path, ": param '", p->name(), "' of the graph is not in the checkpoint");
  for(auto& kv : slots) {
    auto cut = kv.first.rfind('/');
    ONYX_CHECK(cut != std::string::npos && cut > 0, path, ": optimizer state '", kv.first, "' is not '<param>/<slot>'");
    std::string param = kv.first.substr(0, cut);
    Expr p = graph.params()->get(param);
    ONYX_CHECK(p, path, ": optimizer state '", kv.first, "' belongs to param '", param, "', which is not in the graph");
    ONYX_CHECK(p->shape() == kv.second->shape(), path, ": optimizer state '", kv.first, "' has shape ",
               kv.second->shape(), " in the file but param '", param, "' has shape ", p->shape());
  }

  // ---- apply
  for(auto& kv : params) graph.params()->get(kv.first)->val()->copyFrom(*kv.second);
  auto& state = opt.state();
  state.clear();
  for(auto& kv : slots) {
    std::string param = kv.first.substr(0, kv.first.rfind('/'));
    Tensor t = TensorBase::create(kv.second->shape(), kv.second->type(), graph.params()->get(param)->val()->getDeviceId());
    t->copyFrom(*kv.second);
    state[kv.first] = t;
  }
  opt.setSteps(static_cast<size_t>(optSteps));
  graph.rng() = rng;
  return s;
}

}  // namespace onyx
