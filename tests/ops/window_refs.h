// Reference helpers of the sliding-window cases (cases_convolution.cpp,
// cases_pooling.cpp): index loops and the position a window's tap reads.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace onyx {
namespace test {

using V = std::vector<int64_t>;

// Calls f(idx) for every multi-index of `dims` in row-major order.
inline void forEachIndex(const V& dims, const std::function<void(const V&)>& f) {
  for(auto d : dims)
    if(d == 0) return;
  V idx(dims.size(), 0);
  while(true) {
    f(idx);
    int i = int(dims.size()) - 1;
    while(i >= 0 && ++idx[size_t(i)] == dims[size_t(i)]) idx[size_t(i--)] = 0;
    if(i < 0) return;
  }
}

inline int64_t flatAt(const V& shape, const V& idx) {
  int64_t f = 0;
  for(size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

inline V cat(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A convolution's lists (empty: ONNX's defaults), group and output padding.
struct Geo {
  V strides, dilations, pads;
  int64_t group = 1;
  V outputPadding;
};

inline int64_t at(const V& v, size_t i, int64_t def) { return v.empty() ? def : v[i]; }

// Input position of output o with tap kk, and whether it is inside `in`.
inline bool tapPos(const V& o, const V& kk, const V& in, const Geo& g, V& p) {
  size_t nd = in.size();
  p.resize(nd);
  bool inside = true;
  for(size_t i = 0; i < nd; ++i) {
    p[i] = o[i] * at(g.strides, i, 1) + kk[i] * at(g.dilations, i, 1) - at(g.pads, i, 0);
    inside = inside && p[i] >= 0 && p[i] < in[i];
  }
  return inside;
}

}  // namespace test
}  // namespace onyx
