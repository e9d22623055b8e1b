// A multi-layer perceptron built with the graph API, and a synthetic
// two-spirals classification set to train it on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/onyx.h>

namespace onyx {
namespace models {

struct MlpConfig {
  int64_t inputs = 2;
  std::vector<int64_t> hidden{32, 32};
  int64_t classes = 2;
  std::string prefix = "mlp";
  bool checkpointLayers = false;  // mark each hidden activation as a checkpoint
};

// logits = W_n · tanh(... tanh(W_1 · x + b_1) ...) + b_n; params are named
// "<prefix>.l<i>.W" / ".b", so a rebuilt graph finds the same params.
Expr mlpLogits(Ptr<ExpressionGraph> graph, Expr x, const MlpConfig& cfg);

struct Dataset {
  std::vector<float> x;        // n x features, row-major
  std::vector<int64_t> y;      // n labels
  int64_t n = 0, features = 0;
};

// Two interleaved spirals, `perClass` points each, with Gaussian noise.
Dataset twoSpirals(int64_t perClass, double noise, uint64_t seed);

struct TrainOptions {
  int steps = 300;
  double lr = 0.03;
  bool verbose = false;
};

// Trains with Adam on the full set, rebuilding the graph every step (the
// dynamic-graph way). Returns the final training loss.
double trainMlp(Ptr<ExpressionGraph> graph, const Dataset& data, const MlpConfig& cfg, const TrainOptions& opt);

// Fraction of points whose arg-max logit is the label.
double accuracy(Ptr<ExpressionGraph> graph, const Dataset& data, const MlpConfig& cfg);

}  // namespace models
}  // namespace onyx
