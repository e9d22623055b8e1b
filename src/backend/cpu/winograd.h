// Winograd F(2x2, 3x3) for float32 3x3 convolutions of stride 1 on
// channel-blocked (nChw8c) tensors on AVX2 CPUs: oneDNN 2.6's AVX2 direct
// kernel ran ResNet's 3x3 layers 25-35 % slower than onnxruntime's (its
// Winograd is AVX-512 only). Each 2x2 output tile is A^T [(G g G^T) . (B^T d
// B)] A over a 4x4 input patch: 16 products per tile where the direct
// convolution has 36, the 16 element-wise products over channels done as 16
// GEMMs (tiles x C by C x M), the transforms vectorized over the block's 8
// channels. The bias, ReLU/Clip and the residual add are applied as the
// output tiles are written.
//
// Rounding differs from the direct convolution's by a few float32 ulps of
// the sums (the transforms add and halve; tests/unit/test_winograd.cpp
// bounds it against the float64 portable kernel).
#pragma once

#include <cstdint>
#include <memory>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/backend/cpu/dnnl_conv.h>

namespace onyx {
namespace host {

// True when winogradConvForward takes this convolution: 2-D, 3x3, stride
// and dilation 1, one group, pads of at most 2, 32 or more channels each
// way (64 or more one way) in whole blocks of 8, at least 32 output tiles (2x2) in all, x, y
// (and the residual) nChw8c or plain NCHW (copied to and from nChw8c), an
// epilogue of ReLU, Clip and one residual add, AVX2, and ONYX_WINOGRAD
// not 0.
bool winogradFits(const ConvDims& cd, int nd, const ConvLayouts& lay, const ConvEpilogue* ep);

// y = conv(x, w) + b, then ep's ops in order (b and ep may be null), for
// what winogradFits takes. slot: where the transformed weights are kept
// between runs while w is the same pointer (a constant W; null: made per
// call). transposedW: w is a transposed convolution's [C, M, 3, 3] (its
// stride-1 product is this convolution with the taps flipped; cd and its
// pads are then the equivalent convolution's, 2 - p per side).
void winogradConvForward(const ConvDims& cd, const float* x, const float* w, const float* b, float* y,
                         const ConvEpilogue* ep, std::shared_ptr<void>* slot, const ConvLayouts& lay,
                         bool transposedW = false);

// Calls of winogradConvForward so far (for tests: which path ran).
uint64_t winogradRuns();

}  // namespace host
}  // namespace onyx
