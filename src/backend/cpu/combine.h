// How scatter ops (scatter_elements, scatter_nd) combine an update b into a
// value a, for the CPU's kernels and the GPU's (backend/cuda/index.cu):
// red 1 add, 2 mul, 3 max, 4 min (NaN propagates through max and min); 0
// (none) replaces and is handled by the callers.
#pragma once
#include <type_traits>

#include <onyx/backend/cpu/functional.h>  // ONYX_HD

namespace onyx {
namespace host {

template <class A>
ONYX_HD bool isNanValue(A v) {
  if constexpr(std::is_floating_point<A>::value) return v != v;
  else return false;
}

template <class A>
ONYX_HD A combine(int red, A a, A b) {
  switch(red) {
    case 1: return a + b;
    case 2: return a * b;
    case 3: return (b > a || isNanValue(b)) && !isNanValue(a) ? b : a;
    default: return (b < a || isNanValue(b)) && !isNanValue(a) ? b : a;
  }
}

}  // namespace host
}  // namespace onyx
