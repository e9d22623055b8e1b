// Training helpers (src/train/schedule.cpp): a learning-rate schedule
// (warmup then decay), glob patterns on param names and freezing params.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace onyx {

class ExpressionGraph;

// lr(step), step counted from 0:
//  - warmup: for step < warmupSteps, lr = base * (step + 1) / warmupSteps
//    (so the first step is not at 0 and step warmupSteps - 1 reaches base);
//  - then decay over the remaining totalSteps - warmupSteps steps, from base
//    down to minLr at step totalSteps (and minLr after it):
//      Constant: base throughout (minLr unused);
//      Linear:   base + (minLr - base) * p;
//      Cosine:   minLr + (base - minLr) * (1 + cos(pi p)) / 2;
//    with p = (step - warmupSteps) / (totalSteps - warmupSteps) in [0, 1].
// totalSteps = 0 with Linear or Cosine is an onyx::Error (no end to decay to).
class LrSchedule {
public:
  enum class Decay { Constant, Linear, Cosine };

  LrSchedule() = default;
  LrSchedule(double base, size_t warmupSteps = 0, Decay decay = Decay::Constant, size_t totalSteps = 0,
             double minLr = 0.0);

  double lr(size_t step) const;
  double base() const { return base_; }
  size_t warmupSteps() const { return warmup_; }
  size_t totalSteps() const { return total_; }
  Decay decay() const { return decay_; }
  double minLr() const { return min_; }

  // "constant", "linear", "cosine"; anything else is an onyx::Error.
  static Decay parseDecay(const std::string& name);

private:
  double base_ = 0.001;
  size_t warmup_ = 0;
  Decay decay_ = Decay::Constant;
  size_t total_ = 0;
  double min_ = 0.0;
};

// Glob match of the whole name: '*' matches any run of characters (also
// '/' and '.'), '?' any one character; everything else matches itself.
bool matchesPattern(const std::string& name, const std::string& pattern);

// Makes every param of `graph` whose name matches one of `patterns`
// non-trainable; returns how many params matched (each counted once, frozen
// before or not). Params that match no pattern are left as they are.
size_t freezeParams(ExpressionGraph& graph, const std::vector<std::string>& patterns);

}  // namespace onyx
