// onnx-bench: times an ONNX model with Onyx (load, median/p90 run latency,
// peak memory), or with --train one training step of it.
//
//   onnx-bench model.onnx --threads 2 --iters 50
//   onnx-bench bert.onnx --dim N=4 --json
//   onnx-bench model.onnx --input x=x.npy --warmup 5
//   onnx-bench resnet18.onnx --train --device gpu0
//   onnx-bench resnet50.onnx --iters 50 --time-limit 2 --min-iters 3
//   onnx-bench resnet50.onnx --profile --profile-json trace.json   # time per op type, top nodes
//   onnx-bench resnet50.onnx --opt-level none                      # no graph pass
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <CLI/CLI.hpp>

#include <onyx/onyx.h>

#include "tool_common.h"

using namespace onyx;

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The value at fraction q (0..1) of the sorted samples (nearest rank).
double quantile(std::vector<double> v, double q) {
  if(v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double median(std::vector<double> v) {
  if(v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::pair<std::string, std::string> splitSpec(const std::string& spec, const char* flag) {
  size_t eq = spec.find('=');
  if(eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error(str(flag, " '", spec, "': expected NAME=VALUE"));
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

// A tensor of the model's declared input type and shape with random values:
// floats uniform in [-1, 1), integers uniform in [0, intHigh), booleans 0/1.
Tensor randomInput(const ValueInfo& info, const std::map<std::string, int64_t>& dims, int64_t intHigh,
                   std::mt19937_64& rng) {
  if(info.kind != "tensor")
    throw Error(str("input '", info.name, "' is a ", info.kind, ": give it with --input NAME=FILE"));
  if(!info.hasShape)
    throw Error(str("input '", info.name, "' has no declared shape: give it with --input NAME=FILE"));
  std::vector<int64_t> shape;
  for(size_t i = 0; i < info.dims.size(); ++i) {
    int64_t d = info.dims[i];
    if(d < 0) {
      const std::string& name = i < info.dimNames.size() ? info.dimNames[i] : std::string();
      auto it = name.empty() ? dims.end() : dims.find(name);
      d = it == dims.end() ? 1 : it->second;
    }
    shape.push_back(d);
  }
  Tensor t = TensorBase::create(Shape(shape), info.type);
  int64_t n = t->size();
  if(info.type == Type::float32) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    float* p = t->data<float>();
    for(int64_t i = 0; i < n; ++i) p[i] = u(rng);
  } else if(isFloat(info.type)) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for(int64_t i = 0; i < n; ++i) t->setFromDouble(i, u(rng));
  } else if(info.type == Type::boolean) {
    std::uniform_int_distribution<int> u(0, 1);
    for(int64_t i = 0; i < n; ++i) t->setFromDouble(i, u(rng));
  } else if(isInt(info.type)) {
    std::uniform_int_distribution<int64_t> u(0, std::max<int64_t>(intHigh, 1) - 1);
    for(int64_t i = 0; i < n; ++i) t->setFromDouble(i, static_cast<double>(u(rng)));
  } else {
    throw Error(str("input '", info.name, "' has type ", typeName(info.type),
                    ": no random values for it; give it with --input NAME=FILE"));
  }
  return t;
}


}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times an ONNX model with Onyx: model load, Session::run latency (median, p90), peak memory.\n\n"
               "Examples:\n"
               "  onnx-bench model.onnx --threads 2 --iters 50\n"
               "  onnx-bench bert.onnx --dim N=4 --json\n"
               "  onnx-bench model.onnx --input x=x.npy\n"};
  std::string modelPath, device = "cpu";
  std::vector<std::string> inputs, dimSpecs;
  int threads = 0, iters = 20, warmup = 3, minIters = 1;
  double timeLimit = 0;
  int64_t intHigh = 10;
  uint64_t seed = 1;
  bool json = false, train = false;
  double lr = 1e-3;
  app.add_option("model", modelPath, "the .onnx file")->required();
  app.add_option("--input", inputs, "NAME=FILE (.npy or TensorProto .pb); inputs not given get random values");
  app.add_option("--dim", dimSpecs, "NAME=VALUE for a symbolic input dim (default 1)");
  app.add_option("--threads", threads, "CPU threads (0: default)")->capture_default_str();
  app.add_option("--iters", iters, "timed runs (with --time-limit: at most)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--time-limit", timeLimit,
                 "seconds: no timed run starts once the timed runs so far took this long (0: no limit); "
                 "a benchmark script gives every process the same time, so a slow model gets fewer runs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-iters", minIters,
                 "with --time-limit: timed runs made whatever the time (warm-up runs stop at the limit too, "
                 "counting the first run)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed runs before the timed ones (after the first run)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--int-high", intHigh, "random integer inputs are drawn from [0, VALUE)")->capture_default_str();
  app.add_option("--seed", seed, "seed of the random inputs")->capture_default_str();
  app.add_option("--device", device, "cpu or gpu0")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of text");
  app.add_flag("--train", train,
               "time training steps instead of inference: build the graph with the initializers as params, "
               "loss = mean(output 0 squared), forward, backward, one Sgd step (--lr)");
  app.add_option("--lr", lr, "with --train: the Sgd learning rate")->capture_default_str();
  std::string precisionName = "float32";
  tools::addPrecisionOption(app, precisionName);
  std::string profileJson;
  bool profile = false;
  size_t profileTop = 20;
  OptLevel optLevel = OptLevel::all;
  tools::addOptLevelOption(app, optLevel);
  std::vector<std::string> disabledPasses;
  app.add_option("--disable-pass", disabledPasses, "a graph pass not to run (repeatable; to measure what it buys)");
  app.add_flag("--profile", profile,
               "time every node of the timed runs (with --train: the forward and the backward nodes); print the "
               "time per op type and the slowest nodes");
  app.add_option("--profile-top", profileTop, "with --profile: how many of the slowest nodes to list")
      ->capture_default_str();
  app.add_option("--profile-json", profileJson,
                 "write the timed runs' node times as a Chrome trace (chrome://tracing, Perfetto) to FILE "
                 "(implies --profile)");
  CLI11_PARSE(app, argc, argv);
  if(!profileJson.empty()) profile = true;

  try {
    std::map<std::string, int64_t> dims;
    for(const auto& spec : dimSpecs) {
      auto kv = splitSpec(spec, "--dim");
      try {
        size_t used = 0;
        int64_t v = std::stoll(kv.second, &used);
        if(used != kv.second.size() || v < 0) throw std::invalid_argument("");
        dims[kv.first] = v;
      } catch(const std::logic_error&) {
        throw Error(str("--dim '", spec, "': VALUE must be a non-negative integer"));
      }
    }

    auto t0 = Clock::now();
    auto model = Model::load(modelPath);
    double loadMs = msSince(t0);

    const ComputePrecision precision = parseComputePrecision(precisionName, "--precision");
    if(precision == ComputePrecision::bfloat16 && !bf16Available())
      std::cerr << "onnx-bench: this CPU has no bfloat16 instructions (AVX512_BF16 or AMX): computing in float32\n";
    SessionOptions so;
    so.precision = precision;
    so.device = parseDevice(device);
    so.threads = threads;
    so.optimization = optLevel;
    so.disabledPasses = disabledPasses;
    so.profile = profile && !train;
    t0 = Clock::now();
    Session session(model, so);
    double sessionMs = msSince(t0);

    HostValues in;
    for(const auto& spec : inputs) {
      auto kv = splitSpec(spec, "--input");
      const ValueInfo* info = nullptr;
      for(const auto& i : model->inputs())
        if(i.name == kv.first) info = &i;
      if(!info) {
        std::string names;
        for(const auto& i : model->inputs()) names += (names.empty() ? "" : ", ") + i.name;
        throw Error(str("--input '", spec, "': the model has no input '", kv.first, "' (inputs: ", names, ")"));
      }
      in[kv.first] = tools::readValueFile(kv.second, info);
    }
    std::mt19937_64 rng(seed);
    for(const auto& i : model->inputs())
      if(!in.count(i.name)) in[i.name] = HostValue::of(randomInput(i, dims, intHigh, rng));

    // Session::run for plain tensors, runValues when a sequence/optional is involved.
    bool plain = true;
    std::map<std::string, Tensor> tensors;
    for(const auto& kv : in) {
      if(kv.second.kind != OnnxValue::Kind::Tensor) plain = false;
      else tensors[kv.first] = kv.second.tensor;
    }
    for(const auto& o : model->outputs())
      if(o.kind != "tensor") plain = false;
    // --train: one step of a training loop as docs/training.md writes it;
    // reading the loss waits for the device.
    auto graph = New<ExpressionGraph>();
    graph->setDevice(so.device);
    graph->setSeed(seed);
    graph->setComputePrecision(precision);
    auto opt = Optimizer<Sgd>(lr);
    PassCounts trainPasses;  // the training fusions of the last step's graph
    auto trainStep = [&]() {
      graph->clear();
      graph->setInference(false);
      ImportedGraph imported = importGraph(*model, *graph, in, /*trainable=*/true);
      if(optLevel == OptLevel::all) trainPasses = optimizeForTraining(*graph, imported, disabledPasses);
      if(imported.spec.outputs.empty()) throw Error(str(modelPath, ": the model has no output to train"));
      Expr out = imported.spec.outputs.at(0).second;
      if(!isFloat(out->value_type()))
        throw Error(str(modelPath, ": output 0 has type ", out->value_type(), "; --train needs a float output"));
      Expr loss = mean(out * out);
      graph->forward();
      graph->backward(loss);
      opt->update(*graph);
      applyStateUpdates(imported);
      (void)loss->val()->scalar<double>();
    };
    auto runOnce = [&]() {
      if(train) trainStep();
      else if(plain) session.run(tensors);
      else session.runValues(in);
    };

    t0 = Clock::now();
    runOnce();  // builds the graph for this input signature
    double firstMs = msSince(t0);
    // With --time-limit, a model whose first run already took that long is
    // warm after it: its warm-up runs would only add minutes to a benchmark.
    double warmMs = firstMs;
    int warmed = 0;
    for(; warmed < warmup && (timeLimit <= 0 || warmMs < timeLimit * 1e3); ++warmed) {
      t0 = Clock::now();
      runOnce();
      warmMs += msSince(t0);
    }
    // --train --profile: the training graph's forward and backward nodes.
    std::shared_ptr<Profiler> trainProfiler;
    if(train && profile) {
      trainProfiler = std::make_shared<Profiler>();
      graph->setProfiler(trainProfiler);
    }
    const std::shared_ptr<Profiler>& profiler = train ? trainProfiler : session.profiler();
    if(profiler) profiler->reset();  // the timed runs only
    std::vector<double> lat;
    lat.reserve(static_cast<size_t>(iters));
    double timedMs = 0;
    for(int i = 0; i < iters; ++i) {
      if(timeLimit > 0 && i >= minIters && timedMs >= timeLimit * 1e3) break;
      t0 = Clock::now();
      runOnce();
      lat.push_back(msSince(t0));
      timedMs += lat.back();
    }

    // ru_maxrss (KiB on Linux) keeps the parent's RSS at fork across exec, so
    // a small process started by a big one reports the parent's figure; the
    // address space's own high-water mark (VmHWM) starts fresh at exec.
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    double maxrssMB = static_cast<double>(ru.ru_maxrss) / 1024.0;
    double peakRssMB = maxrssMB;
    {
      std::ifstream status("/proc/self/status");
      std::string line;
      while(std::getline(status, line))
        if(line.rfind("VmHWM:", 0) == 0) peakRssMB = std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  1234 kB"
    }
    auto last = train ? graph : session.lastGraph();
    double graphPeakMB = last ? static_cast<double>(last->memoryStats().peakBytes) / (1024.0 * 1024.0) : 0.0;
    double med = median(lat), p90 = quantile(lat, 0.9);
    double mn = *std::min_element(lat.begin(), lat.end());
    double mx = *std::max_element(lat.begin(), lat.end());

    std::string inputDesc;
    for(const auto& kv : in) {
      if(!inputDesc.empty()) inputDesc += ", ";
      if(kv.second.kind == OnnxValue::Kind::Tensor) {
        std::ostringstream s;
        s << kv.first << ": " << typeName(kv.second.tensor->type()) << "[";
        const Shape& sh = kv.second.tensor->shape();
        for(int d = 0; d < sh.rank(); ++d) s << (d ? "," : "") << sh[d];
        s << "]";
        inputDesc += s.str();
      } else {
        inputDesc += kv.first;
      }
    }

    std::string passes;
    for(const auto& p : train ? trainPasses : session.passesFired()) passes += (passes.empty() ? "" : ", ") + p.first + " " + std::to_string(p.second);
    if(passes.empty()) passes = "none fired";
    if(!profileJson.empty()) profiler->writeChromeTrace(profileJson);

    // What the products computed in: bf16 only where asked for and available.
    const std::string effectivePrecision =
        precision == ComputePrecision::bfloat16 && bf16Available() && so.device.type == DeviceType::cpu ? "bf16"
                                                                                                          : "float32";
    if(json) {
      std::ostringstream o;
      o << std::setprecision(6);
      o << "{\"model\": " << json::quote(modelPath) << ", \"mode\": \"" << (train ? "train" : "inference")
        << "\", \"device\": " << json::quote(device) << ", \"threads\": " << threads << ", \"iters\": " << lat.size()
        << ", \"warmup\": " << warmed << ", \"inputs\": " << json::quote(inputDesc) << ", \"load_ms\": " << loadMs
        << ", \"session_ms\": " << sessionMs << ", \"first_run_ms\": " << firstMs << ", \"median_ms\": " << med
        << ", \"p90_ms\": " << p90 << ", \"min_ms\": " << mn << ", \"max_ms\": " << mx
        << ", \"opt_level\": " << json::quote(optLevelName(optLevel)) << ", \"passes\": " << json::quote(passes)
        << ", \"precision\": " << json::quote(effectivePrecision)
        << ", \"peak_rss_mb\": " << peakRssMB << ", \"ru_maxrss_mb\": " << maxrssMB << ", \"graph_peak_mb\": " << graphPeakMB << ", \"samples_ms\": [";
      for(size_t i = 0; i < lat.size(); ++i) o << (i ? ", " : "") << lat[i];
      o << "]}";
      std::cout << o.str() << std::endl;
    } else {
      std::cout << std::fixed << std::setprecision(3) << "model:            " << modelPath << "\n"
                << "inputs:           " << inputDesc << "\n"
                << "mode:             " << (train ? "training step (loss = mean(output 0 squared), Sgd)" : "inference")
                << " on " << device << "\n"
                << "threads:          " << threads << (threads == 0 ? " (default)" : "") << "\n"
                << "precision:        " << effectivePrecision << "\n"
                << "load:             " << loadMs << " ms (Model::load)\n"
                << "first run:        " << firstMs << " ms (includes building the graph)\n"
                << "latency median:   " << med << " ms over " << lat.size() << " runs (" << warmed << " warm-up)\n"
                << "latency p90:      " << p90 << " ms (min " << mn << ", max " << mx << ")\n"
                << "peak RSS:         " << std::setprecision(1) << peakRssMB << " MiB (VmHWM; ru_maxrss " << maxrssMB << " MiB)\n"
                << "graph peak:       " << std::setprecision(3) << graphPeakMB << " MiB (workspace of the last run)\n";
      std::cout << "graph passes:     " << passes << " (--opt-level " << optLevelName(optLevel) << ")\n";
      if(profiler) std::cout << profiler->report(profileTop);
      if(!profileJson.empty()) std::cout << "chrome trace:     " << profileJson << "\n";
    }
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-bench: " << e.what() << "\n";
    return 1;
  }
}
