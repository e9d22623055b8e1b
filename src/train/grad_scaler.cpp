#include <onyx/train/grad_scaler.h>

#include <cmath>

#include <onyx/ops/elementwise.h>

namespace onyx {

GradScaler::GradScaler(GradScalerOptions o) : o_(o), scale_(o.initScale) {
  ONYX_CHECK(std::isfinite(o.initScale) && o.initScale > 0, "GradScaler: initScale must be finite and > 0, got ",
             o.initScale);
  ONYX_CHECK(o.growthFactor >= 1, "GradScaler: growthFactor must be >= 1, got ", o.growthFactor);
  ONYX_CHECK(o.backoffFactor > 0 && o.backoffFactor < 1, "GradScaler: backoffFactor must lie in (0, 1), got ",
             o.backoffFactor);
  ONYX_CHECK(o.growthInterval >= 1, "GradScaler: growthInterval must be >= 1");
}

void GradScaler::setScaleFactor(double s) {
  ONYX_CHECK(std::isfinite(s) && s > 0, "GradScaler: the scale must be finite and > 0, got ", s);
  scale_ = s;
}

Expr GradScaler::scale(Expr loss) const { return loss * scale_; }

bool GradScaler::step(OptimizerBase& opt, ExpressionGraph& graph) {
  bool stepped = opt.updateIfFinite(graph, 1.0 / scale_, &lastNorm_);
  if(!stepped) {
    ++skipped_;
    goodSteps_ = 0;
    scale_ *= o_.backoffFactor;
    return false;
  }
  if(++goodSteps_ >= o_.growthInterval) {
    goodSteps_ = 0;
    double grown = scale_ * o_.growthFactor;
    if(std::isfinite(grown)) scale_ = grown;
  }
  return true;
}

}  // namespace onyx
