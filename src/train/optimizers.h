// Optimizers: Optimizer<Sgd>(lr), Optimizer<Adagrad>(lr), Optimizer<Adam>(lr),
// Optimizer<AdamW>(lr); opt->update(graph) applies one step to every trainable
// param of the graph using the gradients of the last backward(), on the
// params' device (the per-element rule is backend/cpu/update_rule.h, shared
// by the CPU loop and the GPU kernel). On the CPU all params step in one
// parallel pass (multi-tensor), which also sums the gradients' squares for
// the returned norm; only clipping and updateIfFinite need the norm first,
// and so a pass of their own.
//
// Mixed precision: a float16 or bfloat16 param gets a float32 master copy
// (state "<param>/master", made from the param on its first step, saved in
// checkpoints); each step updates the master and rounds it into the param,
// so updates smaller than the param type's spacing are not lost. With loss
// scaling (GradScaler, train/grad_scaler.h) the gradients are unscaled in
// the same pass.
#pragma once
#include <map>
#include <string>

#include <onyx/backend/cpu/update_rule.h>
#include <onyx/core/ptr.h>
#include <onyx/core/tensor.h>

namespace onyx {

class ExpressionGraph;

struct OptimizerOptions {
  double lr = 0.001;
  double momentum = 0.0;       // Sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam(W)
  double adagradEps = 1e-10;
  double weightDecay = 0.0;    // Sgd/Adagrad/Adam: L2 added to the gradient; AdamW: decoupled
  double clipNorm = 0.0;       // > 0: scale gradients so their global L2 norm is at most this
  bool masterWeights = true;   // float16/bfloat16 params: update a float32 master copy
};

class OptimizerBase {
public:
  explicit OptimizerBase(OptimizerOptions o) : opt_(o) {}
  virtual ~OptimizerBase() = default;

  // One step on all trainable params of `graph`. Returns the global gradient
  // norm before clipping.
  double update(Ptr<ExpressionGraph> graph);
  double update(ExpressionGraph& graph);
  // The same with every gradient multiplied by gradScale first (1 / the
  // loss scale), but only when all of them are finite: returns false and
  // changes nothing (not even the step count) when any gradient is inf or
  // NaN. *norm (if given) receives the global norm of the scaled gradients.
  bool updateIfFinite(ExpressionGraph& graph, double gradScale, double* norm = nullptr);

  void setLearningRate(double lr) { opt_.lr = lr; }
  double learningRate() const { return opt_.lr; }
  void setClipNorm(double c) { opt_.clipNorm = c; }
  void setWeightDecay(double wd) { opt_.weightDecay = wd; }
  const OptimizerOptions& options() const { return opt_; }
  size_t steps() const { return step_; }
  void setSteps(size_t n) { step_ = n; }  // when resuming from a checkpoint (Adam's bias correction counts them)

  // Optimizer state (moments, step) by "<param>/<slot>", for checkpoints.
  std::map<std::string, Tensor>& state() { return state_; }

protected:
  // This optimizer's rule for the current step (step_ already counts it);
  // `scale` multiplies every gradient (clipping, loss-scale undo).
  virtual UpdateRule rule(double scale) const = 0;
  Tensor& slot(const std::string& param, const std::string& slot, const TensorBase& like);
  Tensor& master(const std::string& param, const TensorBase& value);

  OptimizerOptions opt_;
  size_t step_ = 0;
  std::map<std::string, Tensor> state_;

private:
  bool updateWith(ExpressionGraph& graph, double gradScale, double* norm, bool skipNonFinite);
};

class Sgd : public OptimizerBase {
public:
  using OptimizerBase::OptimizerBase;
protected:
  UpdateRule rule(double scale) const override;
};

class Adagrad : public OptimizerBase {
public:
  using OptimizerBase::OptimizerBase;
protected:
  UpdateRule rule(double scale) const override;
};

class Adam : public OptimizerBase {
public:
  using OptimizerBase::OptimizerBase;
protected:
  UpdateRule rule(double scale) const override;
};

// Adam with decoupled weight decay (Loshchilov & Hutter): w -= lr * wd * w.
class AdamW : public Adam {
public:
  explicit AdamW(OptimizerOptions o) : Adam(withDefaultDecay(o)) {}
protected:
  UpdateRule rule(double scale) const override;
private:
  static OptimizerOptions withDefaultDecay(OptimizerOptions o) {
    if(o.weightDecay == 0.0) o.weightDecay = 0.01;
    return o;
  }
};

template <class Algorithm>
Ptr<OptimizerBase> Optimizer(double lr) {
  OptimizerOptions o;
  o.lr = lr;
  return New<Algorithm>(o);
}

template <class Algorithm>
Ptr<OptimizerBase> Optimizer(OptimizerOptions o) {
  return New<Algorithm>(o);
}

// The optimizer named `name` (sgd, adagrad, adam or adamw); null for any
// other name (the caller says which option named it).
Ptr<OptimizerBase> optimizerByName(const std::string& name, const OptimizerOptions& o);

}  // namespace onyx
