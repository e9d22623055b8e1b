// float32 convolutions through oneDNN: convolution forward, deconvolution
// forward (conv_transpose, which is also conv's gradient w.r.t. x) and
// convolution backward-weights, for 1 to 3 spatial dims, groups (depthwise
// included), strides, dilations, asymmetric pads, bias and an optional
// epilogue of post-ops (activations, residual sum).
//
// Every problem is described in the convolution's view (conv_geom.h's
// ConvDims): the image [N, C, img..] is what windows read (conv's x,
// conv_transpose's y), the positions [N, M, pos..] where they sit (conv's y,
// conv_transpose's x, the weight gradient's dy), and W is [M, C/G, k..] in
// all three (ONNX's Conv W, and ConvTranspose's W [x channels, y channels/G,
// k..]). Tensors are plain row-major NC(D)(H)W; oneDNN's blocked layouts stay
// inside a call, except reordered weights kept in a caller's slot.
//
// A call returns false, having written nothing, when oneDNN does not take the
// problem (empty tensors, negative begin pads, sizes beyond int, an end pad it
// rejects); the caller then runs its portable kernel.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>

namespace onyx {
namespace host {

// One step of an epilogue, applied in order to the convolution's output
// (bias already added). Sum adds the residual tensor given with the epilogue
// (shaped like the output) at that point: y = y + residual.
struct ConvPostOp {
  enum class Kind : uint8_t {
    Relu,         // max(x, 0)
    LeakyRelu,    // x >= 0 ? x : alpha * x
    Clip,         // min(max(x, alpha), beta)
    HardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
    HardSigmoid,  // max(0, min(1, alpha * x + beta))
    Swish,        // x * sigmoid(x) (SiLU)
    GeluErf,      // x / 2 * (1 + erf(x / sqrt 2))
    GeluTanh,     // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
    Logistic,     // sigmoid
    Tanh,
    Sum,          // x + residual
  };
  Kind kind = Kind::Relu;
  float alpha = 0.f, beta = 0.f;
};

struct ConvEpilogue {
  std::vector<ConvPostOp> ops;
  // The residual of the Sum step (at most one), shaped like the output; it
  // may be the output itself (then it is read in place).
  const float* residual = nullptr;
};

// Where a caller keeps weights reordered to oneDNN's blocked layout between
// runs (Node::kernelState() of a conv whose W is a constant): the slot is
// reused while it holds the reordering of the same W pointer for the same
// primitive, and refilled otherwise. Null: reorder on every run.
using DnnlWeightSlot = std::shared_ptr<void>;

// How a forward convolution's x, y and residual are stored: 0 plain
// NC(D)(H)W, or b (8 or 16) for oneDNN's channel-blocked nChw8c / nChw16c
// (channels in blocks of b, innermost; the channel count a multiple of b;
// 2-D convolutions only), or 1 for channels-last NHWC (2-D only). Blocked tensors passed from one convolution to the
// next skip the reorders in and out that plain ones cost (graph/passes'
// blocked_layout decides which; ~40% of MobileNetV2's conv time).
struct ConvLayouts {
  int x = 0, y = 0, residual = 0;
  bool any() const { return x || y || residual; }
};

// y [N, M, pos..] = conv(x [N, C, img..], w [M, C/G, k..]) + b [M] (b may be
// null), then the epilogue. nd: the number of real spatial dims (the last nd
// of cd.g's three).
bool dnnlConvForward(const ConvDims& cd, int nd, const float* x, const float* w, const float* b, float* y,
                     const ConvEpilogue* epilogue = nullptr, DnnlWeightSlot* slot = nullptr,
                     ConvLayouts layouts = {}, bool bf16 = false);

// The channel block of oneDNN's direct convolution kernels on this CPU: 16
// with AVX-512, 8 with AVX2; 0 where the oneDNN path is off or neither.
int dnnlChannelBlock();

// Copies a float32 [N, C, H, W] tensor from one layout to another (0 plain,
// or a channel block as in ConvLayouts); C must be a multiple of a block.
void dnnlReorderChannels(const float* from, int fromBlock, float* to, int toBlock, int64_t N, int64_t C, int64_t H,
                         int64_t W);

// y [N, C, img..] = conv_transpose(x [N, M, pos..], w [M, C/G, k..]) + b [C]
// (b may be null), then the epilogue. The image may be larger than the
// windows reach (output_padding): those elements get the bias only.
bool dnnlConvTransposed(const ConvDims& cd, int nd, const float* x, const float* w, const float* b, float* y,
                        const ConvEpilogue* epilogue = nullptr, DnnlWeightSlot* slot = nullptr, bool bf16 = false);

// dw [M, C/G, k..] = the gradient of conv(x, W) w.r.t. W given dy
// [N, M, pos..] (overwritten, not accumulated). dy may have fewer positions
// than the conv would produce (trailing ones cut).
bool dnnlConvGradWeight(const ConvDims& cd, int nd, const float* x, const float* dy, float* dw, bool bf16 = false);

// ---- bfloat16 compute (ComputePrecision::bfloat16)
//
// With bf16 true, the three convolution calls above read their float32
// inputs rounded to bfloat16 (nearest even, in the reorders that block
// them) and sum the products in float32; outputs stay float32. Where this
// CPU has no bfloat16 instructions (dnnlHasBf16) or oneDNN has no fast
// bfloat16 kernel for the problem, they compute in float32.
//
// Whether oneDNN computes bfloat16 products in hardware here (AVX512_BF16
// or AMX); false with ONYX_BF16=0 in the environment or oneDNN off.
bool dnnlHasBf16();
// C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for i < batch, in float32
// buffers (layouts as host::gemm's), matrix i of A at A + i * aStride and
// so on (a stride 0: one matrix for every i), with A and B rounded to
// bfloat16 and the products summed in float32 by oneDNN's matmul. C is not
// read when beta is 0. False, nothing written, when bfloat16 is not
// available or oneDNN declines the problem.
bool dnnlMatmulBf16(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, int64_t aStride, const float* B, int64_t ldb, int64_t bStride,
                    float beta, float* C, int64_t ldc, int64_t cStride);
// The same product in float32 through oneDNN's matmul primitive (cached per
// shape); host::gemm takes it where it beats oneDNN's sgemm (see there).
bool dnnlMatmulF32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// ---- int8 convolution (qlinear_conv)
//
// y = saturate(round((conv(x - x_zp, w) + b[m]) * scale[m]) + y_zp) in u8 or
// s8, with x u8 [N, C, img..] (plain), w s8 [M, C/G, k..] whose zero point is
// already subtracted, b int32 [M] (or none) and scale per output channel
// (one value: all), accumulated in int32 by oneDNN's int8 kernels and scaled
// and rounded (half to even) in float32. Built once per node: the weights
// are reordered into the object, the scales baked into the primitive.
struct DnnlQConv;
// xNhwc / yNhwc: that tensor is stored channels-last ([N, H, W, C] in
// memory; 2-D only), oneDNN's int8 layout, which then needs no reorder.
// Null when oneDNN declines the problem (then nothing was built).
// rawSums: y is int32, the sums conv(x - x_zp, w) + b[m] as they are (no
// scale, no rounding, no zero point; scales and ySigned are not used).
// xZeroFixed: every run's x zero point is 0 (a constant of the model, as
// after a ReLU), so the primitive is made without oneDNN's zero-point
// compensation, which costs its kernels time.
std::shared_ptr<DnnlQConv> dnnlQConvPrepare(const ConvDims& cd, int nd, const int8_t* w, const int32_t* bias,
                                            const std::vector<float>& scales, bool ySigned, bool xNhwc = false,
                                            bool yNhwc = false, bool rawSums = false, bool xZeroFixed = false);
void dnnlQConvRun(const DnnlQConv& q, const uint8_t* x, int32_t xZeroPoint, void* y, int32_t yZeroPoint);
// An int8 matmul through oneDNN: y [rows, N] (int32) = (a - a_zp) . w with a
// u8 [rows, K] and w s8 [K, N] (zero point already subtracted), reordered
// into the object once. Null when oneDNN declines. Exact under the same
// condition as the convolution (dnnlInt8Exact).
struct DnnlQMatMul;
// accumulate: y += the product (y's values are read), else y = it.
std::shared_ptr<DnnlQMatMul> dnnlQMatMulPrepare(int64_t rows, int64_t K, int64_t N, const int8_t* w,
                                                bool accumulate = false);
void dnnlQMatMulRun(const DnnlQMatMul& q, const uint8_t* a, int32_t aZeroPoint, int32_t* y);

// Whether oneDNN's int8 convolution sums u8 x s8 products exactly on this
// CPU for weights of magnitude up to wMaxAbs: always with VNNI (vpdpbusd
// adds in int32); without it, pairs of products are first summed in
// saturating int16 (vpmaddubsw), which is exact while 2 * 255 * wMaxAbs <=
// 32767, i.e. weights in [-64, 64] (onnxruntime's reduce_range).
bool dnnlInt8Exact(int wMaxAbs);
// Whether oneDNN uses VNNI instructions on this CPU.
bool dnnlHasVnni();

// Full-range int8 weights made exact on a CPU without VNNI. oneDNN's int8
// kernels there multiply 4 consecutive reduction entries (input channels of
// a convolution, k of a matmul) by one u8 x 4 bytes and add the products in
// pairs (2j, 2j + 1) in saturating int16 (vpmaddubsw) before int32: exact
// while |w[2j]| + |w[2j + 1]| <= 128 (255 * 128 < 2^15). Weights viewed as
// [outer, L, inner] with the pairs along L: every pair over that bound is
// clamped into [-64, 64] in `main` (which then sums exactly), and what was
// taken off is listed in `rest`, sparse (on real models about 0.1% of the
// weights), to be added to the int32 sums separately.
struct Int8PairSplit {
  struct Entry {
    int64_t outer, l, inner;
    int32_t w;
  };
  std::vector<int8_t> main;  // the weights, clamped where needed
  std::vector<Entry> rest;   // grouped by outer, in increasing order
  bool tooMany = false;      // the rest passed maxRest: main and rest are incomplete
};
// w holds outer * L * inner values in [-128, 127]. Stops early (tooMany)
// once the rest has more than maxRest entries.
Int8PairSplit int8PairSplit(const int32_t* w, int64_t outer, int64_t L, int64_t inner, size_t maxRest);

// ---- element-wise

// y[i] = gelu(x[i]) over n contiguous float32s (y == x allowed) through
// oneDNN's eltwise kernels: erf form (tanhForm false) or tanh form. Within
// 2.1 eps |x| of the exact GELU on [-8, 8] (vecmath.h's bound for gelu is
// 4 ULP plus 4 eps |x|), and 3.7x faster than SLEEF's erf (BERT-base:
// 393,216 elements, 1.47 -> 0.40 ms on one core). False, nothing written,
// when oneDNN is off or declines.
bool dnnlGelu(bool tanhForm, const float* x, float* y, int64_t n);

// dx[i] = dy[i] * gelu'(x[i]) over n contiguous float32s, the gradient of
// dnnlGelu through oneDNN's eltwise backward kernels (dx may alias dy).
// False, nothing written, when oneDNN is off or has only its reference
// kernel.
bool dnnlGeluGrad(bool tanhForm, const float* dy, const float* x, float* dx, int64_t n);

// y = softmax (or log-softmax) of x [outer, n, inner] along its middle axis,
// float32, through oneDNN's softmax kernels (y == x allowed). The caller
// checks x for NaN first (oneDNN's max does not propagate it). False,
// nothing written, when oneDNN is off or has only its reference kernel for
// the shape.
bool dnnlSoftmax(bool logOut, const float* x, float* y, int64_t outer, int64_t n, int64_t inner);

// Whether callers should take the oneDNN path: on unless the environment
// has ONYX_DNNL=0 (for A/B timings); tests switch it with setDnnlEnabled.
bool dnnlEnabled();
void setDnnlEnabled(bool on);

// How src and dst are laid out for the primitive: Blocked lets oneDNN choose
// (reorders in and out of the plain tensors), Plain keeps them NC(D)(H)W;
// weights are always oneDNN's choice. Auto picks per problem (see the .cpp).
enum class DnnlLayout : uint8_t { Auto, Plain, Blocked };
void setDnnlLayout(DnnlLayout l);  // for A/B timings and tests

// Calls that oneDNN ran (not declined) since the process started (for
// tests: a fast path that silently falls back is not one).
uint64_t dnnlConvRuns();
// How many NCHW <-> NHWC copies (and, on AVX2, NCHW <-> nChw8c copies with a
// padded last block) of a convolution's image or output ran through the
// library's own transpose instead of oneDNN's reorder (tests).
uint64_t dnnlChannelsTransposes();

}  // namespace host
}  // namespace onyx
