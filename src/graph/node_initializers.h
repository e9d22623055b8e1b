// Node initializers: how a constant or param gets its first value.
#pragma once
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {
namespace inits {

NodeInitializer zeros();
NodeInitializer ones();
NodeInitializer fromValue(double v);
template <class T>
NodeInitializer fromVector(const std::vector<T>& v) {
  return [v](TensorBase& t, Rng&) { t.set(v); };
}
NodeInitializer fromTensor(const Tensor& src);
NodeInitializer uniform(float lo = 0.f, float hi = 1.f);
NodeInitializer normal(float mean = 0.f, float stddev = 1.f);
// Glorot/Xavier for a (fanIn x fanOut) matrix; the last two dims are used.
NodeInitializer glorotUniform();
NodeInitializer glorotNormal();
inline NodeInitializer glorot() { return glorotUniform(); }

}  // namespace inits
}  // namespace onyx
