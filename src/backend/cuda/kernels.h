// The CUDA plugin's GPU kernels as plain functions: element moving,
// conversion and GEMM (which plugin.cpp offers to libonyx through
// core/device_backend.h), and the device code of the kernels the plugin
// registers onto registry ops (ops_<family>.cpp). Like device.h this header
// has no CUDA types, so g++ compiles its callers. Work is queued on the
// device's stream (device.h) and these functions return before it is done;
// pointers are device pointers on gpu<dev>.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/backend/cpu/update_rule.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/tensor.h>
#include <onyx/core/types.h>

namespace onyx {
namespace cuda {

// dst = src, `bytes` bytes on one device.
void copyBytes(size_t dev, void* dst, const void* src, size_t bytes);
// All-zero bytes (0, 0.0 and false in every type).
void fillZero(size_t dev, void* p, size_t bytes);
// dst[sum_k i_k * ds_k] = src[sum_k i_k * ss_k] for every index i of `dims`
// (strides in elements, possibly negative; elements of `esize` bytes), as
// the CPU's strided copy (host::StridedPlan).
void copyStrided(size_t dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims,
                 int rank, size_t esize);
// Gather of rows: for r < outer * m, dst row r = src row o * n + i with
// o = r / m and i = idx[r % m] (negative: counting from n); rows of
// rowElems elements of `esize` bytes. idx (int32 or int64, idxType) is on
// the device and already checked to lie in [-n, n).
void gatherRows(size_t dev, void* dst, const void* src, const void* idx, Type idxType, int64_t outer, int64_t m,
                int64_t n, int64_t rowElems, size_t esize);
// y[r] = the position along the middle dim of the largest (max) or
// smallest element of line r of x [outer, n, inner] (r < outer * inner),
// NaN above every number, ties to the first or (last) the last, as the
// CPU's argmax/argmin.
void argExtreme(size_t dev, Type t, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool max,
                bool last);
// scatter_add of rows: y [outer, n, inner] = 0, then y[o, idx[j], :] +=
// u[o, j, :] for j < m in ascending j (the CPU's order of additions: the
// same bits). The m indices (type it, on the device, in [-n, n)) are sorted
// with their positions on the device (a stable radix sort), and each run of
// equal targets is summed by one thread per element. Returns false, having
// written nothing, when an index is out of range. `scratch` holds
// scatterAddScratch(m) bytes of device memory. accumulate: onto y as it is
// instead of zeros (a scatter_add's later pairs).
size_t scatterAddScratch(int64_t m);
bool scatterAdd(size_t dev, Type t, const void* u, void* y, Type it, const void* idx, int64_t outer, int64_t n,
                int64_t m, int64_t inner, void* scratch, bool accumulate = false);
// pad by index maps: y element (i_0 .. i_r-1) of shape `out` is x at
// (maps_0[i_0] .. ) for x of shape `in`, or `value` (converted to t as the
// CPU's castFromDouble) where any map is -1; maps holds the r maps one
// after the other (out.dims()[k] entries each, int64, on the device).
void padMapped(size_t dev, Type t, const void* x, void* y, const Shape& out, const Shape& in, const int64_t* maps,
               double value);
// The integer product of matmul_integer and matmul_integer_to_float:
// sum_k (a[r, k] - az) (b[k, n] - bz[n]) over a [rows, K] and b [K, N],
// 8-bit (signed as aSigned / bSigned), the zero points one element of
// their tensor's type (bz: bzCount, 1 or N; null: 0). Into y32 (int32), or,
// with yf, float32 sum * (aScale[0] * bScale[n]) + bias[n] (bScale:
// bScaleCount values, 1 or N; bias may be null). Device pointers.
struct IntMatMul {
  const void* a = nullptr;
  bool aSigned = false;
  const void* az = nullptr;
  const void* b = nullptr;
  bool bSigned = false;
  const void* bz = nullptr;
  int64_t bzCount = 1;
  int64_t rows = 0, K = 0, N = 0;
  int32_t* y32 = nullptr;
  float* yf = nullptr;
  const float* aScale = nullptr;
  const float* bScale = nullptr;
  int64_t bScaleCount = 1;
  const float* bias = nullptr;
};
void matmulInteger(size_t dev, const IntMatMul& m);

// The training batch norm of ops/norm.cpp on x [N, C, inner] (float32 or
// float64, type t): one block per channel sums in double for the [2, C]
// results (batch_moments: mean, population variance; batch_norm_grad_sums:
// sum dy, sum dy (x - mean)); batch_normalize and batch_moments_grad are one
// thread per element.
struct BatchNormDims {
  int64_t N, C, inner;
};
void batchMoments(size_t dev, Type t, const void* x, void* m, BatchNormDims d);
void batchNormGradSums(size_t dev, Type t, const void* dy, const void* x, const void* mean, void* s, BatchNormDims d);
void batchNormalize(size_t dev, Type t, const void* x, const void* mean, const void* var, const void* scale,
                    const void* bias, const void* eps, void* y, BatchNormDims d);
void batchMomentsGrad(size_t dev, Type t, const void* x, const void* m, const void* dm, void* dx, BatchNormDims d);
// y = x with the elements of its [n, m] matrices outside the kept triangle
// zeroed: kept where j - i >= k (upper) or j - i <= k; `count` elements of
// `esize` bytes.
void trilu(size_t dev, const void* x, void* y, int64_t count, int64_t n, int64_t m, int64_t k, bool upper,
           size_t esize);
// out = in broadcast to out's shape (numpy rules) and converted to out's
// element type as the CPU's cast converts (integer targets saturate and
// take NaN to 0; bool is v != 0). Both on the same GPU.
void assign(TensorBase& out, const TensorBase& in);

// Row-major C = alpha * op(A) . op(B) + beta * C of element type t, as
// host::gemm (src/backend/cpu/gemm.h): float32 and float64 through cuBLAS
// in their own precision, float16 and bfloat16 through cuBLAS with float32
// accumulation, integer types with a kernel that accumulates in 64 bits.
// When beta is 0, C is not read.
void gemm(size_t dev, Type t, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha,
          const void* A, int64_t lda, const void* B, int64_t ldb, double beta, void* C, int64_t ldc);
// `batch` GEMMs of one size, matrix i at A + aOffsets[i] (elements) and so
// on, as host::gemmBatched; offsets are host arrays. Evenly spaced offsets
// (a broadcast operand: spacing 0) make one strided-batched cuBLAS call.
void gemmBatched(size_t dev, Type t, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                 double alpha, const void* A, int64_t lda, const int64_t* aOffsets, const void* B, int64_t ldb,
                 const int64_t* bOffsets, double beta, void* C, int64_t ldc, const int64_t* cOffsets);

// Convolution as windows and GEMMs (the CPU's algorithm, ops/convolution.cpp), of
// element type t: im2col writes col[(c * K + tap) * P + p] = x[c, window p
// shifted by tap] (0 in the padding) for C channels; col2im writes x[c, i] =
// the sum of the col entries whose window covers i (it overwrites x, where
// the CPU's accumulates); addChannelBias adds b[m] to y[n, m, :] for N
// samples of M channels of P elements.
void im2col(size_t dev, Type t, const void* x, int64_t C, const host::ConvGeom& g, void* col);
// Whether convolutions go through cuDNN: the plugin was built with it
// (cudnn.cu, else no_cudnn.cpp) and ONYX_CUDNN=0 is not set.
bool cudnnAvailable();
// y [N, M, pos] = conv(x [N, C, img], w [M, C / G, k]) with G groups through
// cuDNN (no bias), when cuDNN takes the case (float types, the same pad at
// both ends of each axis); returns false, having done nothing, otherwise.
// The algorithm is chosen once per shape and cached (cudnn.cu); workspace(n)
// returns n bytes of device memory (the graph's workspace).
bool cudnnConvForward(size_t dev, Type t, const void* x, const void* w, void* y, int64_t N, int64_t C, int64_t M,
                      int64_t G, const host::ConvGeom& g, const std::function<void*(size_t)>& workspace);
// The same convolution's backward passes (deterministic algorithms only):
// dx [N, C, img] from dy [N, M, pos] and w (conv_transpose's forward), and
// dw [M, C / G, k] summed over the samples (conv_grad_weight).
bool cudnnConvBackwardData(size_t dev, Type t, const void* w, const void* dy, void* dx, int64_t N, int64_t C,
                           int64_t M, int64_t G, const host::ConvGeom& g,
                           const std::function<void*(size_t)>& workspace);
bool cudnnConvBackwardFilter(size_t dev, Type t, const void* x, const void* dy, void* dw, int64_t N, int64_t C,
                             int64_t M, int64_t G, const host::ConvGeom& g,
                             const std::function<void*(size_t)>& workspace);
void col2im(size_t dev, Type t, const void* col, int64_t C, const host::ConvGeom& g, void* x);
void addChannelBias(size_t dev, Type t, void* y, const void* b, int64_t N, int64_t M, int64_t P);
// Pooling through cuDNN where it takes the case (float types, no dilation,
// the same pad at both ends, cuDNN's output size): y = the window max (NaN
// propagating, as the CPU's) or mean (counting pads or not). Returns false,
// having done nothing, otherwise.
enum class PoolMode { max, averageIncludePad, averageExcludePad };
bool cudnnPool(size_t dev, Type t, const void* x, void* y, int64_t planes, const host::ConvGeom& g, PoolMode mode);
// Pooling over `planes` = N * C planes, a thread per output (as the CPU's
// kernels in ops/pooling.cpp): maxPool writes the max of each window (y, may
// be null) and/or the flat index of its first maximum (ind, int64, may be
// null; storageOrder 1 numbers the plane column-major), NaN counting as the
// largest; avgPool the window mean, over the taps inside the image or, with
// includePad, inside image and pads; avgPoolGrad its adjoint (dx gathers
// dy / count from the windows that cover it).
void maxPool(size_t dev, Type t, const void* x, void* y, int64_t* ind, int64_t planes, const host::ConvGeom& g,
             int storageOrder);
void avgPool(size_t dev, Type t, const void* x, void* y, int64_t planes, const host::ConvGeom& g, bool includePad);
void avgPoolGrad(size_t dev, Type t, const void* dy, void* dx, int64_t planes, const host::ConvGeom& g,
                 bool includePad);
// max_pool's gradient: dx (shaped like x) gathers the dy of each window
// whose first maximum it is.
void maxPoolGrad(size_t dev, Type t, const void* dy, const void* x, void* dx, int64_t planes,
                 const host::ConvGeom& g);

// y = softmax(x) (or log-softmax) along `axis` (normalised), as the CPU's
// kernel (ops/nn.cpp) computes it: the max subtracted, the sum in double.
void softmax(const TensorBase& x, TensorBase& y, int axis, bool logOut);
// dx = y * (dy - sum(dy * y)) along `axis` (normalised): softmax's gradient,
// a thread per line, the sum in double.
void softmaxGrad(const TensorBase& dy, const TensorBase& y, TensorBase& dx, int axis);
// y[k] = -log_softmax(logits)[labels[k]] along `axis` (normalised), in
// double as the CPU's kernel; labels (int32 or int64, on the device) are
// already checked to lie in [0, classes).
void crossEntropy(const TensorBase& logits, const TensorBase& labels, TensorBase& y, int axis);
// y = (x - mean) / sqrt(var + eps) * gamma + beta over x's dims from `axis`
// (normalised) on, statistics in double; gamma and beta broadcast to those
// dims.
void layerNorm(const TensorBase& x, const TensorBase& gamma, const TensorBase& beta, TensorBase& y, int axis,
               double eps);
// layer_norm's gradients (ops/nn.cpp's layer_norm_grad and
// layer_norm_param_grad): dx given dy, x, gamma; and out [2, N] = the sums
// over the rows of dy * xhat and of dy, with `stats` device scratch of 2 *
// rows doubles (each row's mean and 1/sqrt(var + eps)).
void layerNormGrad(const TensorBase& dy, const TensorBase& x, const TensorBase& gamma, TensorBase& dx, int axis,
                   double eps);
void layerNormParamGrad(const TensorBase& dy, const TensorBase& x, TensorBase& out, int axis, double eps,
                        double* stats);

// Lines of x [outer, n, inner] (a line: fixed outer and inner index), a
// thread per line scanned in order as the CPU's kernels do:
// cumulate: y = the running sum (product) along each line in host::AccOf<T>
// (exclusive: of the elements before; reverse: from the end);
// cumprodGrad: dx of sum(cumprod(x) * dy), with z (float64, outer * n *
// inner elements, device scratch) for the suffix sums;
// hardmax: y = 1 at the first maximum of each line, 0 elsewhere.
void cumulate(size_t dev, Type t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse, bool product);
void cumprodGrad(size_t dev, Type t, const void* x, const void* dy, void* dx, double* z, int64_t outer, int64_t n,
                 int64_t inner, bool exclusive, bool reverse);
void hardmax(size_t dev, Type t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner);
// y [outer, k, inner] = the positions along the middle dim of the k largest
// (or smallest) elements of each line of x [outer, n, inner], best first,
// ties in index order, NaN above every number: the CPU's topk_indices.
void topkIndices(size_t dev, Type t, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, int64_t k,
                 bool largest);
// Row t of dst (rowElems elements of `esize` bytes) = the row at element
// offset offs[t] of src, for t < rows (offs int64 on the device: gather_nd,
// and gather_elements with rows of one element).
void gatherAt(size_t dev, void* dst, const void* src, const int64_t* offs, int64_t rows, int64_t rowElems,
              size_t esize);
// Scatter into y of element type t: for each of `targets` distinct row
// offsets targets[q] (rows of s elements), the update rows srcs[starts[q] ..
// starts[q + 1]) of u (ascending, the CPU's order) are combined into it:
// red 0 replaces (the last one wins), else host::combine (combine.h) after
// each of which the value is stored in t, as the CPU's kernels do. All
// arrays int64 on the device.
void scatterAt(size_t dev, Type t, void* y, const void* u, const int64_t* targets, const int64_t* starts,
               const int64_t* srcs, int64_t count, int64_t s, int red);

// Resize (ops/resize.cpp) on double buffers, one axis per call, from the
// host's taps (all arrays on the device): resizeAxis writes dst [outer, out,
// inner] = sum over k of w[j*n+k] * src[outer, idx[j*n+k], inner] (zero
// weights skipped), or ev where extrap[j] (0 everywhere when in is 0);
// resizeAxisAdjoint writes dst [outer, in, inner] element p = the sum of
// w[jk] * src[outer, jk / n, inner] over the jk listed in lists[starts[p] ..
// starts[p + 1]), ascending. toDouble / fromDouble convert count elements
// (integers from double round to nearest even and saturate).
void resizeAxis(size_t dev, const double* src, double* dst, int64_t outer, int64_t in, int64_t out, int64_t inner,
                const int64_t* idx, const double* w, const uint8_t* extrap, int64_t n, double ev);
void resizeAxisAdjoint(size_t dev, const double* src, double* dst, int64_t outer, int64_t in, int64_t out,
                       int64_t inner, const double* w, const int64_t* starts, const int64_t* lists, int64_t n);
void toDouble(size_t dev, Type t, const void* src, double* dst, int64_t count);
void fromDouble(size_t dev, Type t, const double* src, void* dst, int64_t count);

// One optimizer step of a param of n elements of float type t on gpu<dev>:
// updateElement(r, i, ...) for every i (backend/cpu/update_rule.h); master,
// s0, s1 are float32 device arrays or null.
void optimizerStep(size_t dev, Type t, const UpdateRule& r, void* w, const void* g, float* master, float* s0,
                   float* s1, int64_t n);
// The sum of the squares of the elements of every part (n elements of float
// type t at p, on gpu<dev>), in double: block partial sums of all parts read
// back in one copy and added on the host in a fixed order (the same bits
// every run). Waits for the result.
using Squares = DeviceBackend::Squares;
double sumSquares(size_t dev, const std::vector<Squares>& parts);

}  // namespace cuda
}  // namespace onyx
