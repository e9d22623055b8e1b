// What the passes share: who reads each node of a graph, which nodes are
// kept (graph outputs), and the look of small constants. Built once per
// pass, before it rewrites anything.
#pragma once
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onyx/graph/expression_graph.h>

namespace onyx {
namespace passes {

class Uses {
public:
  Uses(const ExpressionGraph& g, const std::vector<Expr>& keep);
  const std::vector<Node*>& readers(const Node* n) const;
  bool kept(const Node* n) const { return kept_.count(n) > 0; }
  // n's only reader, or null when n has several, none, or is kept: the
  // condition for a fusion to stop materialising n.
  Node* only(const Node* n) const;

private:
  std::unordered_map<const Node*, std::vector<Node*>> readers_;
  std::unordered_set<const Node*> kept_;
};

bool isOp(const Node* n, const char* name);
// The value of a constant holding one element (any rank); false otherwise.
bool scalarConstant(const Node* n, double& v);
// Whether n is a one-element constant equal to v within a relative 1e-6
// (exporters write 1/sqrt(2) and the like rounded to float).
bool isScalar(const Node* n, double v);
// The other input of a two-input node than `one` (null if neither is `one`).
Node* otherInput(const Node* n, const Node* one);
// t's input when t is a transpose that swaps the last two dims of an input
// of rank >= 2 and keeps the others (what a MatMul's trans flag does);
// null otherwise.
Node* swapsLastTwo(const Node* t);

}  // namespace passes
}  // namespace onyx
