#include "tool_common.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <CLI/CLI.hpp>

#include <onyx/io/npz.h>
#include <onnx/onnx-data_pb.h>
#include <onyx/onnx/model_file.h>
#include <onyx/onnx/tensor_proto.h>

namespace onyx {
namespace tools {

size_t parseByteSize(const std::string& text, const char* flag) {
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch(const std::exception&) {
    used = 0;
  }
  int shift = 0;
  std::string unit = used ? text.substr(used) : "";
  if(unit == "K" || unit == "k") shift = 10;
  else if(unit == "M" || unit == "m") shift = 20;
  else if(unit == "G" || unit == "g") shift = 30;
  else if(unit == "T" || unit == "t") shift = 40;
  else if(!unit.empty()) used = 0;
  if(!used || text[0] == '-' || n > ((1ull << 62) >> shift))
    throw Error(str(flag, " '", text, "': expected a size in bytes such as 4096, 512M or 2G (at most 2^62)"));
  return static_cast<size_t>(n << shift);
}

void addOptLevelOption(CLI::App& app, OptLevel& level) {
  app.add_option_function<std::string>(
         "--opt-level", [&level](const std::string& s) { level = parseOptLevel(s); },
         "graph passes: none, basic or all (default all)")
      ->check(CLI::IsMember({"none", "basic", "all"}));
}

void addPrecisionOption(CLI::App& app, std::string& name) {
  app.add_option("--precision", name,
                 "float32, or bf16: matrix products and convolutions on bfloat16-rounded operands with float32 "
                 "sums, every value kept in float32 (float32 where the CPU has no bfloat16 instructions)")
      ->capture_default_str();
}

namespace fs = std::filesystem;

namespace {

bool endsWith(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

template <class Msg>
void parse(Msg& m, const std::string& bytes, const std::string& path, const char* what) {
  if(!m.ParseFromString(bytes)) throw Error(str(path, ": not ", what, " (protobuf parse failed)"));
}

HostValue fromSequence(const ::onnx::SequenceProto& s, const std::string& dir, const std::string& path) {
  std::vector<Tensor> v;
  for(const auto& t : s.tensor_values()) v.push_back(tensorFromOnnx(t, dir, path));
  if(s.sequence_values_size() || s.map_values_size() || s.optional_values_size())
    throw Error(str(path, ": nested sequences/maps are not supported"));
  Type et = s.elem_type() == ::onnx::SequenceProto::TENSOR && !v.empty() ? v[0]->type() : Type::undefined;
  return HostValue::seq(std::move(v), et);
}

// A MapProto as (keys [K], values [K]): int64 or string keys, each value a
// one-element tensor.
std::pair<Tensor, Tensor> fromMap(const ::onnx::MapProto& m, const std::string& dir, const std::string& path) {
  Tensor keys;
  if(m.key_type() == static_cast<int>(Type::string)) {
    keys = TensorBase::create(Shape{m.string_keys_size()}, Type::string);
    for(int i = 0; i < m.string_keys_size(); ++i) keys->strings()[static_cast<size_t>(i)] = m.string_keys(i);
  } else {
    std::vector<int64_t> k(m.keys().begin(), m.keys().end());
    keys = TensorBase::fromVector(Shape{static_cast<int64_t>(k.size())}, k);
  }
  const auto& vs = m.values();
  if(vs.tensor_values_size() != keys->size())
    throw Error(str(path, ": a map has ", keys->size(), " keys but ", vs.tensor_values_size(), " tensor values"));
  Tensor values;
  for(int i = 0; i < vs.tensor_values_size(); ++i) {
    Tensor t = tensorFromOnnx(vs.tensor_values(i), dir, path);
    if(t->size() != 1) throw Error(str(path, ": map value ", i, " has shape ", t->shape(), "; one element expected"));
    if(!values) values = TensorBase::create(Shape{keys->size()}, t->type());
    values->setFromDouble(i, t->getAsDouble(0));
  }
  if(!values) values = TensorBase::create(Shape{0}, Type::float32);
  return {keys, values};
}

bool sameKeys(const TensorBase& a, const TensorBase& b) {
  if(a.type() != b.type() || a.size() != b.size()) return false;
  if(a.type() == Type::string)
    return const_cast<TensorBase&>(a).strings() == const_cast<TensorBase&>(b).strings();
  for(int64_t i = 0; i < a.size(); ++i)
    if(a.getAsDouble(i) != b.getAsDouble(i)) return false;
  return true;
}

}  // namespace

HostValue readValueFile(const std::string& path, const ValueInfo* info) {
  std::string bytes = readFileBytes(path);
  if(endsWith(path, ".npy")) return HostValue::of(io::parseNpy(bytes, path));
  std::string dir = fs::path(path).parent_path().string();
  if(dir.empty()) dir = ".";
  std::string kind = info ? info->kind : "tensor";
  if(kind == "map") {
    ::onnx::MapProto m;
    parse(m, bytes, path, "a MapProto");
    auto kv = fromMap(m, dir, path);
    return HostValue::map(kv.first, kv.second);
  }
  if(kind == "sequence_of_maps") {
    ::onnx::SequenceProto s;
    parse(s, bytes, path, "a SequenceProto");
    if(s.tensor_values_size() || s.sequence_values_size() || s.optional_values_size())
      throw Error(str(path, ": a sequence of maps holds maps only"));
    Tensor keys, values;
    const int64_t n = s.map_values_size();
    for(int64_t i = 0; i < n; ++i) {
      auto kv = fromMap(s.map_values(static_cast<int>(i)), dir, path);
      if(!keys) {
        keys = kv.first;
        values = TensorBase::create(Shape{n, keys->size()}, kv.second->type());
      } else if(!sameKeys(*keys, *kv.first)) {
        throw Error(str(path, ": map ", i, " has other keys than map 0; sequences of maps with different keys are not supported"));
      }
      for(int64_t k = 0; k < keys->size(); ++k) values->setFromDouble(i * keys->size() + k, kv.second->getAsDouble(k));
    }
    if(!keys) {
      keys = TensorBase::create(Shape{0}, info->keyType == Type::string ? Type::string : Type::int64);
      values = TensorBase::create(Shape{0, 0}, info->type == Type::undefined ? Type::float32 : info->type);
    }
    return HostValue::map(keys, values, OnnxValue::Kind::MapSequence);
  }
  if(kind == "sequence") {
    ::onnx::SequenceProto s;
    parse(s, bytes, path, "a SequenceProto");
    HostValue v = fromSequence(s, dir, path);
    if(info && v.elemType == Type::undefined) v.elemType = info->type;
    return v;
  }
  if(kind == "optional") {
    ::onnx::OptionalProto o;
    parse(o, bytes, path, "an OptionalProto");
    if(o.has_tensor_value()) return HostValue::of(tensorFromOnnx(o.tensor_value(), dir, path));
    if(o.has_sequence_value()) return fromSequence(o.sequence_value(), dir, path);
    return HostValue::none(info ? info->type : Type::undefined);
  }
  ::onnx::TensorProto t;
  parse(t, bytes, path, "a TensorProto");
  // Test data written by ONNX before 1.13 stores bfloat16 as UINT16 bits.
  if(info && info->type == Type::bfloat16 && t.data_type() == static_cast<int>(Type::uint16))
    t.set_data_type(static_cast<int>(Type::bfloat16));
  return HostValue::of(tensorFromOnnx(t, dir, path));
}

std::vector<std::string> testDataSets(const std::string& caseDir) {
  std::vector<std::string> v;
  std::error_code ec;
  for(const auto& e : fs::directory_iterator(caseDir, ec))
    if(e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

TestDataSet readTestDataSet(const std::string& dir, const Model& model) {
  TestDataSet s;
  s.dir = dir;
  // A missing folder, or one without expected outputs, would check nothing
  // and report a match.
  if(!fs::is_directory(dir)) throw Error(str(dir, ": no such folder of test data (input_<i>.pb, output_<i>.pb)"));
  const auto& ins = model.inputs();
  for(size_t i = 0;; ++i) {
    std::string p = dir + "/input_" + std::to_string(i) + ".pb";
    if(!fs::exists(p)) break;
    if(i >= ins.size()) throw Error(str(p, ": the model has only ", ins.size(), " inputs"));
    s.inputs[ins[i].name] = readValueFile(p, &ins[i]);
  }
  const auto& outs = model.outputs();
  for(size_t i = 0;; ++i) {
    std::string p = dir + "/output_" + std::to_string(i) + ".pb";
    if(!fs::exists(p)) break;
    if(i >= outs.size()) throw Error(str(p, ": the model has only ", outs.size(), " outputs"));
    s.expected.emplace_back(outs[i].name, readValueFile(p, &outs[i]));
  }
  if(s.expected.empty()) throw Error(str(dir, ": no expected outputs (output_0.pb ...): nothing to check against"));
  return s;
}

std::string outputFileName(const std::string& name, const std::string& suffix) {
  // Output names come from the model file: one must not choose where a file
  // is written. Path separators and control characters become '_'; what
  // is left must name a file in the folder.
  std::string f = name;
  for(char& ch : f)
    if(ch == '/' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20) ch = '_';
  f += suffix;
  if(f.empty() || f == "." || f == "..")
    throw Error(str("output '", name, "': not usable as a file name in --output-dir"));
  return f;
}

namespace {

std::string compareTensors(const TensorBase& want, const TensorBase& got, double rtol, double atol) {
  if(want.type() != got.type())
    return str("type ", typeName(got.type()), ", expected ", typeName(want.type()));
  if(want.shape() != got.shape()) return str("shape ", got.shape(), ", expected ", want.shape());
  if(want.type() == Type::string) {
    auto& w = const_cast<TensorBase&>(want).strings();
    auto& g = const_cast<TensorBase&>(got).strings();
    for(size_t i = 0; i < w.size(); ++i)
      if(w[i] != g[i]) return str("element ", i, " is '", g[i], "', expected '", w[i], "'");
    return "";
  }
  if(!isComputeType(want.type())) {
    if(want.bytes() && std::memcmp(want.raw(), got.raw(), want.bytes()) != 0) return "bytes differ";
    return "";
  }
  bool exact = !isFloat(want.type());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for(int64_t i = 0; i < want.size(); ++i) {
    double w = want.getAsDouble(i), g = got.getAsDouble(i);
    bool ok;
    if(exact) ok = w == g;
    else if(std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if(std::isinf(w) || std::isinf(g)) ok = w == g;
    else ok = std::fabs(w - g) <= atol + rtol * std::fabs(w);
    if(!ok) {
      if(first < 0) first = i;
      ++bad;
      if(!std::isnan(w - g)) worst = std::max(worst, std::fabs(w - g));
    }
  }
  if(!bad) return "";
  return str(bad, " of ", want.size(), " values differ; first at ", first, ": got ", got.getAsDouble(first),
             ", expected ", want.getAsDouble(first), " (max abs diff ", worst, ")");
}

}  // namespace

std::string compareValues(const HostValue& want, const HostValue& got, double rtol, double atol) {
  if(want.kind != got.kind) {
    auto k = [](OnnxValue::Kind x) {
      switch(x) {
        case OnnxValue::Kind::Tensor: return "tensor";
        case OnnxValue::Kind::Sequence: return "sequence";
        case OnnxValue::Kind::Map: return "map";
        case OnnxValue::Kind::MapSequence: return "sequence of maps";
        default: return "none";
      }
    };
    return str("got a ", k(got.kind), ", expected a ", k(want.kind));
  }
  if(want.kind == OnnxValue::Kind::Tensor) return compareTensors(*want.tensor, *got.tensor, rtol, atol);
  if(want.kind == OnnxValue::Kind::Map || want.kind == OnnxValue::Kind::MapSequence) {
    std::string r = compareTensors(*want.tensor, *got.tensor, 0, 0);
    if(!r.empty()) return "map keys: " + r;
    r = compareTensors(*want.mapValues, *got.mapValues, rtol, atol);
    if(!r.empty()) return "map values: " + r;
    return "";
  }
  if(want.kind == OnnxValue::Kind::Sequence) {
    if(want.sequence.size() != got.sequence.size())
      return str("sequence of ", got.sequence.size(), ", expected ", want.sequence.size());
    for(size_t i = 0; i < want.sequence.size(); ++i) {
      std::string r = compareTensors(*want.sequence[i], *got.sequence[i], rtol, atol);
      if(!r.empty()) return str("sequence element ", i, ": ", r);
    }
  }
  return "";
}

std::string checkTestDataSet(Session& session, const TestDataSet& set, double rtol, double atol) {
  HostValues got = session.runValues(set.inputs);
  for(const auto& kv : set.expected) {
    auto it = got.find(kv.first);
    if(it == got.end()) return str("output '", kv.first, "' missing");
    std::string r = compareValues(kv.second, it->second, rtol, atol);
    if(!r.empty()) return str(fs::path(set.dir).filename().string(), " output '", kv.first, "': ", r);
  }
  return "";
}

void writeNpyAtomic(const std::string& path, const TensorBase& t) { io::writeFileAtomic(path, io::npyBytes(t)); }

}  // namespace tools
}  // namespace onyx
