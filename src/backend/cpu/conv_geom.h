// The geometry of a sliding window over 1 to 3 spatial dims of an NCHW
// tensor [N, C, spatial..], shared by the CPU kernels of convolution and
// pooling (ops/convolution.cpp, ops/pooling.cpp) and the GPU's
// (backend/cuda/conv.cu, cudnn.cu). Lists follow ONNX: strides and
// dilations have one entry per spatial dim, pads are
// [begin_1, .., begin_n, end_1, .., end_n].
#pragma once
#include <cstdint>
#include <vector>

#include <onyx/core/shape.h>

namespace onyx {
namespace host {

// Three dims always; the real ones are the last nd, the others 1 (kernel 1,
// stride 1, no padding), so one loop nest serves 1-D, 2-D and 3-D.
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

// A window's lists for nd spatial dims, defaults filled in.
struct Spatial {
  int nd = 0;
  std::vector<int64_t> strides, dilations, pads;  // pads: 2 * nd
};

// Output size of a window of k taps (dilation d, stride s) sliding over `in`
// plus pads pb and pe; -1 when the window does not fit. With ceilMode the
// size rounds up, but the last window must start inside the input or its
// begin padding.
int64_t windowCount(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceilMode);

// The windows of taps `kernel` over img (the tensor windows read or write)
// with their positions in pos (both [N, C, spatial..]).
ConvGeom convGeom(const Shape& img, const Shape& pos, const std::vector<int64_t>& kernel, const Spatial& sp);

// The spatial dims of s (after N and C).
std::vector<int64_t> spatialDims(const Shape& s);

// The sizes of a convolution over x [N, C, img..] with windows at pos
// [N, M, pos..] (y, or dy for the weight gradient) and taps `kernel`: G
// groups of Cg input and Mg output channels, CK = Cg * taps rows of col,
// P positions; direct when col is x itself (1x1, stride 1, no pads).
struct ConvDims {
  ConvGeom g;
  int64_t N, C, M, G, Cg, Mg, CK, P;
  bool direct;
};
ConvDims convDims(const Shape& x, const Shape& pos, const std::vector<int64_t>& kernel, const Spatial& sp,
                  int64_t group);

// A pool's windows over x [N, C, img..] giving y; planes = N * C.
struct PoolGeom {
  ConvGeom g;
  int64_t planes = 0;
};
PoolGeom poolGeom(const Shape& x, const Shape& y, const std::vector<int64_t>& kernel, const Spatial& sp);

}  // namespace host
}  // namespace onyx
