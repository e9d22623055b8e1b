#include "cnn.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace onyx {
namespace models {

Expr cnnLogits(Ptr<ExpressionGraph> graph, Expr x, const CnnConfig& cfg) {
  if(cfg.kernel % 2 == 0) throw Error(str("cnnLogits: kernel ", cfg.kernel, " must be odd (same padding)"));
  Expr h = x;
  int64_t in = cfg.channels, height = cfg.height, width = cfg.width;
  ConvOptions conv_o;
  int64_t p = cfg.kernel / 2;
  conv_o.pads = {p, p, p, p};
  PoolOptions pool_o;
  pool_o.strides = {2, 2};
  for(size_t i = 0; i < cfg.filters.size(); ++i) {
    std::string name = cfg.prefix + ".conv" + std::to_string(i);
    int64_t out = cfg.filters[i];
    // Glorot over the receptive field: fan_in = in*k*k, fan_out = out*k*k.
    float a = static_cast<float>(std::sqrt(6.0 / double((in + out) * cfg.kernel * cfg.kernel)));
    auto W = graph->param(name + ".W", {out, in, cfg.kernel, cfg.kernel}, inits::uniform(-a, a));
    auto b = graph->param(name + ".b", {out}, inits::zeros());
    h = max_pool(relu(conv(h, W, b, conv_o)), {2, 2}, pool_o);
    in = out;
    height /= 2;
    width /= 2;
  }
  int64_t features = in * height * width;
  auto W = graph->param(cfg.prefix + ".fc.W", {features, cfg.classes}, inits::glorotUniform());
  auto b = graph->param(cfg.prefix + ".fc.b", {1, cfg.classes}, inits::zeros());
  return affine(flatten(h, 1), W, b);
}

Dataset bandImages(int64_t n, const CnnConfig& cfg, double noise, uint64_t seed) {
  Dataset d;
  d.n = n;
  d.features = cfg.channels * cfg.height * cfg.width;
  d.x.resize(static_cast<size_t>(n * d.features));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> eps(0.0, noise);
  std::uniform_int_distribution<int64_t> col(1, cfg.width - 2);
  for(int64_t i = 0; i < n; ++i) {
    int64_t label = i % cfg.classes;
    // The square's centre row, inside band `label` and at least 1 from the border.
    int64_t lo = std::max<int64_t>(1, label * cfg.height / cfg.classes);
    int64_t hi = std::min<int64_t>(cfg.height - 2, (label + 1) * cfg.height / cfg.classes - 1);
    int64_t r = std::uniform_int_distribution<int64_t>(lo, std::max(lo, hi))(rng), c = col(rng);
    float* img = d.x.data() + i * d.features;
    for(int64_t k = 0; k < d.features; ++k) img[k] = static_cast<float>(eps(rng));
    for(int64_t ch = 0; ch < cfg.channels; ++ch)
      for(int64_t dr = -1; dr <= 1; ++dr)
        for(int64_t dc = -1; dc <= 1; ++dc) img[(ch * cfg.height + r + dr) * cfg.width + c + dc] += 1.f;
    d.y.push_back(label);
  }
  return d;
}

}  // namespace models
}  // namespace onyx
