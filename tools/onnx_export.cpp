// onnx-export: native Onyx model (.npz) -> ONNX, validated by the ONNX checker
// before it is written (temporary file + rename).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include <onyx/converters/native_model.h>
#include <onyx/onnx/checker.h>
#include <onyx/onnx/model_file.h>

#include "tool_common.h"

using namespace onyx;
namespace fs = std::filesystem;

namespace {

std::string shellQuote(const std::string& s) {
  std::string r = "'";
  for(char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Opsets newer than the linked libonnx's are checked by Python's onnx (full
// check with shape inference) when it is installed. Returns "" when the model
// passed, "skip: why" when no checker could run, else the checker's message.
std::string pythonCheck(const std::string& path) {
  if(std::system("python3 -c 'import onnx' >/dev/null 2>&1") != 0) return "skip: python3 with the onnx package is not available";
  std::string err = path + ".check";
  std::string cmd = "python3 -c 'import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)' " +
                    shellQuote(path) + " 2>" + shellQuote(err);
  int rc = std::system(cmd.c_str());
  std::string msg;
  if(rc != 0) {
    std::string all = readFileBytes(err);
    size_t last = all.find_last_not_of("\n");
    all = all.substr(0, last + 1);
    size_t nl = all.rfind('\n');
    msg = nl == std::string::npos ? all : all.substr(nl + 1);
    if(msg.empty()) msg = "python's onnx checker failed";
  }
  std::remove(err.c_str());
  return msg;
}

}  // namespace

// After a model is in place: the fingerprinted data files of earlier exports
// to the same name (MODEL.<8 hex digits>.data) that it no longer reads.
static void removeStaleDataFiles(const std::string& modelPath, const std::string& keep) {
  fs::path dir = fs::path(modelPath).parent_path();
  std::string stem = fs::path(modelPath).filename().string() + ".";
  std::error_code ec;
  for(const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
    std::string n = e.path().filename().string();
    if(n == keep || n.size() != stem.size() + 13 || n.compare(0, stem.size(), stem) != 0 ||
       n.compare(n.size() - 5, 5, ".data") != 0)
      continue;
    std::string hex = n.substr(stem.size(), 8);
    if(hex.find_first_not_of("0123456789abcdef") == std::string::npos) fs::remove(e.path(), ec);
  }
}

int main(int argc, char** argv) {
  CLI::App app{"Exports a native Onyx model (.npz, as onnx-import writes it) to ONNX.\n\n"
               "Examples:\n"
               "  onnx-export model.npz -o model.onnx\n"
               "  onnx-export model.npz -o model.onnx --opset 21\n"
               "  onnx-export mlp.npz -o mlp.onnx --dynamic-axis input:0=batch\n"
               "  onnx-export big.npz -o big.onnx --external-data-threshold 1024\n"
               "  onnx-export bert.npz -o bert_optimized.onnx --optimized\n"};
  std::string inPath, outPath;
  std::vector<std::string> dynamicAxes;
  ExportOptions eo;
  int64_t threshold = -1;
  app.add_option("model", inPath, "the native model (.npz)")->required();
  app.add_option("-o,--output", outPath, "the .onnx file to write")->required();
  app.add_option("--opset", eo.opset, "target opset (default: 17, or the lowest above it that every node supports)");
  app.add_option("--dynamic-axis", dynamicAxes, "INPUT:AXIS=NAME: make that input dim symbolic (repeatable)");
  bool optimized = false;
  app.add_flag("--optimized", optimized,
               "write the graph as inference sessions run it: the graph passes of level all (constant folding, "
               "no-op elimination, batch norm folding, GELU and MatMul + bias fusion) but the CPU-kernel ones, "
               "whose ops have no ONNX form");
  app.add_option("--external-data-threshold", threshold,
                 "initializers of at least this many bytes go to <output>.data (default: never)");
  CLI11_PARSE(app, argc, argv);

  try {
    ExpressionGraph graph;
    GraphSpec spec = loadNative(inPath, graph);
    if(optimized) {
      graph.setInference(true);
      std::vector<Expr> keep;
      for(auto& o : spec.outputs) keep.push_back(o.second);
      for(auto& s : spec.sequenceOutputs)
        for(auto& e : s.second.items) keep.push_back(e);
      for(const auto& p : optimizeGraph(graph, keep, OptLevel::all, /*cpuKernels=*/false))
        std::cout << "pass " << p.first << ": " << p.second << "\n";
    }
    for(const auto& d : dynamicAxes) {
      size_t colon = d.find(':'), eq = d.find('=');
      if(colon == std::string::npos || eq == std::string::npos || eq < colon || colon == 0 || eq + 1 == d.size())
        throw Error(str("--dynamic-axis '", d, "': expected INPUT:AXIS=NAME"));
      std::string input = d.substr(0, colon), name = d.substr(eq + 1);
      int64_t axis = 0;
      try {
        axis = std::stoll(d.substr(colon + 1, eq - colon - 1));
      } catch(const std::exception&) {
        throw Error(str("--dynamic-axis '", d, "': axis '", d.substr(colon + 1, eq - colon - 1), "' is not a number"));
      }
      Expr in = graph.get(input);
      if(!in || in->kind() != NodeKind::Input) throw Error(str("--dynamic-axis '", d, "': the graph has no input '", input, "'"));
      if(axis < 0 || axis >= in->shape().rank())
        throw Error(str("--dynamic-axis '", d, "': input '", input, "' has rank ", in->shape().rank()));
      auto& names = spec.dimNames[input];
      names.resize(static_cast<size_t>(in->shape().rank()));
      names[static_cast<size_t>(axis)] = name;
    }
    if(threshold >= 0) {
      eo.externalDataThreshold = threshold;
      eo.externalDataFile = fs::path(outPath).filename().string() + ".data";
      eo.fingerprintDataFile = true;  // MODEL.onnx.<crc32>.data: model and data replaced as a pair
    }
    ExportResult r = exportOnnx(spec, eo);
    checkOnnxModel(r.model, outPath);
    // Validate in a temporary file next to the output, then rename it into place.
    std::string tmp = outPath + ".tmp." + std::to_string(::getpid());
    std::string checker = "libonnx " + std::to_string(onnxCheckerMaxOpset()) + " checker + strict shape inference";
    // The data file is named by its content: writing it never touches the
    // file the model being replaced reads, so a kill at any moment leaves
    // either the old pair or the new one. A failed check removes the new data
    // file unless it was there before (same content as an older export).
    fs::path dataPath = fs::path(outPath).parent_path() / r.externalDataFile;
    bool dataExisted = !r.externalData.empty() && fs::exists(dataPath);
    if(r.opset > onnxCheckerMaxOpset()) {
      writeOnnxModel(tmp, r);
      std::string msg = pythonCheck(tmp);
      if(!msg.empty() && msg.rfind("skip: ", 0) != 0) {
        std::remove(tmp.c_str());
        if(!r.externalData.empty() && !dataExisted) fs::remove(dataPath);
        throw Error(str(outPath, ": ONNX checker: ", msg));
      }
      checker = msg.empty() ? "python onnx checker (full_check)"
                            : "not checked (" + msg.substr(6) + "; libonnx knows opsets up to " +
                                  std::to_string(onnxCheckerMaxOpset()) + ")";
      if(std::rename(tmp.c_str(), outPath.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(str(outPath, ": cannot rename the temporary file into place"));
      }
    } else {
      writeOnnxModel(outPath, r);
    }
    removeStaleDataFiles(outPath, r.externalData.empty() ? "" : r.externalDataFile);
    // A symbolic dim is only worth its name if the model runs at another
    // size: try each named input dim at its size + 1 (zeros as data).
    bool dynamic = false;
    for(auto& kv : spec.dimNames)
      for(auto& d : kv.second) dynamic = dynamic || !d.empty();
    if(dynamic) {
      std::map<std::string, Tensor> feeds;
      for(auto& e : graph.nodes()) {
        if(e->kind() != NodeKind::Input) continue;
        std::vector<int64_t> dims = e->shape().vec();
        auto dn = spec.dimNames.find(e->name());
        for(size_t a = 0; dn != spec.dimNames.end() && a < dn->second.size() && a < dims.size(); ++a)
          if(!dn->second[a].empty()) dims[a] += 1;
        Tensor t = TensorBase::create(Shape(dims), e->value_type());
        if(t->type() != Type::string && t->bytes()) std::memset(t->raw(), 0, t->bytes());
        feeds[e->name()] = t;
      }
      try {
        Session session(Model::load(outPath));
        session.run(feeds);
      } catch(const std::exception& e) {
        std::cerr << "onnx-export: warning: " << outPath << " does not run with its symbolic dims one larger than "
                  << "exported (" << e.what() << "); the graph holds a fixed copy of such a dim\n";
      }
    }
    std::cout << outPath << ": opset " << r.opset << ", IR " << r.irVersion << ", " << r.initializers
              << " initializers (" << r.initializerBytes << " bytes" << (r.externalData.empty() ? "" : ", external")
              << "), validated by " << checker << "\n  nodes:";
    for(auto& kv : r.nodesByType) std::cout << " " << kv.first << " x" << kv.second;
    std::cout << "\n";
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-export: " << e.what() << "\n";
    return 1;
  }
}
