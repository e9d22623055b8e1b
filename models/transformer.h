// A transformer encoder (post-norm, as in "Attention Is All You Need") built
// with the graph API, a sequence classifier on top of it, and a synthetic
// sequence set to train it on.
#pragma once
#include <cstdint>
#include <string>

#include <onyx/onyx.h>

#include "mlp.h"

namespace onyx {
namespace models {

struct TransformerConfig {
  int64_t dim = 16;    // model width; inputs are [batch, seq, dim]
  int64_t heads = 2;   // dim must be a multiple of heads
  int64_t ff = 32;     // hidden width of the feed-forward block
  int64_t layers = 1;  // encoder blocks
  bool gelu = true;    // feed-forward activation: gelu (exact, erf form) or relu
  double eps = 1e-5;   // layer norm epsilon
  int64_t seq = 6;     // sequence length of the classifier's data
  int64_t classes = 3;
  std::string prefix = "enc";
};

// `layers` encoder blocks on x [batch, seq, dim]; each is
//   a = softmax(Q K^T / sqrt(dim / heads)) V per head, Q/K/V = x W + b,
//   h = layer_norm(x + a Wo + bo),
//   y = layer_norm(h + act(h W1 + b1) W2 + b2).
// Params of block i: "<prefix>.l<i>.{q,k,v,o,ff1,ff2}.{W,b}" and
// "<prefix>.l<i>.{ln1,ln2}.{gamma,beta}". The batch dim may be anything (the
// reshapes keep it as -1). Returns [batch, seq, dim].
Expr transformerEncoder(Ptr<ExpressionGraph> graph, Expr x, const TransformerConfig& cfg);

// The classifier: the encoder, the mean over the sequence, then an affine
// layer to the classes ("<prefix>.head.W" [dim, classes], ".b" [1, classes]).
// x [batch, seq, dim] -> [batch, classes].
Expr transformerLogits(Ptr<ExpressionGraph> graph, Expr x, const TransformerConfig& cfg);

// `n` sequences of seq x dim N(0, 1) values; the label is the arg-max over
// c < classes of the sum over time of feature c. Dataset::x is [n, seq*dim].
Dataset argmaxSequences(int64_t n, const TransformerConfig& cfg, uint64_t seed);

}  // namespace models
}  // namespace onyx
