// onyx-models: trains the bundled models (models/*.h) for a few steps and
// exports each for inference, as a native model (.npz) and as ONNX, with a
// fixed input batch and Onyx's own output on it, so that other runtimes can
// be checked against Onyx (tests/python/test_export_models.py).
//
//   onyx-models export --model mlp|cnn|transformer|all --steps N --out DIR [--opset N]
//
// writes, per model M:
//   DIR/M.npz               native model (graph.json + trained params), onnx-export reads it
//   DIR/M.onnx              the same graph exported to ONNX (checked by libonnx's checker)
//   DIR/M_input.npy         the fixed input batch (graph input "input", axis 0 symbolic "batch")
//   DIR/M_onyx_output.npy   Onyx's output "logits" on that input
//   DIR/M_init.npz          the params before training (graph->save format)
//   DIR/M_train.json        {"model", "steps", "losses"}: the training loss before each
//                           step and, last, after the final step
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cnn.h"
#include "mlp.h"
#include "transformer.h"

using namespace onyx;

namespace {

const char* kUsage =
    "usage: onyx-models export --model mlp|cnn|transformer|all [--steps N] --out DIR [--opset N]\n"
    "  Trains the model N steps (default 20) with Adam on synthetic data (fixed seeds),\n"
    "  then writes DIR/<model>.npz (native), DIR/<model>.onnx, DIR/<model>_input.npy,\n"
    "  DIR/<model>_onyx_output.npy, DIR/<model>_init.npz and DIR/<model>_train.json.\n";

struct Model {
  std::string name;
  std::vector<int64_t> example;  // one example's dims (the input is [batch, example...])
  std::function<Expr(Ptr<ExpressionGraph>, Expr)> logits;
  models::Dataset train, eval;  // eval: the exported input batch
  double lr = 0.01;
};

Model makeModel(const std::string& name) {
  Model m;
  m.name = name;
  if(name == "mlp") {
    models::MlpConfig cfg;
    m.example = {cfg.inputs};
    m.logits = [cfg](Ptr<ExpressionGraph> g, Expr x) { return models::mlpLogits(g, x, cfg); };
    m.train = models::twoSpirals(100, 0.02, 1);
    m.eval = models::twoSpirals(4, 0.02, 2);
    m.lr = 0.03;
  } else if(name == "cnn") {
    models::CnnConfig cfg;
    m.example = {cfg.channels, cfg.height, cfg.width};
    m.logits = [cfg](Ptr<ExpressionGraph> g, Expr x) { return models::cnnLogits(g, x, cfg); };
    m.train = models::bandImages(60, cfg, 0.1, 1);
    m.eval = models::bandImages(6, cfg, 0.1, 2);
  } else if(name == "transformer") {
    models::TransformerConfig cfg;
    m.example = {cfg.seq, cfg.dim};
    m.logits = [cfg](Ptr<ExpressionGraph> g, Expr x) { return models::transformerLogits(g, x, cfg); };
    m.train = models::argmaxSequences(64, cfg, 1);
    m.eval = models::argmaxSequences(5, cfg, 2);
  } else {
    throw Error(str("unknown model '", name, "' (mlp, cnn, transformer or all)"));
  }
  return m;
}

Shape batchShape(const Model& m, int64_t n) {
  std::vector<int64_t> d{n};
  d.insert(d.end(), m.example.begin(), m.example.end());
  return Shape(d);
}

// Full-batch Adam on m.train; returns the loss before each step and after the
// last one. The params as first created are saved to initPath.
std::vector<double> train(Ptr<ExpressionGraph> graph, const Model& m, int steps, const std::string& initPath) {
  auto adam = Optimizer<Adam>(m.lr);
  auto lossNow = [&]() {
    graph->clear();
    auto x = graph->constant(batchShape(m, m.train.n), inits::fromVector(m.train.x));
    auto loss = mean(cross_entropy(m.logits(graph, x), graph->indices(m.train.y)));
    graph->forward();
    return loss;
  };
  std::vector<double> losses;
  for(int step = 0; step <= steps; ++step) {
    Expr loss = lossNow();
    losses.push_back(loss->val()->scalar<double>());
    if(step == 0) graph->save(initPath);
    if(step == steps) break;
    graph->backward(loss);
    adam->update(graph);
  }
  return losses;
}

void writeNpy(const std::string& path, const TensorBase& t) { io::writeFileAtomic(path, io::npyBytes(t)); }

void exportModel(const std::string& name, int steps, const std::string& dir, int opset) {
  Model m = makeModel(name);
  auto graph = New<ExpressionGraph>();
  graph->setDevice({0, DeviceType::cpu});
  graph->reserveWorkspaceMB(32);
  graph->setSeed(1234);
  std::string base = dir + "/" + name;
  std::vector<double> losses = train(graph, m, steps, base + "_init.npz");

  // The inference graph on the fixed input batch.
  graph->clear();
  graph->setInference(true);
  Shape inShape = batchShape(m, m.eval.n);
  Tensor input = TensorBase::fromVector<float>(inShape, m.eval.x);
  Expr x = graph->input("input", inShape);
  x->bind(input);
  Expr logits = m.logits(graph, x);
  graph->forward();

  GraphSpec spec;
  spec.graphName = name;
  spec.docString = "onyx-models " + name + ", trained " + std::to_string(steps) + " steps";
  spec.outputs = {{"logits", logits}};
  std::vector<std::string> dims(static_cast<size_t>(inShape.rank()));
  dims[0] = "batch";
  spec.dimNames["input"] = dims;

  saveNative(base + ".npz", spec);
  writeNpy(base + "_input.npy", *input);
  writeNpy(base + "_onyx_output.npy", *logits->val());
  std::ostringstream js;
  js << std::setprecision(17) << "{\"model\": \"" << name << "\", \"steps\": " << steps << ", \"losses\": [";
  for(size_t i = 0; i < losses.size(); ++i) js << (i ? ", " : "") << losses[i];
  js << "]}\n";
  io::writeFileAtomic(base + "_train.json", js.str());

  ExportOptions eo;
  eo.opset = opset;
  ExportResult r = exportOnnx(spec, eo);
  checkOnnxModel(r.model, base + ".onnx");
  writeOnnxModel(base + ".onnx", r);

  std::cout << name << ": " << steps << " steps, loss " << losses.front() << " -> " << losses.back() << "; wrote "
            << base << ".npz and " << base << ".onnx (opset " << r.opset << "," ;
  for(auto& kv : r.nodesByType) std::cout << " " << kv.first << " x" << kv.second;
  std::cout << ")" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  if(argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  if(std::string(argv[1]) != "export") {
    std::cerr << "onyx-models: unknown command '" << argv[1] << "'\n" << kUsage;
    return 2;
  }
  std::string model, out;
  int steps = 20, opset = 0;
  for(int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if(i + 1 >= argc) {
        std::cerr << "onyx-models: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if(v.empty() || *end != '\0' || n < 0 || n > 1000000) {
        std::cerr << "onyx-models: " << a << " '" << v << "' is not a count\n";
        std::exit(2);
      }
      return static_cast<int>(n);
    };
    if(a == "--model") model = value();
    else if(a == "--out") out = value();
    else if(a == "--steps") steps = number(value());
    else if(a == "--opset") opset = number(value());
    else if(a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      std::cerr << "onyx-models: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if(model.empty() || out.empty()) {
    std::cerr << "onyx-models: --model and --out are required\n" << kUsage;
    return 2;
  }
  try {
    std::vector<std::string> names = model == "all" ? std::vector<std::string>{"mlp", "cnn", "transformer"}
                                                    : std::vector<std::string>{model};
    for(const auto& n : names) makeModel(n);  // unknown names fail before anything is written
    std::filesystem::create_directories(out);
    for(const auto& n : names) exportModel(n, steps, out, opset);
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onyx-models: " << e.what() << "\n";
    return 1;
  }
}
