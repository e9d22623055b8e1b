#include "mlp.h"

#include <cmath>
#include <iostream>
#include <random>

namespace onyx {
namespace models {

Expr mlpLogits(Ptr<ExpressionGraph> graph, Expr x, const MlpConfig& cfg) {
  Expr h = x;
  int64_t in = cfg.inputs;
  std::vector<int64_t> sizes = cfg.hidden;
  sizes.push_back(cfg.classes);
  for(size_t i = 0; i < sizes.size(); ++i) {
    std::string p = cfg.prefix + ".l" + std::to_string(i);
    auto W = graph->param(p + ".W", {in, sizes[i]}, inits::glorotUniform());
    auto b = graph->param(p + ".b", {1, sizes[i]}, inits::zeros());
    h = affine(h, W, b);
    if(i + 1 < sizes.size()) {
      h = tanh(h);
      if(cfg.checkpointLayers) h = checkpoint(h);
    }
    in = sizes[i];
  }
  return h;
}

Dataset twoSpirals(int64_t perClass, double noise, uint64_t seed) {
  Dataset d;
  d.features = 2;
  d.n = 2 * perClass;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> eps(0.0, noise);
  const double kPi = 3.14159265358979323846;
  for(int64_t c = 0; c < 2; ++c)
    for(int64_t i = 0; i < perClass; ++i) {
      double t = 0.25 + 3.0 * kPi * double(i) / double(perClass);  // angle, 1.5 turns
      double r = t / (3.0 * kPi);
      d.x.push_back(static_cast<float>(r * std::cos(t + double(c) * kPi) + eps(rng)));
      d.x.push_back(static_cast<float>(r * std::sin(t + double(c) * kPi) + eps(rng)));
      d.y.push_back(c);
    }
  return d;
}

double trainMlp(Ptr<ExpressionGraph> graph, const Dataset& data, const MlpConfig& cfg, const TrainOptions& opt) {
  auto adam = Optimizer<Adam>(opt.lr);
  double last = 0;
  for(int step = 0; step < opt.steps; ++step) {
    graph->clear();
    auto x = graph->constant({data.n, data.features}, inits::fromVector(data.x));
    auto labels = graph->indices(data.y);
    auto loss = mean(cross_entropy(mlpLogits(graph, x, cfg), labels));
    graph->forward();
    graph->backward(loss);
    adam->update(graph);
    last = loss->val()->scalar<double>();
    if(opt.verbose && (step % 50 == 0 || step + 1 == opt.steps))
      std::cout << "step " << step << " loss " << last << std::endl;
  }
  return last;
}

double accuracy(Ptr<ExpressionGraph> graph, const Dataset& data, const MlpConfig& cfg) {
  graph->clear();
  bool wasInference = graph->isInference();
  graph->setInference(true);
  auto x = graph->constant({data.n, data.features}, inits::fromVector(data.x));
  auto logits = mlpLogits(graph, x, cfg);
  graph->forward();
  graph->setInference(wasInference);
  std::vector<float> v;
  logits->val()->get(v);
  int64_t correct = 0;
  for(int64_t i = 0; i < data.n; ++i) {
    int64_t best = 0;
    for(int64_t c = 1; c < cfg.classes; ++c)
      if(v[i * cfg.classes + c] > v[i * cfg.classes + best]) best = c;
    correct += best == data.y[i];
  }
  return double(correct) / double(data.n);
}

}  // namespace models
}  // namespace onyx
