// onnx-run: runs an ONNX model on inputs from files and writes its outputs.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tool_common.h"

#include <onyx/io/json.h>
#include <onyx/io/npz.h>

using namespace onyx;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  CLI::App app{"Runs an ONNX model with Onyx.\n\n"
               "Examples:\n"
               "  onnx-run model.onnx --input x=x.npy --output-dir out/\n"
               "  onnx-run model.onnx --input x=input_0.pb --threads 2\n"
               "  onnx-run test_abs/model.onnx --test-data test_abs/test_data_set_0\n"};
  std::string modelPath, outDir, testData, device = "cpu";
  std::vector<std::string> inputs;
  int threads = 0;
  double rtol = 1e-3, atol = 1e-5;
  app.add_option("model", modelPath, "the .onnx file")->required();
  app.add_option("--input", inputs, "NAME=FILE (.npy or TensorProto .pb); repeat per input");
  app.add_option("--output-dir", outDir, "write each output as DIR/<output name>.npy");
  app.add_option("--test-data", testData,
                 "a test_data_set_N folder: inputs from its input_*.pb (unless --input), outputs compared with output_*.pb");
  app.add_option("--threads", threads, "CPU threads (0: default)");
  std::string maxMemory;
  app.add_option("--max-memory", maxMemory,
                 "the most memory the run's values may take, e.g. 512M or 2G (default: no limit); more is an error");
  int64_t maxLoopIterations = int64_t(1) << 20;
  app.add_option("--max-loop-iterations", maxLoopIterations,
                 "the most iterations one Loop (or steps one Scan) may unroll; more is an error")
      ->capture_default_str();
  app.add_option("--device", device, "cpu or gpu0")->capture_default_str();
  OptLevel optLevel = OptLevel::all;
  tools::addOptLevelOption(app, optLevel);
  std::string precision = "float32";
  tools::addPrecisionOption(app, precision);
  app.add_option("--rtol", rtol, "relative tolerance for --test-data")->capture_default_str();
  app.add_option("--atol", atol, "absolute tolerance for --test-data")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    auto model = Model::load(modelPath);
    SessionOptions so;
    so.device = parseDevice(device);
    so.threads = threads;
    so.optimization = optLevel;
    so.precision = parseComputePrecision(precision, "--precision");
    if(so.precision == ComputePrecision::bfloat16 && !bf16Available())
      std::cerr << "onnx-run: this CPU has no bfloat16 instructions (AVX512_BF16 or AMX): computing in float32\n";
    if(!maxMemory.empty()) so.maxMemoryBytes = tools::parseByteSize(maxMemory, "--max-memory");
    so.maxLoopIterations = maxLoopIterations;
    Session session(model, so);
    HostValues in;
    tools::TestDataSet set;
    if(!testData.empty()) {
      set = tools::readTestDataSet(testData, *model);
      if(inputs.empty()) in = set.inputs;
    }
    for(const auto& spec : inputs) {
      size_t eq = spec.find('=');
      if(eq == std::string::npos || eq == 0) throw Error(str("--input '", spec, "': expected NAME=FILE"));
      std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
      const ValueInfo* info = nullptr;
      for(const auto& i : model->inputs())
        if(i.name == name) info = &i;
      if(!info) {
        std::string names;
        for(const auto& i : model->inputs()) names += (names.empty() ? "" : ", ") + i.name;
        throw Error(str("--input '", spec, "': the model has no input '", name, "' (inputs: ", names, ")"));
      }
      in[name] = tools::readValueFile(file, info);
    }
    HostValues out = session.runValues(in);
    if(!outDir.empty()) {
      // Every file name first: two outputs must not land on one file.
      std::map<std::string, std::string> taken;  // file -> output
      for(const auto& o : model->outputs()) {
        const HostValue& v = out.at(o.name);
        std::vector<std::string> files;
        if(v.kind == OnnxValue::Kind::Tensor) files.push_back(tools::outputFileName(o.name, ".npy"));
        for(size_t i = 0; v.kind == OnnxValue::Kind::Sequence && i < v.sequence.size(); ++i)
          files.push_back(tools::outputFileName(o.name, "_" + std::to_string(i) + ".npy"));
        if(v.kind == OnnxValue::Kind::Map || v.kind == OnnxValue::Kind::MapSequence)
          files.push_back(tools::outputFileName(o.name, ".json"));
        for(const auto& f : files) {
          auto it = taken.emplace(f, o.name);
          if(!it.second)
            throw Error(str("outputs '", it.first->second, "' and '", o.name, "' would both be written to ",
                            (fs::path(outDir) / f).string()));
        }
      }
      fs::create_directories(outDir);
    }
    for(const auto& o : model->outputs()) {
      const HostValue& v = out.at(o.name);
      if(v.kind == OnnxValue::Kind::Tensor) {
        std::cout << o.name << ": " << typeName(v.tensor->type()) << " " << v.tensor->shape() << "\n";
        if(!outDir.empty()) tools::writeNpyAtomic((fs::path(outDir) / tools::outputFileName(o.name, ".npy")).string(), *v.tensor);
      } else if(v.kind == OnnxValue::Kind::Sequence) {
        std::cout << o.name << ": sequence of " << v.sequence.size() << "\n";
        for(size_t i = 0; i < v.sequence.size() && !outDir.empty(); ++i)
          tools::writeNpyAtomic((fs::path(outDir) / tools::outputFileName(o.name, "_" + std::to_string(i) + ".npy")).string(),
                               *v.sequence[i]);
      } else if(v.kind == OnnxValue::Kind::Map || v.kind == OnnxValue::Kind::MapSequence) {
        // JSON: a map is an object (keys as strings), a sequence of maps an
        // array of them.
        const bool seq = v.kind == OnnxValue::Kind::MapSequence;
        const int64_t K = v.tensor->size(), n = seq ? (K ? v.mapValues->size() / K : 0) : 1;
        std::cout << o.name << ": " << (seq ? str("sequence of ", n, " maps") : std::string("map")) << " ("
                  << typeName(v.tensor->type()) << " -> " << typeName(v.mapValues->type()) << ", " << K << " keys)\n";
        if(!outDir.empty()) {
          auto number = [](double d) {
            return std::isfinite(d) ? json::Value::number(d)
                                    : json::Value::string(std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
          };
          json::Value maps = json::Value::array();
          for(int64_t m = 0; m < n; ++m) {
            json::Value obj = json::Value::object();
            for(int64_t k = 0; k < K; ++k) {
              std::string key = v.tensor->type() == Type::string ? v.tensor->strings()[static_cast<size_t>(k)]
                                                                 : std::to_string(v.tensor->get<int64_t>(k));
              obj.set(key, number(v.mapValues->getAsDouble(m * K + k)));
            }
            maps.push(obj);
          }
          io::writeFileAtomic((fs::path(outDir) / tools::outputFileName(o.name, ".json")).string(),
                              (seq ? maps : maps.asArray("maps").at(0)).dump() + "\n");
        }
      } else {
        std::cout << o.name << ": none\n";
      }
    }
    if(!testData.empty()) {
      for(const auto& kv : set.expected) {
        std::string r = tools::compareValues(kv.second, out.at(kv.first), rtol, atol);
        if(!r.empty()) {
          std::cerr << "onnx-run: " << testData << ": output '" << kv.first << "': " << r << "\n";
          return 1;
        }
      }
      std::cout << "outputs match " << testData << " (rtol " << rtol << ", atol " << atol << ")\n";
    }
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-run: " << e.what() << "\n";
    return 1;
  }
}
