// onyx-spirals: the bundled end-to-end example. Trains the MLP on two
// spirals, saves the params (.npz), reloads them into a fresh graph, checks
// the reloaded model scores the same, and writes the graph as graphviz.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "mlp.h"

using namespace onyx;

int main(int argc, char** argv) {
  std::string out = ".";
  for(int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if(a == "--out" && i + 1 < argc) out = argv[++i];
    else if(a == "--help" || a == "-h") {
      std::cout << "usage: onyx-spirals [--out DIR]\n";
      return 0;
    } else {
      std::cerr << "onyx-spirals: unknown argument '" << a << "' (try --help)\n";
      return 2;
    }
  }
  try {
    auto data = models::twoSpirals(200, 0.02, 1);
    models::MlpConfig cfg;
    auto graph = New<ExpressionGraph>();
    graph->setDevice({0, DeviceType::cpu});
    graph->reserveWorkspaceMB(16);
    models::TrainOptions opt;
    opt.verbose = true;
    double loss = models::trainMlp(graph, data, cfg, opt);
    double acc = models::accuracy(graph, data, cfg);
    std::cout << "final loss " << loss << ", training accuracy " << acc * 100 << "%" << std::endl;

    std::string params = out + "/spirals_mlp.npz";
    graph->save(params);
    auto fresh = New<ExpressionGraph>();
    fresh->setDevice({0, DeviceType::cpu});
    fresh->load(params);
    double reloaded = models::accuracy(fresh, data, cfg);
    std::cout << "saved " << params << "; reloaded accuracy " << reloaded * 100 << "%" << std::endl;

    std::string dot = out + "/spirals_mlp.dot";
    std::ofstream(dot) << graph->graphviz();
    std::cout << "graph written to " << dot << std::endl;
    if(reloaded != acc || acc < 0.95) {
      std::cerr << "onyx-spirals: check failed (accuracy " << acc << ", reloaded " << reloaded << ")\n";
      return 1;
    }
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onyx-spirals: " << e.what() << "\n";
    return 1;
  }
}
