#include "transformer.h"

#include <cmath>
#include <random>

namespace onyx {
namespace models {

namespace {

// x [.., in] -> [.., out] with params "<name>.W" [in, out] and "<name>.b" [out].
Expr linear(Ptr<ExpressionGraph> graph, Expr x, const std::string& name, int64_t in, int64_t out) {
  auto W = graph->param(name + ".W", {in, out}, inits::glorotUniform());
  auto b = graph->param(name + ".b", {out}, inits::zeros());
  return affine(x, W, b);
}

Expr norm(Ptr<ExpressionGraph> graph, Expr x, const std::string& name, int64_t dim, double eps) {
  auto gamma = graph->param(name + ".gamma", {dim}, inits::ones());
  auto beta = graph->param(name + ".beta", {dim}, inits::zeros());
  return layer_norm(x, gamma, beta, -1, eps);
}

}  // namespace

Expr transformerEncoder(Ptr<ExpressionGraph> graph, Expr x, const TransformerConfig& cfg) {
  const Shape& s = x->shape();
  if(s.rank() != 3 || s[2] != cfg.dim)
    throw Error(str("transformerEncoder: x must be [batch, seq, ", cfg.dim, "], got shape ", s));
  if(cfg.heads <= 0 || cfg.dim % cfg.heads != 0)
    throw Error(str("transformerEncoder: dim ", cfg.dim, " is not a multiple of heads ", cfg.heads));
  const int64_t seq = s[1], D = cfg.dim, H = cfg.heads, dh = D / H;
  const float scale = static_cast<float>(1.0 / std::sqrt(double(dh)));
  Expr h = x;
  for(int64_t l = 0; l < cfg.layers; ++l) {
    std::string p = cfg.prefix + ".l" + std::to_string(l);
    // [batch, seq, D] -> [batch, H, seq, dh]
    auto heads = [&](Expr t) { return transpose(reshape(t, std::vector<int64_t>{-1, seq, H, dh}), {0, 2, 1, 3}); };
    Expr q = heads(linear(graph, h, p + ".q", D, D));
    Expr k = heads(linear(graph, h, p + ".k", D, D));
    Expr v = heads(linear(graph, h, p + ".v", D, D));
    Expr att = softmax(dot(q, k, false, true, scale), -1);  // [batch, H, seq, seq]
    Expr ctx = reshape(transpose(matmul(att, v), {0, 2, 1, 3}), std::vector<int64_t>{-1, seq, D});
    h = norm(graph, h + linear(graph, ctx, p + ".o", D, D), p + ".ln1", D, cfg.eps);
    Expr f = linear(graph, h, p + ".ff1", D, cfg.ff);
    f = cfg.gelu ? gelu(f) : relu(f);
    h = norm(graph, h + linear(graph, f, p + ".ff2", cfg.ff, D), p + ".ln2", D, cfg.eps);
  }
  return h;
}

Expr transformerLogits(Ptr<ExpressionGraph> graph, Expr x, const TransformerConfig& cfg) {
  Expr pooled = mean(transformerEncoder(graph, x, cfg), {1}, /*keepdims=*/false);  // [batch, dim]
  auto W = graph->param(cfg.prefix + ".head.W", {cfg.dim, cfg.classes}, inits::glorotUniform());
  auto b = graph->param(cfg.prefix + ".head.b", {1, cfg.classes}, inits::zeros());
  return affine(pooled, W, b);
}

Dataset argmaxSequences(int64_t n, const TransformerConfig& cfg, uint64_t seed) {
  if(cfg.classes > cfg.dim) throw Error(str("argmaxSequences: classes ", cfg.classes, " > dim ", cfg.dim));
  Dataset d;
  d.n = n;
  d.features = cfg.seq * cfg.dim;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> val(0.0, 1.0);
  for(int64_t i = 0; i < n; ++i) {
    std::vector<double> total(static_cast<size_t>(cfg.classes), 0.0);
    for(int64_t t = 0; t < cfg.seq; ++t)
      for(int64_t f = 0; f < cfg.dim; ++f) {
        double v = val(rng);
        d.x.push_back(static_cast<float>(v));
        if(f < cfg.classes) total[static_cast<size_t>(f)] += static_cast<double>(static_cast<float>(v));
      }
    int64_t best = 0;
    for(int64_t c = 1; c < cfg.classes; ++c)
      if(total[static_cast<size_t>(c)] > total[static_cast<size_t>(best)]) best = c;
    d.y.push_back(best);
  }
  return d;
}

}  // namespace models
}  // namespace onyx
