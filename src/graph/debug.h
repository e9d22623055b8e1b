#pragma once
#include <string>

#include <onyx/graph/node.h>

namespace onyx {

// Marks a node so that its value (in forward) and gradient (in backward) are
// printed with shape, type, min/max/l2-norm and the values. Call it before
// running the graph. Returns the node, so it can wrap an expression.
inline Expr debug(Expr node, const std::string& message) {
  node->debug(message);
  return node;
}

// Marks a node as a checkpoint for gradient checkpointing (see
// ExpressionGraph::setCheckpointing): its value is kept, the values between
// checkpoints are recomputed during backward.
inline Expr checkpoint(Expr node) {
  node->markCheckpoint();
  return node;
}

}  // namespace onyx
