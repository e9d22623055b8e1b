// The inference rewrite that folds a convolution's epilogue into it:
//   conv -> [activation] -> [add residual -> [relu]]  =>  fused_conv
// where the activation is relu, leaky_relu, clip (finite bounds),
// hard_sigmoid, hard_swish, swish, gelu, sigmoid, tanh, or x * sigmoid(x)
// written as sigmoid + mul (SiLU as PyTorch exports it), and the residual is
// the add's other input, of the conv's shape and type.
// Legal when every intermediate (the conv, the activation and the add) has
// exactly one consumer in the chain and is not one of `keep` (graph
// outputs): then nothing else can observe the values the fused node no
// longer materialises. Float types only (the activations are float ops).
#pragma once
#include <cstddef>
#include <vector>

#include <onyx/graph/expression_graph.h>

namespace onyx {

// Rewrites every such chain of g in place (the chain's last node becomes the
// fused_conv, the others are retired); returns how many were fused.
size_t fuseConvEpilogues(ExpressionGraph& g, const std::vector<Expr>& keep);

}  // namespace onyx
