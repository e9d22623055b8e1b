// Gradient accumulation: the gradients of several backward passes (micro-
// batches, each with a graph of its own: dynamic graphs are rebuilt per
// batch) summed into one optimizer step, for batches larger than memory
// allows.
//
//   GradAccumulator acc;
//   for(each micro-batch b of the step) {
//     graph->clear(); ...build...; graph->forward(); graph->backward(loss_b);
//     acc.add(*graph, samples_b / double(samples_of_step));  // mean losses
//   }
//   acc.apply(*graph);
//   opt->update(*graph);
//
// With mean losses and each micro-batch weighted by its share of the step's
// samples, the step equals one on the whole batch (up to rounding).
#pragma once
#include <map>
#include <string>

#include <onyx/core/tensor.h>

namespace onyx {

class ExpressionGraph;

class GradAccumulator {
public:
  // Adds weight * gradient of every trainable param that has one now.
  void add(ExpressionGraph& graph, double weight = 1.0);
  // Makes the sums the params' gradients (what the optimizer reads) and
  // starts over. A param with no gradient in any micro-batch gets none.
  void apply(ExpressionGraph& graph);
  size_t microBatches() const { return count_; }

private:
  std::map<std::string, Tensor> sums_;  // float64, host
  size_t count_ = 0;
};

}  // namespace onyx
