// The optimizers' step for one element, written once for both devices: the
// CPU's loop (train/optimizers.cpp) and the GPU kernel
// (backend/cuda/optim.cu) call updateElement for every element of a param.
// The math is in double whatever the param's type; state slots are float32,
// and a float16/bfloat16 param may carry a float32 master copy that the
// step updates, the param receiving the master rounded to its type.
#pragma once
#include <cmath>
#include <cstdint>

#include <onyx/backend/cpu/functional.h>  // ONYX_HD
#include <onyx/core/types.h>

namespace onyx {

// Which rule and its constants for one step: plain data, so it reaches a
// GPU kernel by value.
struct UpdateRule {
  enum Kind : int { sgd, momentum, adagrad, adam, adamw };
  Kind kind = sgd;
  double lr = 0, mu = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
  double c1 = 1, c2 = 1;  // Adam's bias corrections, 1 - beta^t for this step
  double gradScale = 1;   // multiplies every gradient (clipping, undoing a loss scale)

  // The float32 state slots per element, and their names in
  // OptimizerBase::state() ("<param>/<slot>").
  int slots() const { return kind == sgd ? 0 : kind == momentum || kind == adagrad ? 1 : 2; }
  const char* slotName(int k) const {
    if(kind == momentum) return "momentum";
    if(kind == adagrad) return "sum_sq";
    return k == 0 ? "m" : "v";
  }

  // New value of weight w for gradient g; s0 and s1 are the element's state
  // slots (unused ones may be null). applyAs<K> is the rule of one kind, for
  // loops that choose the kind once (the CPU's fused step); apply() switches
  // per element (the GPU kernel, where the branch is uniform).
  template <Kind K>
  ONYX_HD double applyAs(double w, double g, float* s0, float* s1) const {
    g *= gradScale;
    if constexpr(K == sgd) {
      (void)s0;
      (void)s1;
      return w - lr * (g + weightDecay * w);
    } else if constexpr(K == momentum) {
      (void)s1;
      double m = mu * *s0 + (g + weightDecay * w);
      *s0 = static_cast<float>(m);
      return w - lr * m;
    } else if constexpr(K == adagrad) {
      (void)s1;
      g += weightDecay * w;
      double a = *s0 + g * g;
      *s0 = static_cast<float>(a);
      return w - lr * g / (::sqrt(a) + eps);
    } else {
      if constexpr(K == adam) g += weightDecay * w;  // AdamW decays the weight itself (below)
      double m = beta1 * *s0 + (1 - beta1) * g;
      double v = beta2 * *s1 + (1 - beta2) * g * g;
      *s0 = static_cast<float>(m);
      *s1 = static_cast<float>(v);
      double step = lr * (m / c1) / (::sqrt(v / c2) + eps);
      if constexpr(K == adamw) return w - lr * weightDecay * w - step;
      else return w - step;
    }
  }
  ONYX_HD double apply(double w, double g, float* s0, float* s1) const {
    switch(kind) {
      case sgd: return applyAs<sgd>(w, g, s0, s1);
      case momentum: return applyAs<momentum>(w, g, s0, s1);
      case adagrad: return applyAs<adagrad>(w, g, s0, s1);
      case adam: return applyAs<adam>(w, g, s0, s1);
      case adamw: return applyAs<adamw>(w, g, s0, s1);
    }
    return w;
  }
};

// One element i of a param w (type T) with gradient g: the master copy, when
// given, is the weight that is updated; w receives it in its own type.
template <class T>
ONYX_HD void updateElement(const UpdateRule& r, int64_t i, T* w, const T* g, float* master, float* s0, float* s1) {
  using C = typename ComputeOf<T>::type;
  double wi = master ? static_cast<double>(master[i]) : static_cast<double>(static_cast<C>(w[i]));
  double nw = r.apply(wi, static_cast<double>(static_cast<C>(g[i])), s0 ? s0 + i : nullptr, s1 ? s1 + i : nullptr);
  if(master) master[i] = static_cast<float>(nw);
  w[i] = static_cast<T>(static_cast<C>(nw));
}

}  // namespace onyx
