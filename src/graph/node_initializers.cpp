#include <onyx/graph/node_initializers.h>

#include <cmath>

namespace onyx {
namespace inits {

namespace {
template <class Dist>
NodeInitializer random(Dist d) {
  return [d](TensorBase& t, Rng& rng) mutable {
    for(int64_t i = 0; i < t.size(); ++i) t.setFromDouble(i, d(rng));
  };
}
std::pair<double, double> fans(const Shape& s) {
  if(s.rank() == 0) return {1, 1};
  if(s.rank() == 1) return {double(s[0]), double(s[0])};
  double receptive = 1;
  for(int i = 0; i < s.rank() - 2; ++i) receptive *= double(s[i]);
  return {double(s[-2]) * receptive, double(s[-1]) * receptive};
}
}  // namespace

NodeInitializer zeros() { return [](TensorBase& t, Rng&) { t.set(0.0); }; }
NodeInitializer ones() { return [](TensorBase& t, Rng&) { t.set(1.0); }; }
NodeInitializer fromValue(double v) { return [v](TensorBase& t, Rng&) { t.set(v); }; }

NodeInitializer fromTensor(const Tensor& src) {
  return [src](TensorBase& t, Rng&) { t.copyFrom(*src); };
}

NodeInitializer uniform(float lo, float hi) { return random(std::uniform_real_distribution<double>(lo, hi)); }
NodeInitializer normal(float mean, float stddev) { return random(std::normal_distribution<double>(mean, stddev)); }

NodeInitializer glorotUniform() {
  return [](TensorBase& t, Rng& rng) {
    auto f = fans(t.shape());
    double a = std::sqrt(6.0 / (f.first + f.second));
    std::uniform_real_distribution<double> d(-a, a);
    for(int64_t i = 0; i < t.size(); ++i) t.setFromDouble(i, d(rng));
  };
}

NodeInitializer glorotNormal() {
  return [](TensorBase& t, Rng& rng) {
    auto f = fans(t.shape());
    std::normal_distribution<double> d(0.0, std::sqrt(2.0 / (f.first + f.second)));
    for(int64_t i = 0; i < t.size(); ++i) t.setFromDouble(i, d(rng));
  };
}

}  // namespace inits
}  // namespace onyx
