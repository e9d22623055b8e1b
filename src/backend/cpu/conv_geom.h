// The geometry of a sliding window over 1 to 3 spatial dims, shared by the
// CPU kernels of convolution and pooling (ops/conv.cpp) and the GPU's
// (backend/cuda/conv.cu). Three dims always; the real ones are the last nd,
// the others 1.
#pragma once
#include <cstdint>

namespace onyx {
namespace host {

struct ConvGeom {
  // img: the tensor windows read (or write); pos: window positions; k: taps;
  // s strides, d dilations, pb/pe begin/end pads.
  int64_t img[3] = {1, 1, 1}, pos[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  int64_t imgSize = 1, posSize = 1, kSize = 1;
  // col == image: 1x1 kernel, stride 1, no padding.
  bool identity() const {
    for(int i = 0; i < 3; ++i)
      if(k[i] != 1 || s[i] != 1 || pb[i] != 0 || pos[i] != img[i]) return false;
    return true;
  }
};

}  // namespace host
}  // namespace onyx
