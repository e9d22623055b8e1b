// Convolution: conv, conv_transpose and conv_grad_weight (float32 through
// oneDNN, backend/cpu/dnnl_conv.h; the portable im2col + GEMM and GEMM +
// col2im kernels for the other types and what oneDNN does not take), and
// the ONNX imports of Conv and ConvTranspose (those of ConvInteger and the
// composites are in converters/).
//
// Kernels see every input as having 3 spatial dims (backend/cpu/conv_geom.h):
// the real 1 to 3 dims are the last ones, the missing leading ones have size
// 1 (kernel 1, stride 1, no padding), so one loop nest serves 1-D, 2-D and 3-D.
#include <onyx/ops/convolution.h>

#include <onyx/core/checked.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/winograd.h>
#include <onyx/backend/cpu/gemm.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/slicing.h>
#include <onyx/ops/window_helpers.h>

namespace onyx {

using ops::AttrList;
using ops::addList;
using ops::checkedSpatial;
using ops::checkedSpatialRank;
using ops::emitVia;
using ops::listOr;
using ops::pick;
using ops::requireNumeric;
using ops::spatialOf;
using host::spatialDims;
using host::windowCount;

host::ConvDims ops::convDims(const Shape& x, const Shape& pos, const std::vector<int64_t>& kernel, const Attrs& a) {
  return host::convDims(x, pos, kernel, spatialOf(a, x.rank() - 2), a.i("group"));
}

// A transposed convolution is a convolution seen from its output: y is the
// image the windows write into and x holds the positions, so its input
// channels are the ConvDims' M and its output channels C.
host::ConvDims ops::transposedDims(const KernelCtx& c) {
  return convDims(c.out.shape(), c.in[0]->shape(), spatialDims(c.in[1]->shape()), c.attrs);
}

Shape ops::inferConvWindow(InferCtx& c, const Shape& xs, const Shape& ws) {
  int nd = checkedSpatialRank(c, xs, "x");
  c.check(ws.rank() == xs.rank(), "W of shape ", ws, " must have x's rank ", xs.rank(), " ([M, C/group, k..])");
  const int64_t G = c.attrs.i("group");
  c.check(G >= 1, "group must be >= 1, got ", G);
  const int64_t C = xs[1], M = ws[0];
  c.check(M % G == 0, "output channels ", M, " (W's dim 0) are not divisible by group ", G);
  c.check(C == ws[1] * G, "x has ", C, " channels but W of shape ", ws, " with group ", G, " expects ", ws[1] * G);
  host::Spatial sp = checkedSpatial(c, nd, false);
  Shape::Dims out{xs[0], M};
  for(int i = 0; i < nd; ++i) {
    size_t u = size_t(i);
    int64_t o = windowCount(xs[2 + i], ws[2 + i], sp.strides[u], sp.dilations[u], sp.pads[u],
                            sp.pads[u + size_t(nd)], false);
    c.check(o >= 0, "kernel ", ws[2 + i], " (dilation ", sp.dilations[u], ") is larger than spatial dim ", i,
            " of x (", xs[2 + i], ") plus padding");
    out.push_back(o);
  }
  return Shape(out);
}

OnnxAttrs ops::convOnnxAttrs(OnnxExportCtx& c, const Shape& xs, const Shape& ws) {
  const Attrs a = c.attrs();
  host::Spatial sp = spatialOf(a, xs.rank() - 2);
  OnnxAttrs at;
  at.emplace_back("kernel_shape", attr(spatialDims(ws)));
  addList(at, "strides", sp.strides, 1);
  addList(at, "dilations", sp.dilations, 1);
  if(a.i("group") != 1) at.emplace_back("group", a["group"]);
  bool negative = std::any_of(sp.pads.begin(), sp.pads.end(), [](int64_t p) { return p < 0; });
  c.check(!negative, "negative pads ", attrToString(a.ints("pads")), " (cropping) have no ONNX form in ",
          c.node().op()->name);
  addList(at, "pads", sp.pads, 0);
  return at;
}

namespace {

using Geom = host::ConvGeom;
using host::ConvDims;
using ops::convDims;
using ops::transposedDims;

// col[(c * K + kk) * P + p] = x[c, position p shifted by tap kk] (0 outside):
// im2colSamples (below) of one sample.
template <class T>
void im2colSamples(const T* x, int64_t nb, int64_t C, const Geom& g, T* col);
template <class T>
void im2col(const T* x, int64_t C, const Geom& g, T* col) {
  im2colSamples(x, 1, C, g, col);
}

// The adjoint of im2col: x[c, tap position] += col[...] (x is not cleared).
template <class T>
void col2im(const T* col, int64_t C, const Geom& g, T* x) {
  const int64_t P = g.posSize, K = g.kSize;
  for(int64_t c = 0; c < C; ++c) {
    T* xc = x + c * g.imgSize;
    for(int64_t k0 = 0; k0 < g.k[0]; ++k0)
      for(int64_t k1 = 0; k1 < g.k[1]; ++k1)
        for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const T* row = col + (c * K + (k0 * g.k[1] + k1) * g.k[2] + k2) * P;
          for(int64_t o0 = 0; o0 < g.pos[0]; ++o0) {
            const int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
            if(i0 < 0 || i0 >= g.img[0]) continue;
            for(int64_t o1 = 0; o1 < g.pos[1]; ++o1) {
              const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
              if(i1 < 0 || i1 >= g.img[1]) continue;
              const T* r = row + (o0 * g.pos[1] + o1) * g.pos[2];
              T* xr = xc + (i0 * g.img[1] + i1) * g.img[2];
              int64_t i2 = k2 * g.d[2] - g.pb[2];
              for(int64_t o2 = 0; o2 < g.pos[2]; ++o2, i2 += g.s[2])
                if(i2 >= 0 && i2 < g.img[2]) host::store(xr, i2, host::load(xr, i2) + host::load(r, o2));
            }
          }
        }
  }
}

// Below this many multiply-adds per sample, samples run in parallel (each
// GEMM then runs on one thread inside OpenBLAS).
constexpr int64_t kSampleParallelWork = 65536 * 4;

// Runs body(n, scratch) for every sample, in parallel when samples are small.
template <class T, class F>
void forSamples(int64_t N, int64_t workPerSample, size_t scratchSize, F&& body) {
  if(N > 1 && workPerSample < kSampleParallelWork) {
    host::parallelFor(N, N * workPerSample, [&](int64_t b, int64_t e) {
      std::vector<T> scratch(scratchSize);
      for(int64_t n = b; n < e; ++n) body(n, scratch.data());
    });
  } else {
    std::vector<T> scratch(scratchSize);
    for(int64_t n = 0; n < N; ++n) body(n, scratch.data());
  }
}

template <class T>
void addBias(T* y, const TensorBase* b, int64_t n, int64_t M, int64_t P) {
  if(!b) return;
  const T* bp = b->data<T>();
  for(int64_t m = 0; m < M; ++m) {
    T* row = y + (n * M + m) * P;
    auto bv = host::load(bp, m);
    for(int64_t p = 0; p < P; ++p) host::store(row, p, host::load(row, p) + bv);
  }
}

template <class T>
void convKernel(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& wt = *c.in[1];
  const TensorBase* bt = c.in.size() > 2 ? c.in[2] : nullptr;
  const ConvDims cd = convDims(xt.shape(), c.out.shape(), spatialDims(wt.shape()), c.attrs);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.C, M = cd.M, G = cd.G, Cg = cd.Cg, Mg = cd.Mg, CK = cd.CK, P = cd.P;
  const bool direct = cd.direct;
  const T* x = xt.data<T>();
  const T* w = wt.data<T>();
  T* y = c.out.data<T>();
  forSamples<T>(N, G * Mg * CK * P, direct ? 0 : size_t(CK * P), [&](int64_t n, T* col) {
    for(int64_t grp = 0; grp < G; ++grp) {
      const T* src = x + (n * C + grp * Cg) * g.imgSize;
      if(!direct) im2col(src, Cg, g, col);
      host::gemm<T>(false, false, Mg, P, CK, 1.0, w + grp * Mg * CK, CK, direct ? src : col, P, 0.0,
                    y + (n * M + grp * Mg) * P, P);
    }
    addBias(y, bt, n, M, P);
  });
}

template <class T>
void convTransposeKernel(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& wt = *c.in[1];
  const TensorBase* bt = c.in.size() > 2 ? c.in[2] : nullptr;
  const ConvDims cd = transposedDims(c);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.M, G = cd.G, Cg = cd.Mg, Mg = cd.Cg, M = cd.C, MK = cd.CK, P = cd.P;
  const bool direct = cd.direct;
  const T* x = xt.data<T>();
  const T* w = wt.data<T>();
  T* y = c.out.data<T>();
  forSamples<T>(N, G * MK * Cg * P, direct ? 0 : size_t(MK * P), [&](int64_t n, T* col) {
    T* yn = y + n * M * g.imgSize;
    if(!direct) std::fill(yn, yn + M * g.imgSize, T());
    for(int64_t grp = 0; grp < G; ++grp) {
      const T* xg = x + (n * C + grp * Cg) * P;
      T* yg = yn + grp * Mg * g.imgSize;
      // col [Mg*K, P] = W_g^T x_g with W_g stored [Cg, Mg*K]
      host::gemm<T>(true, false, MK, P, Cg, 1.0, w + grp * Cg * MK, MK, xg, P, 0.0, direct ? yg : col, P);
      if(!direct) col2im(col, Mg, g, yg);
    }
    addBias(y, bt, n, M, g.imgSize);
  });
}

template <class T>
void convGradWeightKernel(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  const TensorBase& dyt = *c.in[1];
  const ConvDims cd = convDims(xt.shape(), dyt.shape(), spatialDims(c.out.shape()), c.attrs);
  const Geom& g = cd.g;
  const int64_t N = cd.N, C = cd.C, M = cd.M, G = cd.G, Cg = cd.Cg, Mg = cd.Mg, CK = cd.CK, P = cd.P;
  const bool direct = cd.direct;
  const T* x = xt.data<T>();
  const T* dy = dyt.data<T>();
  T* dw = c.out.data<T>();
  const int64_t wSize = c.out.size();
  std::fill(dw, dw + wSize, T());
  // Per block of samples: a partial sum, added to dW under a lock.
  auto block = [&](int64_t b, int64_t e) {
    std::vector<T> col(direct ? 0 : size_t(CK * P)), part(size_t(wSize), T{});
    for(int64_t n = b; n < e; ++n)
      for(int64_t grp = 0; grp < G; ++grp) {
        const T* src = x + (n * C + grp * Cg) * g.imgSize;
        if(!direct) im2col(src, Cg, g, col.data());
        // dW_g [Mg, CK] += dy_g [Mg, P] col^T
        host::gemm<T>(false, true, Mg, CK, P, 1.0, dy + (n * M + grp * Mg) * P, P, direct ? src : col.data(), P, 1.0,
                      part.data() + grp * Mg * CK, CK);
      }
#pragma omp critical(onyx_conv_grad_weight)
    for(int64_t i = 0; i < wSize; ++i) host::store(dw, i, host::load(dw, i) + host::load(part.data(), i));
  };
  const int64_t work = G * Mg * CK * P;
  if(N > 1 && work < kSampleParallelWork) host::parallelFor(N, N * work, block);
  else block(0, N);
}

// ------------------------------------------------- float32 through oneDNN

// Where a conv keeps W reordered to oneDNN's layout between runs: only when W
// is a constant (its value never changes while the node lives); params
// change every training step, so they are reordered on every run.
host::DnnlWeightSlot* weightSlot(KernelCtx& c) {
  Expr w = c.node.child(1);
  return w->kind() == NodeKind::Constant ? &c.node.kernelState() : nullptr;
}

const float* biasOf(const KernelCtx& c) { return c.in.size() > 2 ? c.in[2]->data<float>() : nullptr; }

int spatialRank(const TensorBase& t) { return t.shape().rank() - 2; }

// bfloat16 products are asked for and this CPU computes them (else the
// kernels compute float32, Winograd included, as the float32 graph does).
bool bf16Computes(const KernelCtx& c) { return c.bf16() && bf16Available(); }

bool convDnnl(KernelCtx& c) {
  const ConvDims cd = convDims(c.in[0]->shape(), c.out.shape(), spatialDims(c.in[1]->shape()), c.attrs);
  // 3x3 stride-1 (training's forward convolutions): Winograd, as fused_conv.
  if(!bf16Computes(c) && host::winogradFits(cd, spatialRank(c.out), {}, nullptr)) {
    host::winogradConvForward(cd, c.in[0]->data<float>(), c.in[1]->data<float>(), biasOf(c), c.out.data<float>(),
                              nullptr, weightSlot(c), {});
    return true;
  }
  return host::dnnlConvForward(cd, spatialRank(c.out), c.in[0]->data<float>(), c.in[1]->data<float>(), biasOf(c),
                               c.out.data<float>(), nullptr, weightSlot(c), {}, c.bf16());
}

// A 2-D transposed convolution whose windows do not overlap (kernel ==
// stride, no pads, dilation 1, one group: U-Net's 2x2 stride-2 upsampling)
// is one GEMM per image, tmp [M*kh*kw, H*W] = W^T x, and a scatter of tmp
// (plus the bias) into y. oneDNN 2.6's jit deconvolution ran these at a
// fifth of the GEMM's speed.
bool convTransposePatches(KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const Shape& ws = c.in[1]->shape();
  const Shape& ys = c.out.shape();
  if(xs.rank() != 4 || c.attrs.i("group") != 1) return false;
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], M = ws[1], kh = ws[2], kw = ws[3];
  // Absent strides are 1s: a model and its exported copy (which writes
  // them out) take the same path, so they compute the same bits.
  const IntList& st = c.attrs.ints("strides");
  const IntList& dl = c.attrs.ints("dilations");
  const IntList& pd = c.attrs.ints("pads");
  const int64_t sh = st.empty() ? 1 : st[0], sw = st.size() < 2 ? 1 : st[1];
  if(st.size() > 2 || sh != kh || sw != kw) return false;
  for(int64_t d : dl)
    if(d != 1) return false;
  for(int64_t p : pd)
    if(p != 0) return false;
  if(ys != Shape({N, M, H * kh, W * kw})) return false;  // output_padding
  const int64_t HW = H * W, rows = M * kh * kw;
  Tensor tmpT = c.scratch(Shape({rows, HW}), Type::float32);
  float* tmp = tmpT->data<float>();
  const float* wp = c.in[1]->data<float>();
  const float* bias = biasOf(c);
  for(int64_t n = 0; n < N; ++n) {
    host::gemm<float>(true, false, rows, HW, C, 1.0, wp, rows, c.in[0]->data<float>() + n * C * HW, HW, 0.0, tmp, HW);
    float* y = c.out.data<float>() + n * M * HW * kh * kw;
    host::parallelFor(M, rows * HW, [&](int64_t lo, int64_t hi) {
      for(int64_t m = lo; m < hi; ++m) {
        const float b = bias ? bias[m] : 0.f;
        // Output row i * kh + a interleaves the kw patch rows (m, a, 0..kw)
        // of input row i: written in order, each output line once.
        for(int64_t a = 0; a < kh; ++a) {
          const float* t = tmp + (m * kh + a) * kw * HW;
          for(int64_t i = 0; i < H; ++i) {
            float* yr = y + (m * H * kh + i * kh + a) * W * kw;
            if(kw == 2) {
              const float *t0 = t + i * W, *t1 = t + HW + i * W;
              for(int64_t j = 0; j < W; ++j) {
                yr[2 * j] = t0[j] + b;
                yr[2 * j + 1] = t1[j] + b;
              }
              continue;
            }
            for(int64_t j = 0; j < W; ++j)
              for(int64_t bb = 0; bb < kw; ++bb) yr[j * kw + bb] = t[bb * HW + i * W + j] + b;
          }
        }
      }
    });
  }
  return true;
}

// A 2-D transposed convolution of 3x3 taps at stride 1 (a 3x3 stride-1
// convolution's gradient by its input, in training) is the convolution by
// the flipped taps with pads 2 - p: Winograd where it fits.
bool convTransposeWinograd(KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const Shape& ws = c.in[1]->shape();
  if(xs.rank() != 4 || bf16Computes(c) || c.attrs.i("group") != 1 || ws[2] != 3 || ws[3] != 3) return false;
  const IntList& st = c.attrs.ints("strides");
  const IntList& dl = c.attrs.ints("dilations");
  const IntList& pd = c.attrs.ints("pads");
  for(int64_t v : st)
    if(v != 1) return false;
  for(int64_t v : dl)
    if(v != 1) return false;
  host::Spatial sp;
  sp.nd = 2;
  sp.strides = {1, 1};
  sp.dilations = {1, 1};
  sp.pads.assign(4, 2);
  for(size_t i = 0; i < pd.size() && i < 4; ++i) {
    if(pd[i] > 2) return false;
    sp.pads[i] = 2 - pd[i];
  }
  const Shape& ys = c.out.shape();
  // output_padding (or an output_shape past the windows) is not this form
  if(ys[2] != xs[2] + 2 - (pd.size() == 4 ? pd[0] + pd[2] : 0) ||
     ys[3] != xs[3] + 2 - (pd.size() == 4 ? pd[1] + pd[3] : 0))
    return false;
  const ConvDims cd = host::convDims(xs, ys, {3, 3}, sp, 1);
  if(!host::winogradFits(cd, 2, {}, nullptr)) return false;
  host::winogradConvForward(cd, c.in[0]->data<float>(), c.in[1]->data<float>(), biasOf(c), c.out.data<float>(),
                            nullptr, weightSlot(c), {}, /*transposedW=*/true);
  return true;
}

bool convTransposeDnnl(KernelCtx& c) {
  if(convTransposePatches(c)) return true;
  if(convTransposeWinograd(c)) return true;
  return host::dnnlConvTransposed(transposedDims(c), spatialRank(c.out), c.in[0]->data<float>(),
                                  c.in[1]->data<float>(), biasOf(c), c.out.data<float>(), nullptr, weightSlot(c),
                                  c.bf16());
}

// im2col of nb samples side by side: row (c, tap) of col holds, at columns
// [j * P, (j + 1) * P), sample j's image c shifted by the tap (0 outside);
// ld = nb * P. Rows in parallel; the innermost run of a stride-1 tap is a
// copy between two zero-filled edges.
template <class T>
void im2colSamples(const T* x, int64_t nb, int64_t C, const Geom& g, T* col) {
  const int64_t P = g.posSize, K = g.kSize, ld = nb * P, rows = C * K;
  host::parallelFor(rows, rows * ld, [&](int64_t lo, int64_t hi) {
    for(int64_t r = lo; r < hi; ++r) {
      const int64_t c = r / K, kk = r % K;
      const int64_t k2 = kk % g.k[2], k1 = (kk / g.k[2]) % g.k[1], k0 = kk / (g.k[2] * g.k[1]);
      // The run of o2 whose input column i2 = o2 * s + k2 * d - pb is inside.
      const int64_t off2 = k2 * g.d[2] - g.pb[2], s2 = g.s[2];
      int64_t lo2 = off2 >= 0 ? 0 : (-off2 + s2 - 1) / s2;
      int64_t hi2 = g.img[2] - off2 <= 0 ? 0 : (g.img[2] - off2 + s2 - 1) / s2;
      hi2 = std::min(hi2, g.pos[2]);
      lo2 = std::min(lo2, hi2);
      for(int64_t j = 0; j < nb; ++j) {
        const T* xc = x + (j * C + c) * g.imgSize;
        T* row = col + r * ld + j * P;
        for(int64_t o0 = 0; o0 < g.pos[0]; ++o0) {
          const int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
          for(int64_t o1 = 0; o1 < g.pos[1]; ++o1) {
            const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
            T* out = row + (o0 * g.pos[1] + o1) * g.pos[2];
            if(i0 < 0 || i0 >= g.img[0] || i1 < 0 || i1 >= g.img[1]) {
              std::fill(out, out + g.pos[2], T());
              continue;
            }
            // (indices into the input row only where they are inside it)
            const T* in = xc + (i0 * g.img[1] + i1) * g.img[2];
            std::fill(out, out + lo2, T());
            if(s2 == 1 && lo2 < hi2) std::copy(in + lo2 + off2, in + hi2 + off2, out + lo2);
            else
              for(int64_t o2 = lo2; o2 < hi2; ++o2) out[o2] = in[o2 * s2 + off2];
            std::fill(out + hi2, out + g.pos[2], T());
          }
        }
      }
    }
  });
}

// The weight gradient of a dense float32 convolution over small images as
// one GEMM per block of samples: dW [M, C * taps] (+)= dyT [M, nb * P]
// colT [nb * P, C * taps], dyT being the block's dy with its samples side
// by side and col the block's im2col (im2colSamples). oneDNN 2.6's AVX2
// backward-weights kernel is slowest where the images are smallest: in
// ResNet-18's training step (batch 32, 2 threads of a Zen 3 EPYC, the same
// run) its 512-channel 3x3 gradients at 7x7 took 65-77 ms each, this path
// 51-53 (about 140 GFLOP/s, the GEMM's own speed: all the block's
// positions are the product's depth, where oneDNN's gemm-based kernel has
// one GEMM per sample only P deep). At 14x14 the two were even, at 28x28
// and more oneDNN was ahead (im2col's copy grows with P), so only images
// of at most 64 positions take it; groups of 1, spatial kernels (a 1x1
// stride-1 gradient is one GEMM per sample in oneDNN's plain kernel).
// ONYX_CONV_GW_GEMM=0 turns it off.
std::atomic<uint64_t> gGradWeightGemmRuns{0};

bool convGradWeightGemm(KernelCtx& c, const ConvDims& cd) {
  static const bool enabled = [] {
    const char* v = std::getenv("ONYX_CONV_GW_GEMM");
    return !(v && std::string(v) == "0");
  }();
  // bfloat16 where the CPU has it is oneDNN's; where it does not, float32 runs here as without it.
  if(!enabled || (c.bf16() && host::dnnlHasBf16()) || cd.G != 1 || cd.direct || cd.P > 64) return false;
  const int64_t N = cd.N, M = cd.M, C = cd.C, CK = cd.CK, P = cd.P;
  // Samples per block: a product about 2048 deep, col at most 32 MiB.
  int64_t nb = std::max<int64_t>(1, std::min<int64_t>(N, (2048 + P - 1) / P));
  while(nb > 1 && CK * nb * P * int64_t(sizeof(float)) > (int64_t(32) << 20)) --nb;
  if(nb * P < 512) return false;
  const int64_t ld = nb * P;
  Tensor colT = c.scratch(Shape({CK, ld}), Type::float32);
  Tensor dyT = c.scratch(Shape({M, ld}), Type::float32);
  float* col = colT->data<float>();
  float* dyb = dyT->data<float>();
  const float* x = c.in[0]->data<float>();
  const float* dy = c.in[1]->data<float>();
  float* dw = c.out.data<float>();
  for(int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t b = std::min(nb, N - n0), k = b * P;
    im2colSamples(x + n0 * C * cd.g.imgSize, b, C, cd.g, col);  // rows of k = b * P
    host::parallelFor(M, M * k, [&](int64_t lo, int64_t hi) {
      for(int64_t m = lo; m < hi; ++m)
        for(int64_t j = 0; j < b; ++j)
          std::memcpy(dyb + m * k + j * P, dy + ((n0 + j) * M + m) * P, size_t(P) * sizeof(float));
    });
    host::gemm<float>(false, true, M, CK, k, 1.0, dyb, k, col, k, n0 == 0 ? 0.0 : 1.0, dw, CK);
  }
  gGradWeightGemmRuns.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The weight gradient of a dense float32 convolution as one GEMM per tap
// over a padded grid, without im2col. Along a dim of stride s, tap t reads
// x at o s + t d - pb = s (o + q_t) + ph_t (0 <= ph_t < s): phase image ph
// (x[s i + ph], i < L_ph) at o + q_t. A block of samples' x is laid out per
// phase [C, samples x grid], each phase image on a grid of R per dim at
// digit i + B (B = -min q: zeros before it, and after it), and dy [M,
// samples x grid] at digit o (zeros past its positions). A tap is then one
// offset (q_t + B per dim) into its phase's rows: dW[:, :, tap] += dy .
// xph[:, off_tap ..]^T sums every product of a dy position and the x the tap
// reaches, or a zero. R = B + max(L, pos + max q) keeps every digit inside
// its dim; at stride 1 R = img + pb is enough where
//   pos + (k - 1) dilation <= img + 2 pb,   pos <= img + pb
// (an index past the dim's end carries into the next grid row's begin pad).
// Where the grid is at most 30 % larger than the positions (ResNet's 3x3
// convolutions of images 14x14 and more, stride 1 or 2: 15 % at 14x14, 4 %
// at 56x56) this beats oneDNN 2.6's AVX2 backward-weights kernel (see
// convGradWeightGemm): ResNet-18's training step, batch 32, 2 threads of a
// Zen 3 EPYC, the same run: stride-1 56x56 and 28x28 gradients 83-107 ->
// 51-63 ms each, 14x14 74-77 -> 57-64. The rows of M are split over the
// threads (each row summed in one order, whatever the thread count). dy's
// zeros also meet x values, so an infinite or NaN x (0 * inf) would make
// taps NaN that it does not reach: such an x goes to oneDNN instead.
// ONYX_CONV_GW_GRID=0 turns this path off.
std::atomic<uint64_t> gGradWeightGridRuns{0};

bool convGradWeightGrid(KernelCtx& c, const ConvDims& cd) {
  static const bool enabled = [] {
    const char* v = std::getenv("ONYX_CONV_GW_GRID");
    return !(v && std::string(v) == "0");
  }();
  const Geom& g = cd.g;
  if(!enabled || (c.bf16() && host::dnnlHasBf16()) || cd.G != 1 || cd.direct || cd.M < 16 || cd.C < 16 ||
     g.kSize < 2)
    return false;
  // Per dim: the grid's size R, the phase images' begin pad B and longest
  // length L, and per tap along it its phase and grid offset.
  int64_t R[3], B[3], L[3], gsz = 1, phases = 1;
  std::vector<int64_t> tapPh[3], tapOff[3];
  for(int d = 0; d < 3; ++d) {
    const int64_t s = g.s[d];
    // (a stride past the kernel skips x: phases no tap reads, left to oneDNN;
    // this also bounds the phases by the taps)
    if(s > g.k[d]) return false;
    int64_t qmin = 0, qmax = 0;
    for(int64_t t = 0; t < g.k[d]; ++t) {
      const int64_t u = t * g.d[d] - g.pb[d];
      const int64_t q = u >= 0 ? u / s : -((-u + s - 1) / s);  // floor(u / s)
      tapPh[d].push_back(u - q * s);
      tapOff[d].push_back(q);
      qmin = t == 0 ? q : std::min(qmin, q);
      qmax = t == 0 ? q : std::max(qmax, q);
    }
    B[d] = std::max<int64_t>(0, -qmin);
    L[d] = (g.img[d] + s - 1) / s;
    const bool wraps = s == 1 && g.pos[d] <= g.img[d] + g.pb[d] &&
                       g.pos[d] + (g.k[d] - 1) * g.d[d] <= g.img[d] + 2 * g.pb[d];
    R[d] = wraps ? g.img[d] + g.pb[d] : B[d] + std::max(L[d], g.pos[d] + qmax);
    // R >= pos: a dim more than 30 % larger makes the grid so (checked per
    // dim, without products, before gsz: huge pads and dilations that cancel
    // in pos would overflow them)
    if(R[d] - g.pos[d] > g.pos[d] * 3 / 10) return false;
    for(int64_t& q : tapOff[d]) q += B[d];
    gsz *= R[d];
    phases *= s;
  }
  const int64_t N = cd.N, M = cd.M, C = cd.C, P = cd.P, taps = g.kSize;
  if(gsz * 10 > P * 13) return false;
  std::vector<int64_t> off(static_cast<size_t>(taps)), ph(static_cast<size_t>(taps));
  std::vector<char> used(static_cast<size_t>(phases), 0);
  int64_t tail = 0;  // zeros after the last grid (the largest offset)
  for(int64_t t = 0; t < taps; ++t) {
    const size_t t2 = size_t(t % g.k[2]), t1 = size_t((t / g.k[2]) % g.k[1]), t0 = size_t(t / (g.k[2] * g.k[1]));
    off[size_t(t)] = (tapOff[0][t0] * R[1] + tapOff[1][t1]) * R[2] + tapOff[2][t2];
    ph[size_t(t)] = (tapPh[0][t0] * g.s[1] + tapPh[1][t1]) * g.s[2] + tapPh[2][t2];
    used[size_t(ph[size_t(t)])] = 1;
    tail = std::max(tail, off[size_t(t)]);
  }
  // Samples per block: the block's x (all its phases) and dy about 4 MiB
  // together (the taps' GEMMs read them 'taps' times).
  const int64_t nb = std::min(N, std::max<int64_t>(1, (int64_t(1) << 20) / ((M + phases * C) * gsz)));
  const int64_t ldy = nb * gsz, ldx = ldy + tail, rows = R[0] * R[1];  // rows of R[2]
  Tensor xgT = c.scratch(Shape({phases, C, ldx}), Type::float32);
  Tensor dygT = c.scratch(Shape({M, ldy}), Type::float32);
  Tensor dwtT = c.scratch(Shape({taps, M, C}), Type::float32);
  float* xg = xgT->data<float>();
  float* dyg = dygT->data<float>();
  float* dwt = dwtT->data<float>();
  const float* x = c.in[0]->data<float>();
  const float* dy = c.in[1]->data<float>();
  const int threads = int(std::max<int64_t>(1, std::min<int64_t>(host::numThreads(), M / 8)));
  for(int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t b = std::min(nb, N - n0), k = b * gsz;
    std::atomic<bool> finite{true};
    // x's phase images on their grids: (phase, channel) rows in parallel.
    host::parallelFor(phases * C, phases * C * ldx, [&](int64_t lo, int64_t hi) {
      uint32_t bad = 0;
      for(int64_t pc = lo; pc < hi; ++pc) {
        const int64_t p = pc / C, ch = pc % C;
        if(!used[size_t(p)]) continue;
        const int64_t p2 = p % g.s[2], p1 = (p / g.s[2]) % g.s[1], p0 = p / (g.s[2] * g.s[1]);
        const int64_t len2 = (g.img[2] - p2 + g.s[2] - 1) / g.s[2];
        float* dst = xg + pc * ldx;
        for(int64_t j = 0; j < b; ++j) {
          const float* src = x + ((n0 + j) * C + ch) * g.imgSize;
          for(int64_t r = 0; r < rows; ++r) {
            // the x row of grid row r: i0 = s0 (r0 - B0) + p0, likewise i1
            const int64_t i0 = (r / R[1] - B[0]) * g.s[0] + p0, i1 = (r % R[1] - B[1]) * g.s[1] + p1;
            float* row = dst + j * gsz + r * R[2];
            if(r / R[1] < B[0] || r % R[1] < B[1] || i0 >= g.img[0] || i1 >= g.img[1]) {
              std::fill(row, row + R[2], 0.f);
              continue;
            }
            std::fill(row, row + B[2], 0.f);
            const float* in = src + (i0 * g.img[1] + i1) * g.img[2] + p2;
            float* out = row + B[2];
            const int64_t st = g.s[2];
            for(int64_t i = 0; i < len2; ++i) {  // (an exponent of all ones: infinite or NaN)
              uint32_t u;
              std::memcpy(&u, in + i * st, sizeof u);
              bad |= uint32_t((u & 0x7f800000u) == 0x7f800000u);
              out[i] = in[i * st];
            }
            std::fill(out + len2, row + R[2], 0.f);
          }
        }
        std::fill(dst + k, dst + k + tail, 0.f);
      }
      if(bad) finite.store(false, std::memory_order_relaxed);
    });
    if(!finite.load()) return false;
    host::parallelFor(M, M * ldy, [&](int64_t lo, int64_t hi) {
      for(int64_t m = lo; m < hi; ++m)
        for(int64_t j = 0; j < b; ++j) {
          const float* src = dy + ((n0 + j) * M + m) * P;
          for(int64_t r = 0; r < rows; ++r) {
            const int64_t o0 = r / R[1], o1 = r % R[1];
            float* row = dyg + m * ldy + j * gsz + r * R[2];
            if(o0 >= g.pos[0] || o1 >= g.pos[1]) {
              std::fill(row, row + R[2], 0.f);
              continue;
            }
            std::memcpy(row, src + (o0 * g.pos[1] + o1) * g.pos[2], size_t(g.pos[2]) * sizeof(float));
            std::fill(row + g.pos[2], row + R[2], 0.f);
          }
        }
    });
    // dWt[tap] [M, C] (+)= dy [M, k] xph[:, off ..]^T; each thread its rows of
    // M (a GEMM inside a parallel region runs on its calling thread).
    host::parallelFor(threads, int64_t(1) << 40, [&](int64_t lo, int64_t hi) {
      for(int64_t t = lo; t < hi; ++t) {
        const int64_t m0 = M * t / threads, m1 = M * (t + 1) / threads;
        for(int64_t tap = 0; tap < taps; ++tap)
          host::gemm<float>(false, true, m1 - m0, C, k, 1.0, dyg + m0 * ldy, ldy,
                            xg + ph[size_t(tap)] * C * ldx + off[size_t(tap)], ldx, n0 == 0 ? 0.0 : 1.0,
                            dwt + (tap * M + m0) * C, C);
      }
    });
  }
  float* dw = c.out.data<float>();  // [M, C, taps] from dWt [taps, M, C]
  host::parallelFor(M, M * C * taps, [&](int64_t lo, int64_t hi) {
    for(int64_t m = lo; m < hi; ++m)
      for(int64_t ch = 0; ch < C; ++ch)
        for(int64_t tap = 0; tap < taps; ++tap) dw[(m * C + ch) * taps + tap] = dwt[(tap * M + m) * C + ch];
  });
  gGradWeightGridRuns.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool convGradWeightDnnl(KernelCtx& c) {
  const ConvDims cd = convDims(c.in[0]->shape(), c.in[1]->shape(), spatialDims(c.out.shape()), c.attrs);
  if(convGradWeightGrid(c, cd) || convGradWeightGemm(c, cd)) return true;
  return host::dnnlConvGradWeight(cd, spatialRank(c.out), c.in[0]->data<float>(), c.in[1]->data<float>(),
                                  c.out.data<float>(), c.bf16());
}

// float32 goes to oneDNN where it takes the problem (and ONYX_DNNL is not
// 0); everything else, float64 included (the harness's gradient checks),
// runs the portable kernel template over the float and integer types.
#define ONYX_CONV_KERNEL(fn, fast)                                                                                 \
  [](KernelCtx& c) {                                                                                             \
    if(c.out.type() == Type::float32 && host::dnnlEnabled() && fast(c)) return;                                  \
    dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) { fn<typename decltype(tag)::type>(c); }); \
  }

// ------------------------------------------------------------ infer helpers

int64_t checkedGroup(InferCtx& c) {
  int64_t G = c.attrs.i("group");
  c.check(G >= 1, "group must be >= 1, got ", G);
  return G;
}

void checkBias(InferCtx& c, int64_t M) {
  if(c.n() > 2) c.check(c.shapeOf(2) == Shape({M}), "bias of shape ", c.shapeOf(2), " must be [", M, "] (one per output channel)");
}

// conv's shape and type from x, W and (hasBias) b, the first inputs.
void inferConv(InferCtx& c, bool hasBias) {
  requireNumeric(c);
  c.shape = ops::inferConvWindow(c, c.shapeOf(0), c.shapeOf(1));
  if(hasBias) checkBias(c, c.shapeOf(1)[0]);
}

AttrList convAttrs(const ConvOptions& o) {
  return {{"strides", attr(o.strides)}, {"dilations", attr(o.dilations)}, {"pads", attr(o.pads)},
          {"group", attr(o.group)}};
}

}  // namespace

uint64_t ops::convGradWeightGemmRuns() { return gGradWeightGemmRuns.load(std::memory_order_relaxed); }
uint64_t ops::convGradWeightGridRuns() { return gGradWeightGridRuns.load(std::memory_order_relaxed); }

// --------------------------------------------------------------------- conv

ONYX_OP(kConvGradWeight, "conv_grad_weight");
ONYX_OP(kConvTranspose, "conv_transpose");

namespace {

// conv(x, W) cut to `target` spatial dims when it comes out larger.
Expr convCut(Expr x, Expr W, const AttrList& attrs, const Shape& target) {
  static const OpDef& convOp = Registry::instance().get("conv");
  Expr y = x->graph()->make(convOp, {x, W}, attrs);
  std::vector<int64_t> starts, ends, axes;
  bool cut = false;
  for(int i = 2; i < y->shape().rank(); ++i) {
    ONYX_ASSERT(y->shape()[i] >= target[i], "conv gradient: ", y->shape(), " smaller than ", target);
    cut = cut || y->shape()[i] != target[i];
    starts.push_back(0);
    ends.push_back(target[i]);
    axes.push_back(i);
  }
  return cut ? slice(y, starts, ends, axes) : y;
}

// conv_transpose(dy, W) with the output padding that gives `target` spatial dims.
Expr convTransposeTo(Expr dy, Expr W, const Attrs& a, const Shape& target) {
  const int nd = target.rank() - 2;
  host::Spatial sp = spatialOf(a, nd);
  std::vector<int64_t> outPad;
  for(int i = 0; i < nd; ++i) {
    int64_t k = W->shape()[2 + i], s = sp.strides[size_t(i)], d = sp.dilations[size_t(i)];
    int64_t natural = s * (dy->shape()[2 + i] - 1) + (k - 1) * d + 1 - sp.pads[size_t(i)] - sp.pads[size_t(nd + i)];
    outPad.push_back(target[2 + i] - natural);
    ONYX_ASSERT(outPad.back() >= 0, "conv gradient: output padding ", outPad.back());
  }
  AttrList l = pick(a, {"strides", "dilations", "pads", "group"});
  l.emplace_back("output_padding", attr(outPad));
  return dy->graph()->make(kConvTranspose, {dy, W}, l);
}

Expr biasGrad(Expr dy) {
  std::vector<int> axes{0};
  for(int i = 2; i < dy->shape().rank(); ++i) axes.push_back(i);
  return sum(dy, axes, false);
}

// conv's gradients given the gradient dy of its output (x, W, b the first inputs).
void convBackward(GradCtx& g, Expr dy, bool hasBias) {
  Expr x = g.x(0), W = g.x(1);
  if(g.needs(0)) g.add(0, convTransposeTo(dy, W, g.attrs, x->shape()));
  if(g.needs(1)) {
    AttrList l = pick(g.attrs, {"strides", "dilations", "pads", "group"});
    l.emplace_back("kernel_shape", attr(spatialDims(W->shape())));
    g.add(1, g.graph.make(kConvGradWeight, {x, dy}, l));
  }
  if(hasBias && g.needs(2)) g.add(2, biasGrad(dy));
}

}  // namespace

// ONNX auto_pad / pads -> explicit pads for x's spatial dims.
std::vector<int64_t> importPads(OnnxImportCtx& c, const Shape& xs, const std::vector<int64_t>& kernel,
                                const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  const int nd = xs.rank() - 2;
  std::string autoPad = c.attrString("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attrInts("pads", {});
  if(autoPad == "NOTSET" || autoPad.empty()) {
    if(pads.empty()) pads.assign(size_t(2 * nd), 0);
    c.check(pads.size() == size_t(2 * nd), "pads must have ", 2 * nd, " entries, got ", pads.size());
    return pads;
  }
  pads.assign(size_t(2 * nd), 0);
  if(autoPad == "VALID") return pads;
  c.check(autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER", "unknown auto_pad '", autoPad, "'");
  for(int i = 0; i < nd; ++i) {
    size_t u = size_t(i);
    const char* what = "auto_pad SAME";
    int64_t in = xs[2 + i], s = strides[u];
    c.check(s >= 1, "strides must be >= 1, got ", s);
    int64_t eff = addChecked(mulChecked(subChecked(kernel[u], 1, what), dilations[u], what), 1, what);
    int64_t out = in / s + (in % s != 0);
    int64_t total = std::max<int64_t>(0, subChecked(addChecked(mulChecked(out - 1, s, what), eff, what), in, what));
    int64_t small = total / 2, big = total - small;
    pads[u] = autoPad == "SAME_UPPER" ? small : big;
    pads[u + size_t(nd)] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

std::vector<int64_t> importList(OnnxImportCtx& c, const char* name, int nd, int64_t def) {
  std::vector<int64_t> v = c.attrInts(name, {});
  if(v.empty()) v.assign(size_t(nd), def);
  c.check(v.size() == size_t(nd), name, " must have ", nd, " entries (one per spatial dim), got ", v.size());
  return v;
}

// Kernel shape from W, checked against the optional kernel_shape attribute.
std::vector<int64_t> importKernelFromW(OnnxImportCtx& c, Expr W) {
  std::vector<int64_t> k = spatialDims(W->shape());
  std::vector<int64_t> attrK = c.attrInts("kernel_shape", {});
  c.check(attrK.empty() || attrK == k, "kernel_shape ", attrToString(attr(attrK)), " does not match W of shape ",
          W->shape());
  return k;
}

ConvOptions importConvOptions(OnnxImportCtx& c, Expr x, Expr W) {
  int nd = x->shape().rank() - 2;
  ConvOptions o;
  c.check(W->shape().rank() == x->shape().rank(), "W of shape ", W->shape(), " must have x's rank ", x->shape().rank());
  std::vector<int64_t> k = importKernelFromW(c, W);
  o.strides = importList(c, "strides", nd, 1);
  o.dilations = importList(c, "dilations", nd, 1);
  o.group = c.attrInt("group", 1);
  o.pads = importPads(c, x->shape(), k, o.strides, o.dilations);
  return o;
}

Expr optionalInput(OnnxImportCtx& c, size_t i) {
  return (c.numInputs() > i && c.hasInput(i)) ? c.input(i) : Expr();
}

void checkSpatialInput(OnnxImportCtx& c, Expr x) {
  c.check(x->shape().rank() >= 3 && x->shape().rank() <= 5, "input of shape ", x->shape(),
          " is not [N, C, spatial..] with 1 to 3 spatial dims");
}

namespace {

// ------------------------------------------------------------- ONNX export

// Conv and ConvTranspose: float16/float/double (bfloat16 from opset 22).
// Integer convs (ConvInteger's import computes in int32) run in double and
// Cast back: exact while the sums stay below 2^53 in magnitude and fit the
// type (the integer kernel wraps on overflow, Cast saturates), which 8- and
// 16-bit operands always do for any practical kernel size; 64-bit integers
// have no exact form.
void exportConv(OnnxExportCtx& c, bool transpose) {
  const char* opType = transpose ? "ConvTranspose" : "Conv";
  const Attrs a = c.attrs();
  const Shape& xs = c.inputShape(0);
  const int nd = xs.rank() - 2;
  host::Spatial sp = spatialOf(a, nd);
  OnnxAttrs at;
  at.emplace_back("kernel_shape", attr(spatialDims(c.inputShape(1))));
  addList(at, "strides", sp.strides, 1);
  addList(at, "dilations", sp.dilations, 1);
  if(a.i("group") != 1) at.emplace_back("group", a["group"]);
  bool negative = std::any_of(sp.pads.begin(), sp.pads.end(), [](int64_t p) { return p < 0; });
  if(!transpose) {
    c.check(!negative, "negative pads ", attrToString(a.ints("pads")), " (cropping) have no ONNX form in Conv");
    addList(at, "pads", sp.pads, 0);
  } else {
    addList(at, "output_padding", listOr(a.ints("output_padding"), size_t(nd), 0), 0);
    if(!negative) {
      addList(at, "pads", sp.pads, 0);
    } else {
      // Negative pads (an output larger than the natural size) come from
      // output_shape, whose pads the importer generates as ONNX does: an odd
      // total puts the extra unit at the begin (NOTSET) or end (SAME_UPPER).
      bool notset = true, upper = true;
      for(int i = 0; i < nd; ++i) {
        int64_t pb = sp.pads[size_t(i)], pe = sp.pads[size_t(nd + i)], total = pb + pe;
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        notset = notset && pe == half;
        upper = upper && pb == half;
      }
      c.check(notset || upper, "negative pads ", attrToString(a.ints("pads")),
              " have no ONNX form in ConvTranspose (only those output_shape generates)");
      const Shape& ys = c.node().shape();
      if(!notset) at.emplace_back("auto_pad", std::string("SAME_UPPER"));
      at.emplace_back("output_shape", attr(std::vector<int64_t>(ys.dims().begin() + 2, ys.dims().end())));
    }
  }
  Type t = c.inputType(0), via = Type::undefined;
  if(t == Type::bfloat16)
    c.requireOpset(22, str(opType, " on bfloat16"));
  else if(!isFloat(t)) {
    c.check(isInt(t) && typeBits(t) <= 32, opType, " takes float types only, and ", t,
            " has no exact form through double");
    via = Type::float64;
  }
  emitVia(c, opType, c.inputs(), via, at);
}

}  // namespace

ONYX_OP(kConv, "conv")
    .doc("y[n, m, o..] = b[m] + sum_{c, k..} W[m, c, k..] * x[n, g*C/group + c, o*s + k*d - pad_begin] (NCHW, "
         "1 to 3 spatial dims, zero padding)")
    .inputs(2, 3)
    .attr("strides", IntList{})
    .attr("dilations", IntList{})
    .attr("pads", IntList{})
    .attr("group", int64_t(1))
    .infer([](InferCtx& c) { inferConv(c, c.n() > 2); })
    .cpu(ONYX_CONV_KERNEL(convKernel, convDnnl))
    // dx = conv_transpose(dy, W) sized like x, dW = conv_grad_weight(x, dy), db = sum of dy.
    .backward([](GradCtx& g) { convBackward(g, g.dy, g.n() > 2); })
    .onnx("Conv", 1)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0), W = c.input(1), b = optionalInput(c, 2);
      checkSpatialInput(c, x);
      c.setOutput(0, conv(x, W, b, importConvOptions(c, x, W)));
    })
    .exporter([](OnnxExportCtx& c) { exportConv(c, false); });

Expr conv(Expr x, Expr W, Expr b, const ConvOptions& o) {
  std::vector<Expr> in{x, W};
  if(b) in.push_back(b);
  return x->graph()->make(kConv, in, convAttrs(o));
}

// --------------------------------------------------------------- fused_conv

namespace {

using host::ConvPostOp;

// The activations fused_conv applies, with their oneDNN post-op and the op
// (and attributes) whose kernel and gradient the portable path follows.
struct FusedActivation {
  const char* name;
  ConvPostOp::Kind kind;
  const char* op;
};
constexpr FusedActivation kFusedActivations[] = {
    {"relu", ConvPostOp::Kind::Relu, "relu"},
    {"leaky_relu", ConvPostOp::Kind::LeakyRelu, "leaky_relu"},
    {"clip", ConvPostOp::Kind::Clip, "clip"},
    {"hard_sigmoid", ConvPostOp::Kind::HardSigmoid, "hard_sigmoid"},
    {"hard_swish", ConvPostOp::Kind::HardSwish, "hard_swish"},
    {"swish", ConvPostOp::Kind::Swish, "swish"},
    {"gelu", ConvPostOp::Kind::GeluErf, "gelu"},
    {"gelu_tanh", ConvPostOp::Kind::GeluTanh, "gelu"},
    {"sigmoid", ConvPostOp::Kind::Logistic, "sigmoid"},
    {"tanh", ConvPostOp::Kind::Tanh, "tanh"},
};

const FusedActivation* findActivation(const std::string& name) {
  for(const FusedActivation& a : kFusedActivations)
    if(name == a.name) return &a;
  return nullptr;
}

// The activation's own attributes from fused_conv's alpha and beta.
AttrList activationAttrs(const std::string& name, const Attrs& a) {
  double alpha = a.f("alpha"), beta = a.f("beta");
  if(name == "leaky_relu") return {{"alpha", attr(alpha)}};
  if(name == "clip") return {{"min", attr(alpha)}, {"max", attr(beta)}};
  if(name == "hard_sigmoid") return {{"alpha", attr(alpha)}, {"beta", attr(beta)}};
  if(name == "gelu") return {{"approximate", attr("none")}};
  if(name == "gelu_tanh") return {{"approximate", attr("tanh")}};
  return {};
}

// Where fused_conv's inputs are: x, W, then b unless left out, then the
// residual when the residual attribute is set, then x's channel scale when
// x_scale is set.
struct FusedInputs {
  bool bias;
  int residual;  // index, or -1
  int scale;     // index, or -1
};
FusedInputs fusedInputs(size_t n, const Attrs& a) {
  const bool res = a.i("residual") != 0, sc = a.i("x_scale") != 0;
  const size_t fixed = (res ? 1 : 0) + (sc ? 1 : 0);
  return {n - fixed > 2, res ? int(n) - 1 - (sc ? 1 : 0) : -1, sc ? int(n) - 1 : -1};
}

// ---- fused_conv's squeeze-and-excitation forms (graph/passes/
// fuse_squeeze_excite): x_mean, the convolution of x's spatial mean
// ([N, C, 1, 1]); x_scale, of x times a scale per sample and channel
// ([N, C, 1, 1], the last input). x may be stored plain, channels-last or
// channel-blocked (x_block), and the result keeps x's layout ([N, C, 1, 1]
// is the same memory in all of them).

// A [N, C, P] tensor's channels, positions and layout `lay` (0 plain, 1
// channels-last, b channel-blocked), which the loops below walk in memory
// order.
struct ChannelIndex {
  int64_t C, P;
  int lay;
};

// y[n, c] = mean over p of x[n, c, p], summed in double. Parallel over
// samples and channel groups (at batch 1 over channels: EfficientNet-B0's
// squeeze means took 1.8 ms of its 21 on one core and did not speed up on
// two); each channel's sum in its layout's position order, blocked and
// plain channels a vector of doubles at a time.
template <class T>
void channelMean(const T* x, T* y, int64_t N, const ChannelIndex& ix) {
  const int64_t C = ix.C, P = ix.P;
  const int64_t bl = ix.lay > 1 ? ix.lay : 0;
  // Units of work: (n, channel block) for blocked x, (n, channel) for plain
  // x, samples for channels-last x.
  const int64_t per = ix.lay == 1 ? 1 : bl ? C / bl : C;
  host::parallelFor(N * per, N * C * P, [&](int64_t b, int64_t e) {
    std::vector<double> acc(ix.lay == 1 ? size_t(C) : 0);
    for(int64_t u = b; u < e; ++u) {
      const int64_t n = u / per, k = u % per;
      const T* xn = x + n * C * P;
      if(ix.lay == 1) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for(int64_t p = 0; p < P; ++p)
          for(int64_t c = 0; c < C; ++c) acc[size_t(c)] += double(xn[p * C + c]);
        for(int64_t c = 0; c < C; ++c) y[n * C + c] = T(acc[size_t(c)] / double(P));
      } else if(bl) {  // 8 or 16 (fused_conv's infer): one sum per lane, a constant width so it vectorizes
        double a[16] = {};
        const T* xb = xn + k * P * bl;
        auto sum = [&](auto width) {
          constexpr int W = decltype(width)::value;
          for(int64_t p = 0; p < P; ++p)
            for(int ci = 0; ci < W; ++ci) a[ci] += double(xb[p * W + ci]);
        };
        if(bl == 8) sum(std::integral_constant<int, 8>{});
        else sum(std::integral_constant<int, 16>{});
        for(int64_t ci = 0; ci < bl; ++ci) y[n * C + k * bl + ci] = T(a[ci] / double(P));
      } else {
        const T* xc = xn + k * P;
        double a = 0;
        for(int64_t p = 0; p < P; ++p) a += double(xc[p]);
        y[n * C + k] = T(a / double(P));
      }
    }
  });
}

// y = x * s[n, c] element-wise, in x's layout (the float32 product the mul
// it replaces computes), each layout walked in memory order.
template <class T>
void channelScale(const T* x, const T* s, T* y, int64_t N, const ChannelIndex& ix) {
  const int64_t C = ix.C, P = ix.P;
  // Rows of the layout's [outer, inner] view: plain [N*C, P], channels-last
  // [N*P, C], blocked [N*C/b*P, b].
  const int64_t inner = ix.lay == 0 ? P : ix.lay == 1 ? C : ix.lay, rows = N * C * P / std::max<int64_t>(inner, 1);
  host::parallelFor(rows, N * C * P, [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const T* __restrict xr = x + r * inner;
      T* __restrict yr = y + r * inner;
      if(ix.lay == 0) {
        const T sc = s[r];  // row r is (n, c) = r
        for(int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * sc;
      } else if(ix.lay == 1) {
        const T* __restrict sr = s + (r / P) * C;  // row r is (n, p)
        for(int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * sr[i];
      } else {
        const int64_t nb = r / P;  // row r is (n, c block, p): n * C/b + block = r / P
        const T* __restrict sr = s + nb * ix.lay;
        for(int64_t i = 0; i < inner; ++i) yr[i] = xr[i] * sr[i];
      }
    }
  });
}

// Runs registered op `name`'s CPU kernel on `in` into c.out (elementwise
// kernels may read c.out itself).
void runOpKernel(KernelCtx& c, const char* name, SmallVec<TensorBase*, 4> in, const AttrList& set) {
  const OpDef& op = Registry::instance().get(name);
  std::vector<AttrValue> values;
  for(const AttrSpec& spec : op.attrSpecs) {
    values.push_back(spec.defaultValue);
    for(const auto& kv : set)
      if(kv.first == spec.name) values.back() = kv.second;
  }
  KernelCtx k{c.node, c.out, std::move(in), Attrs(&op, values.data()), c.rng, c.graph};
  op.kernels[0](k);
}

// Which of x, y and the residual are stored channel-blocked (host::ConvLayouts).
host::ConvLayouts layoutsOf(const Attrs& a) {
  return {int(a.i("x_block")), int(a.i("y_block")), int(a.i("residual_block"))};
}

bool fusedConvDnnl(KernelCtx& c) {
  FusedInputs fi = fusedInputs(c.in.size(), c.attrs);
  host::ConvEpilogue ep;
  const std::string& act = c.attrs.s("activation");
  if(!act.empty()) {
    ConvPostOp op;
    op.kind = findActivation(act)->kind;
    op.alpha = float(c.attrs.f("alpha"));
    op.beta = float(c.attrs.f("beta"));
    ep.ops.push_back(op);
  }
  if(fi.residual >= 0) {
    ep.ops.push_back({ConvPostOp::Kind::Sum, 0.f, 0.f});
    ep.residual = c.in[size_t(fi.residual)]->data<float>();
  }
  if(!c.attrs.s("post_activation").empty()) ep.ops.push_back({ConvPostOp::Kind::Relu, 0.f, 0.f});
  const ConvDims cd = convDims(c.in[0]->shape(), c.out.shape(), spatialDims(c.in[1]->shape()), c.attrs);
  // 3x3 stride-1 layers on AVX2: Winograd (backend/cpu/winograd.h), faster
  // than oneDNN 2.6's AVX2 direct kernel.
  if(!bf16Computes(c) && host::winogradFits(cd, spatialRank(c.out), layoutsOf(c.attrs), &ep)) {
    host::winogradConvForward(cd, c.in[0]->data<float>(), c.in[1]->data<float>(),
                              fi.bias ? c.in[2]->data<float>() : nullptr, c.out.data<float>(), &ep, weightSlot(c),
                              layoutsOf(c.attrs));
    return true;
  }
  return host::dnnlConvForward(cd, spatialRank(c.out), c.in[0]->data<float>(), c.in[1]->data<float>(),
                               fi.bias ? c.in[2]->data<float>() : nullptr, c.out.data<float>(), &ep, weightSlot(c),
                               layoutsOf(c.attrs), c.bf16());
}

// The portable path: conv's kernel, then the activation's, the add's and
// relu's, each in place on the output.
void fusedConvPortable(KernelCtx& c);

// A 1x1 convolution of one-pixel images (a squeeze-and-excitation block's
// two small layers on [N, C, 1, 1]): a matrix-vector product, which the
// portable kernel (GEMV, then the epilogue's ops in place) runs in a few
// microseconds where a oneDNN primitive took 20-50 (EfficientNet-B0 at batch
// 1 has 32 of them) and got slower on two threads. One pixel is the same
// memory plain, channels-last or channel-blocked (blocked_layout blocks only
// channel counts that fill their blocks).
bool pointwiseOfOnePixel(const KernelCtx& c) {
  const Shape& xs = c.in[0]->shape();
  const Shape& ws = c.in[1]->shape();
  return xs.rank() == 4 && xs[2] == 1 && xs[3] == 1 && ws[2] == 1 && ws[3] == 1 && c.attrs.i("group") == 1 &&
         c.out.shape().elements() == xs[0] * ws[0] && !c.bf16();
}

// The portable path for a node whose tensors are channel-blocked (a
// problem oneDNN declined, or the oneDNN path switched off after the graph
// was laid out): plain copies in, the portable kernel, a blocked copy out.
void fusedConvUnblocked(KernelCtx& c) {
  const host::ConvLayouts lay = layoutsOf(c.attrs);
  FusedInputs fi = fusedInputs(c.in.size(), c.attrs);
  ONYX_ASSERT(c.out.type() == Type::float32 && c.out.shape().rank() == 4, "fused_conv: a blocked layout on a ",
              c.out.type(), " ", c.out.shape(), " output");
  auto plain = [&](TensorBase* t, int block) {
    const Shape& s = t->shape();
    Tensor p = c.scratch(s, Type::float32);
    host::dnnlReorderChannels(t->data<float>(), block, p->data<float>(), 0, s[0], s[1], s[2], s[3]);
    return p;
  };
  SmallVec<TensorBase*, 4> in = c.in;
  Tensor x, r;
  if(lay.x) in[0] = (x = plain(c.in[0], lay.x)).get();
  if(lay.residual && fi.residual >= 0) in[size_t(fi.residual)] = (r = plain(c.in[size_t(fi.residual)], lay.residual)).get();
  Tensor y = lay.y ? c.scratch(c.out.shape(), Type::float32) : nullptr;
  KernelCtx k{c.node, lay.y ? *y : c.out, in, c.attrs, c.rng, c.graph};
  fusedConvPortable(k);
  if(lay.y) {
    const Shape& s = c.out.shape();
    host::dnnlReorderChannels(y->data<float>(), 0, c.out.data<float>(), lay.y, s[0], s[1], s[2], s[3]);
  }
}

void fusedConvPortable(KernelCtx& c) {
  FusedInputs fi = fusedInputs(c.in.size(), c.attrs);
  SmallVec<TensorBase*, 4> convIn{c.in[0], c.in[1]};
  if(fi.bias) convIn.push_back(c.in[2]);
  KernelCtx k{c.node, c.out, convIn, c.attrs, c.rng, c.graph};
  dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) { convKernel<typename decltype(tag)::type>(k); });
  const std::string& act = c.attrs.s("activation");
  if(!act.empty()) runOpKernel(c, findActivation(act)->op, {&c.out}, activationAttrs(act, c.attrs));
  if(fi.residual >= 0) runOpKernel(c, "add", {&c.out, c.in[size_t(fi.residual)]}, {});
  if(!c.attrs.s("post_activation").empty()) runOpKernel(c, "relu", {&c.out}, {});
}

// The activation applied to z (z itself when there is none), through its op.
Expr applyActivation(Expr z, const std::string& act, const Attrs& a) {
  if(act.empty()) return z;
  const OpDef& op = Registry::instance().get(findActivation(act)->op);
  return z->graph()->make(op, {z}, activationAttrs(act, a));
}

// dy * act'(z), where y = act(z): the activations' own gradient rules,
// written for z (fused_conv does not keep the pre-activation).
Expr activationGrad(const std::string& act, const Attrs& a, Expr z, Expr y, Expr dy) {
  double alpha = a.f("alpha"), beta = a.f("beta");
  if(act.empty()) return dy;
  if(act == "relu") return where(gt(z, 0.0), dy, 0.0);
  if(act == "leaky_relu") return where(gt(z, 0.0), dy, dy * alpha);
  if(act == "clip") return where(logical_and(gt(z, alpha), lt(z, beta)), dy, 0.0);
  if(act == "hard_sigmoid") return where(logical_and(gt(y, 0.0), lt(y, 1.0)), dy * alpha, 0.0);
  if(act == "hard_swish")
    return where(logical_and(gt(z, -3.0), lt(z, 3.0)), dy * (z * (1.0 / 3.0) + 0.5), where(ge(z, 3.0), dy, 0.0));
  if(act == "swish") {
    Expr s = sigmoid(z);
    return dy * (s + y * (1.0 - s));
  }
  if(act == "gelu") {
    Expr cdf = 0.5 * (1.0 + erf(z * 0.70710678118654752440));
    Expr pdf = exp(z * z * -0.5) * 0.39894228040143267794;
    return dy * (cdf + z * pdf);
  }
  if(act == "gelu_tanh") {
    const double k = 0.79788456080286535588, cubic = 0.044715;
    Expr t = tanh((z + z * z * z * cubic) * k);
    Expr du = (1.0 + z * z * (3 * cubic)) * k;
    return dy * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * du);
  }
  if(act == "sigmoid") return dy * y * (1.0 - y);
  ONYX_ASSERT(act == "tanh", "fused_conv: activation '", act, "'");
  return dy * (1.0 - y * y);
}

}  // namespace

ONYX_OP(kFusedConv, "fused_conv")
    .doc("y = post(act(conv(x, W, b)) + residual): conv's attributes; activation \"\" (none), relu, leaky_relu "
         "(alpha), clip (min alpha, max beta), hard_sigmoid (alpha, beta), hard_swish, swish, gelu, gelu_tanh, "
         "sigmoid or tanh; residual 1: the last input is added (shaped like y); post_activation \"\" or relu; "
         "x_block, y_block, residual_block 8 or 16: that tensor is stored channel-blocked (oneDNN's nChw8c/16c), "
         "1: channels-last (NHWC) (set by the blocked_layout pass between convolutions); x_mean 1: the "
         "convolution is of x's spatial mean [N, C, 1, 1]; x_scale 1: of x times the last input [N, C, 1, 1] "
         "(float32 or float64, 2-D; set by the fuse_squeeze_excite pass)")
    .inputs(2, 5)
    .attr("strides", IntList{})
    .attr("dilations", IntList{})
    .attr("pads", IntList{})
    .attr("group", int64_t(1))
    .attr("activation", std::string())
    .attr("alpha", 0.0)
    .attr("beta", 0.0)
    .attr("residual", int64_t(0))
    .attr("post_activation", std::string())
    .attr("x_block", int64_t(0))
    .attr("y_block", int64_t(0))
    .attr("residual_block", int64_t(0))
    .attr("x_mean", int64_t(0))
    .attr("x_scale", int64_t(0))
    .infer([](InferCtx& c) {
      const int64_t res = c.attrs.i("residual");
      for(const char* a : {"x_block", "y_block", "residual_block"}) {
        const int64_t b = c.attrs.i(a);
        c.check(b == 0 || b == 1 || b == 8 || b == 16, a, " must be 0 (plain), 1 (channels-last) or 8 or 16 "
                "(channel-blocked), got ", b);
        c.check(b == 0 || (c.typeOf(0) == Type::float32 && c.shapeOf(0).rank() == 4), a,
                " (a channel-blocked layout) needs a float32 2-D convolution");
      }
      c.check(res == 0 || res == 1, "residual must be 0 or 1, got ", res);
      c.check(c.n() >= size_t(2 + res), "residual set but only ", c.n(), " inputs");
      const bool mean = c.attrs.i("x_mean") != 0, scale = c.attrs.i("x_scale") != 0;
      c.check((c.attrs.i("x_mean") | c.attrs.i("x_scale") | 1) == 1, "x_mean and x_scale must be 0 or 1");
      c.check(!(mean && scale), "x_mean and x_scale cannot both be set");
      c.check(c.n() >= size_t(2 + res + (scale ? 1 : 0)), "x_scale set but no scale input");
      FusedInputs fi = fusedInputs(c.n(), c.attrs);
      if(mean || scale) {
        const Shape& xs = c.shapeOf(0);
        c.check((c.typeOf(0) == Type::float32 || c.typeOf(0) == Type::float64) && xs.rank() == 4,
                "x_mean and x_scale need a float32 or float64 2-D convolution, got x ", xs, " ", c.typeOf(0));
        if(scale)
          c.check(c.typeOf(size_t(fi.scale)) == c.typeOf(0) && c.shapeOf(size_t(fi.scale)) == Shape({xs[0], xs[1], 1, 1}),
                  "x_scale's input must be [", xs[0], ", ", xs[1], ", 1, 1] of x's type, got ", c.shapeOf(size_t(fi.scale)),
                  " ", c.typeOf(size_t(fi.scale)));
      }
      if(mean) {
        requireNumeric(c);
        const Shape& xs = c.shapeOf(0);
        c.shape = ops::inferConvWindow(c, Shape({xs[0], xs[1], 1, 1}), c.shapeOf(1));
        if(fi.bias) checkBias(c, c.shapeOf(1)[0]);
      } else {
        inferConv(c, fi.bias);
      }
      const std::string& act = c.attrs.s("activation");
      const std::string& post = c.attrs.s("post_activation");
      c.check(act.empty() || findActivation(act), "unknown activation '", act, "'");
      c.check(post.empty() || post == "relu", "post_activation is '", post, "' but must be \"\" or \"relu\"");
      c.check(isFloat(c.type) || (act.empty() && post.empty()), "activations need a float type, got ", c.type);
      if(fi.residual >= 0)
        c.check(c.shapeOf(size_t(fi.residual)) == c.shape, "residual of shape ", c.shapeOf(size_t(fi.residual)),
                " must have the output's shape ", c.shape);
    })
    .cpu([](KernelCtx& c) {
      auto run = [](KernelCtx& k) {
        if(pointwiseOfOnePixel(k)) return fusedConvPortable(k);
        if(k.out.type() == Type::float32 && host::dnnlEnabled() && fusedConvDnnl(k)) return;
        if(layoutsOf(k.attrs).any()) fusedConvUnblocked(k);
        else fusedConvPortable(k);
      };
      const bool mean = c.attrs.i("x_mean") != 0, scale = c.attrs.i("x_scale") != 0;
      if(!mean && !scale) return run(c);
      // x's mean or scaled copy first (in x's layout), then the convolution of that.
      const TensorBase& x = *c.in[0];
      const Shape& xs = x.shape();
      const ChannelIndex ix{xs[1], xs[2] * xs[3], int(c.attrs.i("x_block"))};
      Tensor t = c.scratch(mean ? Shape({xs[0], xs[1], 1, 1}) : xs, x.type());
      const TensorBase* sc = scale ? c.in[size_t(fusedInputs(c.in.size(), c.attrs).scale)] : nullptr;
      auto pre = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if(mean) channelMean(x.data<T>(), t->data<T>(), xs[0], ix);
        else channelScale(x.data<T>(), sc->data<T>(), t->data<T>(), xs[0], ix);
      };
      if(x.type() == Type::float64) pre(TypeTag<double>{});
      else pre(TypeTag<float>{});
      SmallVec<TensorBase*, 4> in = c.in;
      in[0] = t.get();
      KernelCtx k{c.node, c.out, in, c.attrs, c.rng, c.graph};
      run(k);
    })
    // Through the unfused chain: z = conv(x, W, b) is rebuilt, the epilogue's
    // gradient taken step by step back to it, then conv's rule.
    .backward([](GradCtx& g) {
      ONYX_ASSERT(!layoutsOf(g.attrs).any(), "fused_conv: a gradient through channel-blocked tensors (the "
                                             "blocked_layout pass runs on inference graphs only)");
      ONYX_ASSERT(!g.attrs.i("x_mean") && !g.attrs.i("x_scale"), "fused_conv: a gradient through x_mean or "
                  "x_scale (the fuse_squeeze_excite pass runs on inference graphs only)");
      FusedInputs fi = fusedInputs(g.n(), g.attrs);
      const std::string& act = g.attrs.s("activation");
      Expr dy = g.dy;
      if(!g.attrs.s("post_activation").empty()) dy = where(gt(g.y(), 0.0), dy, 0.0);
      if(fi.residual >= 0 && g.needs(size_t(fi.residual))) g.add(size_t(fi.residual), dy);
      if(!(g.needs(0) || g.needs(1) || (fi.bias && g.needs(2)))) return;
      Expr z = g.graph.make(kConv, fi.bias ? std::vector<Expr>{g.x(0), g.x(1), g.x(2)} : std::vector<Expr>{g.x(0), g.x(1)},
                            pick(g.attrs, {"strides", "dilations", "pads", "group"}));
      convBackward(g, activationGrad(act, g.attrs, z, applyActivation(z, act, g.attrs), dy), fi.bias);
    })
    .noOnnx("internal: made by the inference rewrite graph/passes/fuse_conv from Conv and its epilogue")
    .gpuOnHost("no GPU form yet: made only by the CPU inference rewrite (graph/passes/fuse_conv), never in a GPU graph");

Expr fused_conv(Expr x, Expr W, Expr b, Expr residual, const FusedConvOptions& f, const ConvOptions& o) {
  std::vector<Expr> in{x, W};
  if(b) in.push_back(b);
  if(residual) in.push_back(residual);
  AttrList l = convAttrs(o);
  l.emplace_back("activation", attr(f.activation));
  l.emplace_back("alpha", attr(f.alpha));
  l.emplace_back("beta", attr(f.beta));
  l.emplace_back("residual", attr(int64_t(residual ? 1 : 0)));
  l.emplace_back("post_activation", attr(f.postActivation));
  return x->graph()->make(kFusedConv, in, l);
}

// ---------------------------------------------------------- conv_transpose

[[maybe_unused]] static OpDef& kConvTransposeDef = kConvTranspose
    .doc("y = conv_transpose(x, W) + b: each x[n, c, i..] adds x * W[c, m, k..] at y[n, g*M/group + m, i*s + k*d - "
         "pad_begin]; W [C, M/group, k..], output s*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end")
    .inputs(2, 3)
    .attr("strides", IntList{})
    .attr("dilations", IntList{})
    .attr("pads", IntList{})
    .attr("output_padding", IntList{})
    .attr("group", int64_t(1))
    .infer([](InferCtx& c) {
      requireNumeric(c);
      const Shape& xs = c.shapeOf(0);
      const Shape& ws = c.shapeOf(1);
      int nd = checkedSpatialRank(c, xs, "x");
      c.check(ws.rank() == xs.rank(), "W of shape ", ws, " must have x's rank ", xs.rank(), " ([C, M/group, k..])");
      int64_t G = checkedGroup(c), C = xs[1], M = mulChecked(ws[1], G, "conv_transpose's output channels (M/group * group)");
      c.check(C == ws[0], "x has ", C, " channels but W of shape ", ws, " expects ", ws[0]);
      c.check(C % G == 0, "input channels ", C, " are not divisible by group ", G);
      checkBias(c, M);
      host::Spatial sp = checkedSpatial(c, nd, false);
      const IntList& op = c.attrs.ints("output_padding");
      c.check(op.empty() || op.size() == size_t(nd), "output_padding must have ", nd, " entries, got ", op.size());
      std::vector<int64_t> outPad = listOr(op, size_t(nd), 0);
      Shape::Dims out{xs[0], M};
      for(int i = 0; i < nd; ++i) {
        size_t u = size_t(i);
        c.check(outPad[u] >= 0, "output_padding must be >= 0, got ", attrToString(op));
        const char* what = "ConvTranspose output size";
        int64_t o = mulChecked(sp.strides[u], xs[2 + i] - 1, what);
        o = addChecked(o, outPad[u], what);
        o = addChecked(o, mulChecked(ws[2 + i] - 1, sp.dilations[u], what), what);
        o = subChecked(addChecked(o, 1, what), addChecked(sp.pads[u], sp.pads[u + size_t(nd)], what), what);
        c.check(o >= 0, "output spatial dim ", i, " would be ", o, " (pads too large)");
        out.push_back(o);
      }
      c.shape = Shape(out);
    })
    .cpu(ONYX_CONV_KERNEL(convTransposeKernel, convTransposeDnnl))
    // dx = conv(dy, W) (cut to x's size), dW = conv_grad_weight(dy, x), db = sum of dy.
    .backward([](GradCtx& g) {
      Expr x = g.x(0), W = g.x(1);
      AttrList l = pick(g.attrs, {"strides", "dilations", "pads", "group"});
      if(g.needs(0)) g.add(0, convCut(g.dy, W, l, x->shape()));
      if(g.needs(1)) {
        l.emplace_back("kernel_shape", attr(spatialDims(W->shape())));
        g.add(1, g.graph.make(kConvGradWeight, {g.dy, x}, l));
      }
      if(g.n() > 2 && g.needs(2)) g.add(2, biasGrad(g.dy));
    })
    .onnx("ConvTranspose", 1)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0), W = c.input(1), b = optionalInput(c, 2);
      checkSpatialInput(c, x);
      const int nd = x->shape().rank() - 2;
      ConvOptions o;
      // The kernel is W's spatial dims: one per spatial dim of x (read below by index).
      c.check(W->shape().rank() == x->shape().rank(), "W of shape ", W->shape(), " must have x's rank ",
              x->shape().rank());
      std::vector<int64_t> k = importKernelFromW(c, W);
      o.strides = importList(c, "strides", nd, 1);
      o.dilations = importList(c, "dilations", nd, 1);
      o.group = c.attrInt("group", 1);
      o.outputPadding = importList(c, "output_padding", nd, 0);
      std::string autoPad = c.attrString("auto_pad", "NOTSET");
      if(autoPad.empty()) autoPad = "NOTSET";
      c.check(autoPad == "NOTSET" || autoPad == "VALID" || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER",
              "unknown auto_pad '", autoPad, "'");
      std::vector<int64_t> pads = c.attrInts("pads", {});
      c.check(pads.empty() || pads.size() == size_t(2 * nd), "pads must have ", 2 * nd, " entries, got ", pads.size());
      std::vector<int64_t> outShape = c.attrInts("output_shape", {});
      if(outShape.size() == size_t(nd + 2)) outShape.erase(outShape.begin(), outShape.begin() + 2);
      c.check(outShape.empty() || outShape.size() == size_t(nd), "output_shape must have ", nd, " entries, got ",
              outShape.size());
      bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
      if(outShape.empty() && same)
        for(int i = 0; i < nd; ++i)
          outShape.push_back(mulChecked(x->shape()[2 + i], o.strides[size_t(i)], "ConvTranspose output_shape"));
      if(autoPad == "VALID") pads.clear();
      std::vector<int64_t> natural;  // output size without pads
      for(int i = 0; i < nd; ++i) {
        size_t u = size_t(i);
        const char* what = "ConvTranspose output size";
        natural.push_back(addChecked(addChecked(mulChecked(o.strides[u], x->shape()[2 + i] - 1, what),
                                                o.outputPadding[u], what),
                                     addChecked(mulChecked(k[u] - 1, o.dilations[u], what), 1, what), what));
      }
      if(!outShape.empty() && (pads.empty() || same)) {
        // Pads generated from the requested output size (negative ones grow the output).
        pads.assign(size_t(2 * nd), 0);
        for(int i = 0; i < nd; ++i) {
          size_t u = size_t(i);
          int64_t total = subChecked(natural[u], outShape[u], "ConvTranspose pads");
          int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
          bool upper = autoPad == "SAME_UPPER";
          pads[u] = upper ? half : total - half;
          pads[u + size_t(nd)] = upper ? total - half : half;
        }
      } else if(!outShape.empty()) {
        // Explicit pads and output size: the end pad absorbs the difference.
        for(int i = 0; i < nd; ++i) {
          size_t u = size_t(i);
          pads[u + size_t(nd)] = subChecked(subChecked(natural[u], pads[u], "ConvTranspose pads"), outShape[u],
                                            "ConvTranspose pads");
        }
      }
      if(pads.empty()) pads.assign(size_t(2 * nd), 0);
      o.pads = pads;
      c.setOutput(0, conv_transpose(x, W, b, o));
    })
    .exporter([](OnnxExportCtx& c) { exportConv(c, true); });

Expr conv_transpose(Expr x, Expr W, Expr b, const ConvOptions& o) {
  std::vector<Expr> in{x, W};
  if(b) in.push_back(b);
  AttrList l = convAttrs(o);
  l.emplace_back("output_padding", attr(o.outputPadding));
  return x->graph()->make(kConvTranspose, in, l);
}

// -------------------------------------------------------- conv_grad_weight

[[maybe_unused]] static OpDef& kConvGradWeightDef = kConvGradWeight
    .doc("dW[m, c, k..] = sum_{n, o..} dy[n, g*M/group + m, o..] * x[n, g*C/group + c, o*s + k*d - pad_begin]: the "
         "gradient of conv w.r.t. W, of shape [M, C/group, kernel_shape..]")
    .inputs(2)
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("dilations", IntList{})
    .attr("pads", IntList{})
    .attr("group", int64_t(1))
    .infer([](InferCtx& c) {
      requireNumeric(c);
      const Shape& xs = c.shapeOf(0);
      const Shape& ds = c.shapeOf(1);
      int nd = checkedSpatialRank(c, xs, "x");
      c.check(ds.rank() == xs.rank() && ds[0] == xs[0], "dy of shape ", ds, " does not match x of shape ", xs);
      int64_t G = checkedGroup(c), C = xs[1], M = ds[1];
      c.check(C % G == 0 && M % G == 0, "channels ", C, " and ", M, " must be divisible by group ", G);
      const IntList& k = c.attrs.ints("kernel_shape");
      c.check(k.size() == size_t(nd), "kernel_shape must have ", nd, " entries, got ", k.size());
      host::Spatial sp = checkedSpatial(c, nd, false);
      Shape::Dims out{M, C / G};
      for(int i = 0; i < nd; ++i) {
        size_t u = size_t(i);
        c.check(k[u] >= 1, "kernel_shape must be >= 1, got ", attrToString(k));
        int64_t o = windowCount(xs[2 + i], k[u], sp.strides[u], sp.dilations[u], sp.pads[u], sp.pads[u + size_t(nd)],
                                false);
        c.check(ds[2 + i] <= o, "dy spatial dim ", i, " (", ds[2 + i], ") exceeds conv's output size ", o);
        out.push_back(k[u]);
      }
      c.shape = Shape(out);
    })
    .cpu(ONYX_CONV_KERNEL(convGradWeightKernel, convGradWeightDnnl))
    // Bilinear: <dG, dW(x, dy)> = <dy, conv(x, dG)>.
    .backward([](GradCtx& g) {
      Expr x = g.x(0), dy = g.x(1);
      if(g.needs(0)) g.add(0, convTransposeTo(dy, g.dy, g.attrs, x->shape()));
      if(g.needs(1)) g.add(1, convCut(x, g.dy, pick(g.attrs, {"strides", "dilations", "pads", "group"}), dy->shape()));
    })
    .noOnnx("internal: gradient of conv");

Expr conv_grad_weight(Expr x, Expr dy, const std::vector<int64_t>& kernel, const ConvOptions& o) {
  AttrList l = convAttrs(o);
  l.emplace_back("kernel_shape", attr(kernel));
  return x->graph()->make(kConvGradWeight, {x, dy}, l);
}

}  // namespace onyx
