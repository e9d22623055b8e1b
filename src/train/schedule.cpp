#include <onyx/train/schedule.h>

#include <cmath>

#include <onyx/core/error.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

LrSchedule::LrSchedule(double base, size_t warmupSteps, Decay decay, size_t totalSteps, double minLr)
    : base_(base), warmup_(warmupSteps), decay_(decay), total_(totalSteps), min_(minLr) {
  ONYX_CHECK(std::isfinite(base) && base >= 0, "learning-rate schedule: the base rate must be >= 0, got ", base);
  ONYX_CHECK(std::isfinite(minLr) && minLr >= 0, "learning-rate schedule: the minimum rate must be >= 0, got ", minLr);
  if(decay != Decay::Constant) {
    ONYX_CHECK(totalSteps > 0, "learning-rate schedule: ", decay == Decay::Linear ? "linear" : "cosine",
               " decay needs the total number of steps");
    ONYX_CHECK(totalSteps >= warmupSteps, "learning-rate schedule: ", warmupSteps,
               " warmup steps exceed the total of ", totalSteps, " steps");
  }
}

LrSchedule::Decay LrSchedule::parseDecay(const std::string& name) {
  if(name == "constant") return Decay::Constant;
  if(name == "linear") return Decay::Linear;
  if(name == "cosine") return Decay::Cosine;
  fail("learning-rate schedule: unknown decay '", name, "' (expected constant, linear or cosine)");
}

double LrSchedule::lr(size_t step) const {
  if(step < warmup_) return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if(decay_ == Decay::Constant) return base_;
  if(step >= total_ || total_ == warmup_) return min_;
  double p = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  if(decay_ == Decay::Linear) return base_ + (min_ - base_) * p;
  const double pi = 3.14159265358979323846;
  return min_ + (base_ - min_) * 0.5 * (1.0 + std::cos(pi * p));
}

bool matchesPattern(const std::string& name, const std::string& pattern) {
  // Iterative glob with backtracking to the last '*'.
  size_t n = 0, p = 0, star = std::string::npos, mark = 0;
  while(n < name.size()) {
    if(p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if(p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++n;
      ++p;
    } else if(star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while(p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

size_t freezeParams(ExpressionGraph& graph, const std::vector<std::string>& patterns) {
  size_t count = 0;
  for(const Expr& p : *graph.params()) {
    for(const std::string& pat : patterns) {
      if(!matchesPattern(p->name(), pat)) continue;
      p->setTrainable(false);
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace onyx
