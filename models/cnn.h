// A small convolutional classifier built with the graph API, and a synthetic
// image set to train it on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/onyx.h>

#include "mlp.h"

namespace onyx {
namespace models {

struct CnnConfig {
  int64_t channels = 1, height = 12, width = 12;  // input images [N, channels, height, width]
  std::vector<int64_t> filters{8, 16};            // one conv block per entry
  int64_t kernel = 3;                             // square kernels, "same" padding (odd sizes)
  int64_t classes = 3;
  std::string prefix = "cnn";
};

// Each block: conv (kernel x kernel, stride 1, same padding) + bias, relu,
// 2x2 max pool with stride 2; then flatten and one affine layer to the
// classes. x is [N, channels, height, width]; the result is [N, classes].
// Params: "<prefix>.conv<i>.W" [filters_i, in_i, k, k], "<prefix>.conv<i>.b"
// [filters_i], "<prefix>.fc.W" [features, classes], "<prefix>.fc.b" [1, classes].
// No batch norm: the model trains and infers with the same graph.
Expr cnnLogits(Ptr<ExpressionGraph> graph, Expr x, const CnnConfig& cfg);

// `n` images of N(0, noise) pixels with one bright 3x3 square (value 1 in
// every channel); the label is the horizontal band (of `classes` equal bands)
// holding the square's centre row. Dataset::x is [n, channels*height*width].
Dataset bandImages(int64_t n, const CnnConfig& cfg, double noise, uint64_t seed);

}  // namespace models
}  // namespace onyx
