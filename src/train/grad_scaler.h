// Dynamic loss scaling for float16 training, as PyTorch's GradScaler does:
//
//   GradScaler scaler;
//   auto loss = ...;                          // float32 (cast the logits up first)
//   graph->backward(scaler.scale(loss));      // gradients of loss * S
//   scaler.step(*opt, *graph);                // unscale, step if all finite, adapt S
//
// Small float16 gradients underflow to zero; scaling the loss by S (65536 to
// start) scales every gradient by S. The optimizer divides them by S in its
// own pass (no extra pass over the gradients). When any gradient is inf or
// NaN the step is skipped and S halves; after `growthInterval` finite steps
// in a row S doubles.
#pragma once
#include <cstddef>

#include <onyx/graph/expression_graph.h>
#include <onyx/train/optimizers.h>

namespace onyx {

struct GradScalerOptions {
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  size_t growthInterval = 2000;
};

class GradScaler {
public:
  explicit GradScaler(GradScalerOptions o = GradScalerOptions());

  // loss * S, to run backward() from.
  Expr scale(Expr loss) const;
  // Unscales the gradients and steps `opt` when they are all finite; then
  // adapts S. Returns whether the step was taken.
  bool step(OptimizerBase& opt, ExpressionGraph& graph);
  bool step(const Ptr<OptimizerBase>& opt, const Ptr<ExpressionGraph>& graph) { return step(*opt, *graph); }

  double scaleFactor() const { return scale_; }
  void setScaleFactor(double s);  // when resuming from a checkpoint
  size_t skippedSteps() const { return skipped_; }
  // The global norm of the unscaled gradients at the last step (inf or NaN
  // when it was skipped).
  double lastNorm() const { return lastNorm_; }

private:
  GradScalerOptions o_;
  double scale_;
  size_t goodSteps_ = 0, skipped_ = 0;
  double lastNorm_ = 0;
};

}  // namespace onyx
