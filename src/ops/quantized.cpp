// Quantized compute: matmul_integer (ONNX MatMulInteger) and qlinear_conv,
// ONNX QLinearConv as one op, a
// convolution of 8-bit integers with int32 accumulation and the
// requantization of its sums to 8 bits. The QDQ rewrite
// (graph/passes/fuse_qdq.cpp) makes it from DequantizeLinear -> Conv ->
// QuantizeLinear too.
//
// y[n, m, o..] = saturate(round((sum (x - x_zp) (w - w_zp[m]) + b[m]) * S[m]) + y_zp)
// with S[m] = x_scale * w_scale[m] / y_scale computed in float32 and the
// product in float64, as ONNX's reference (round half to even).
//
// CPU kernels, in order of preference:
// - int8 through oneDNN (backend/cpu/dnnl_conv.h) when it sums exactly: on
//   CPUs with VNNI always, without it for weights in [-64, 64] (what
//   onnxruntime's reduce_range makes) and for depthwise convolutions (one
//   input channel per group: oneDNN pads the channel block with zeros, so
//   every pair it adds in int16 has a zero term); s8 x runs as u8 (x + 128,
//   zero point + 128: the same differences), the weights less their zero
//   point as s8.
//   oneDNN scales in float32: a result may differ from the reference by one
//   unit where the float32 and float64 products round differently.
// - int8 split, without VNNI for full-range weights (onnxruntime's default
//   quantization): the pairs of weights whose int16 sum could saturate are
//   clamped into [-64, 64] for oneDNN (host::int8PairSplit), which then
//   gives exact int32 sums; the few weights taken off (on real layers
//   about 0.1%) are multiplied and added in by addRest, and the sums
//   requantized as the exact loops do (float64 product: the reference's
//   bytes). Taken while the rest is at most 1 in 256 weights.
// - float32: the convolution of (x - x_zp) and (w - w_zp) through the float
//   kernels (channels-last tensors stay so: oneDNN takes NHWC), then the
//   requantization. Products of 8-bit integers are exact
//   in float32 and so is their sum while it stays below 2^24 in magnitude,
//   which the kernel checks per layer from the weights (a bound on every
//   partial sum); beyond it the sum carries float32 rounding, a relative
//   error of at most the number of taps times 2^-24.
// - exact integer loops where oneDNN declines the problem (ONYX_DNNL=0).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/backend/cpu/gemm.h>
#include <onyx/backend/cpu/int16_gemm.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/quantized.h>
#include <onyx/ops/window_helpers.h>

namespace onyx {

ONYX_OP(kQLinearConv, "qlinear_conv");
ONYX_OP(kMatMulInteger, "matmul_integer");
ONYX_OP(kMatMulIntegerToFloat, "matmul_integer_to_float");

namespace {

enum QIn : size_t { kX = 0, kXScale, kXZp, kW, kWScale, kWZp, kYScale, kYZp, kBias };

bool is8Bit(Type t) { return t == Type::uint8 || t == Type::int8; }

int64_t intAt(const TensorBase& t, int64_t i) {
  switch(t.type()) {
    case Type::uint8: return t.data<uint8_t>()[i];
    case Type::int8: return t.data<int8_t>()[i];
    case Type::int32: return t.data<int32_t>()[i];
    default: ONYX_ASSERT(false, "qlinear_conv: integer of type ", t.type());
  }
  return 0;
}

// to[i] = from[i] + 128: int8 values as uint8 (with the zero point moved by
// 128, the same differences), for oneDNN's u8 x s8 kernels. The pointers are
// copied into restrict locals: uint8 stores may alias anything, and through
// the lambda's captures they kept this loop scalar, reloading both pointers
// per element (1 ms of a 1.3 ms depthwise convolution in MobileNetV2).
void toUnsigned(const int8_t* from, uint8_t* to, int64_t n) {
  host::parallelFor(n, n, [from, to](int64_t b, int64_t e) {
    const int8_t* __restrict f = from;
    uint8_t* __restrict t = to;
    for(int64_t i = b; i < e; ++i) t[i] = static_cast<uint8_t>(static_cast<uint8_t>(f[i]) ^ 0x80u);
  });
}

// Entry m, or the only one.
float perChannelF(const TensorBase& t, int64_t m) { return t.data<float>()[t.size() == 1 ? 0 : m]; }

// One weight of int8PairSplit's rest: output channel m, input channel ch
// (of x), weight w, and tap offsets k * dilation - pad per spatial dim.
struct RestTap {
  int64_t m = 0, ch = 0, off[3] = {0, 0, 0};
  int64_t dx = 0;  // channels-last x: the offset of its x value from the window's origin
  int32_t w = 0;
};

// What a node's kernel keeps between runs, rebuilt when the weights or the
// quantization parameters it was made from change.
struct QConvState {
  // what it was made from
  const void* w = nullptr;
  // w_scale and w_zero_point's buffers, when both are constants (whose
  // values cannot change under the same buffer, as w's): null otherwise
  const void* wScaleConst = nullptr;
  const void* wZpConst = nullptr;
  std::vector<int64_t> wZp;
  std::vector<float> key;  // x_scale, y_scale, w_scale..
  int threads = 0;
  Type yType = Type::undefined, xType = Type::undefined;
  // the requantization factors S[m] and the weights less their zero point
  std::vector<float> S;
  std::vector<int32_t> wq;  // [M, C/G, k..]
  int wMaxAbs = 0, wMin = 0, wMax = 0;
  int64_t maxRowSum = 0;  // max over m of sum |wq[m, ..]|
  // int8 path
  std::shared_ptr<host::DnnlQConv> dnnl;
  bool triedDnnl = false;
  // without VNNI, full-range weights: what the int8 kernel's weights leave
  // out (host::int8PairSplit; empty otherwise), ordered by m, where each
  // output channel's entries start (M + 1 offsets), and the least and
  // greatest off[d] among them
  std::vector<RestTap> restTaps;
  std::vector<size_t> restStart;
  int64_t restLo[3] = {0, 0, 0}, restHi[3] = {0, 0, 0};
  // float path
  std::vector<float> wf, bf;
  host::DnnlWeightSlot slot;
};

std::vector<float> paramKey(const KernelCtx& c) {
  std::vector<float> k{c.in[kXScale]->data<float>()[0], c.in[kYScale]->data<float>()[0]};
  const TensorBase& ws = *c.in[kWScale];
  k.insert(k.end(), ws.data<float>(), ws.data<float>() + ws.size());
  return k;
}

std::vector<int64_t> wZpOf(const KernelCtx& c) {
  const TensorBase& z = *c.in[kWZp];
  std::vector<int64_t> v(size_t(z.size()));
  for(int64_t i = 0; i < z.size(); ++i) v[size_t(i)] = intAt(z, i);
  return v;
}

void build(QConvState& s, const KernelCtx& c) {
  const TensorBase& w = *c.in[kW];
  const int64_t M = w.shape()[0], per = w.size() / std::max<int64_t>(M, 1);
  s.w = w.raw();
  const bool constParams = c.node.child(kWScale)->kind() == NodeKind::Constant &&
                           c.node.child(kWZp)->kind() == NodeKind::Constant;
  s.wScaleConst = constParams ? c.in[kWScale]->raw() : nullptr;
  s.wZpConst = constParams ? c.in[kWZp]->raw() : nullptr;
  s.wZp = wZpOf(c);
  s.key = paramKey(c);
  s.threads = host::numThreads();
  s.yType = c.out.type();
  s.xType = c.in[kX]->type();
  const float xs = s.key[0], ys = s.key[1];
  s.S.resize(size_t(M));
  for(int64_t m = 0; m < M; ++m) s.S[size_t(m)] = xs * perChannelF(*c.in[kWScale], m) / ys;  // float32, as numpy
  s.wq.resize(size_t(w.size()));
  s.wMaxAbs = s.wMin = s.wMax = 0;
  s.maxRowSum = 0;
  for(int64_t m = 0; m < M; ++m) {
    const int64_t zp = s.wZp[s.wZp.size() == 1 ? 0 : size_t(m)];
    int64_t row = 0;
    for(int64_t i = 0; i < per; ++i) {
      const int64_t v = intAt(w, m * per + i) - zp;
      s.wq[size_t(m * per + i)] = int32_t(v);
      s.wMaxAbs = std::max<int>(s.wMaxAbs, int(std::abs(v)));
      s.wMin = std::min<int>(s.wMin, int(v));
      s.wMax = std::max<int>(s.wMax, int(v));
      row += std::abs(v);
    }
    s.maxRowSum = std::max(s.maxRowSum, row);
  }
  s.dnnl.reset();
  s.triedDnnl = false;
  s.restTaps.clear();
  s.restStart.clear();
  s.wf.clear();
  s.bf.clear();
  s.slot.reset();
}

// Whether s was built from these inputs: compared in place, as every run
// of every quantized convolution asks (no vectors built for it).
bool current(const QConvState& s, const KernelCtx& c) {
  if(s.w != c.in[kW]->raw() || s.threads != host::numThreads() || s.yType != c.out.type() ||
     s.xType != c.in[kX]->type())
    return false;
  const TensorBase &ws = *c.in[kWScale], &z = *c.in[kWZp];
  if(s.key[0] != c.in[kXScale]->data<float>()[0] || s.key[1] != c.in[kYScale]->data<float>()[0]) return false;
  // Per-channel parameters (up to thousands) compared by buffer when constant.
  if(s.wScaleConst && s.wScaleConst == ws.raw() && s.wZpConst == z.raw()) return true;
  if(s.key.size() != size_t(ws.size()) + 2 || s.wZp.size() != size_t(z.size()) ||
     !std::equal(s.key.begin() + 2, s.key.end(), ws.data<float>()))
    return false;
  for(int64_t i = 0; i < z.size(); ++i)
    if(s.wZp[size_t(i)] != intAt(z, i)) return false;
  return true;
}

// y = saturate(round(acc * S[m]) + y_zp), the product in float64: a row of
// one channel (factor f), or a channels-last row of every channel. Written
// to vectorize (roundClamped), compiled for AVX2 and for the baseline,
// picked at run time (bestIsa() above scalar: the CPU has AVX2).
template <class Y, class A>
__attribute__((always_inline)) inline void requantizeRowBody(const A* __restrict a, Y* __restrict o, int64_t P,
                                                             double f, double lo, double hi, int32_t zp) {
  for(int64_t p = 0; p < P; ++p) o[p] = Y(int32_t(ops::roundClamped(double(a[p]) * f, lo, hi)) + zp);
}

template <class Y, class A>
__attribute__((always_inline)) inline void requantizeRowPerChannelBody(const A* __restrict a, Y* __restrict o,
                                                                       int64_t M, const double* __restrict f,
                                                                       double lo, double hi, int32_t zp) {
  for(int64_t m = 0; m < M; ++m) o[m] = Y(int32_t(ops::roundClamped(double(a[m]) * f[m], lo, hi)) + zp);
}

template <class Y, class A>
ONYX_TARGET_AVX2 void requantizeRowAvx2(const A* a, Y* o, int64_t P, double f, double lo, double hi, int32_t zp) {
  requantizeRowBody(a, o, P, f, lo, hi, zp);
}

template <class Y, class A>
ONYX_TARGET_AVX2 void requantizeRowPerChannelAvx2(const A* a, Y* o, int64_t M, const double* f, double lo, double hi,
                                                  int32_t zp) {
  requantizeRowPerChannelBody(a, o, M, f, lo, hi, zp);
}

template <class Y, class A>
void requantizeRow(const A* a, Y* o, int64_t P, double f, double lo, double hi, int32_t zp) {
  if(host::vec::bestIsa() != host::vec::Isa::scalar) requantizeRowAvx2(a, o, P, f, lo, hi, zp);
  else requantizeRowBody(a, o, P, f, lo, hi, zp);
}

template <class Y, class A>
void requantizeRowPerChannel(const A* a, Y* o, int64_t M, const double* f, double lo, double hi, int32_t zp) {
  if(host::vec::bestIsa() != host::vec::Isa::scalar) requantizeRowPerChannelAvx2(a, o, M, f, lo, hi, zp);
  else requantizeRowPerChannelBody(a, o, M, f, lo, hi, zp);
}

template <class Y, class A>
void requantize(const A* acc, Y* y, const std::vector<float>& S, int64_t yzp, int64_t N, int64_t M, int64_t P) {
  const double lo = double(std::numeric_limits<Y>::lowest()) - double(yzp);
  const double hi = double(std::numeric_limits<Y>::max()) - double(yzp);
  host::parallelFor(N * M, N * M * P, [&](int64_t b, int64_t e) {
    for(int64_t nm = b; nm < e; ++nm)
      requantizeRow(acc + nm * P, y + nm * P, P, double(S[size_t(nm % M)]), lo, hi, int32_t(yzp));
  });
}

// The same for channels-last acc and y ([N, P, M] in memory).
template <class Y, class A>
void requantizeNhwc(const A* acc, Y* y, const std::vector<float>& S, int64_t yzp, int64_t N, int64_t M,
                    int64_t P) {
  const double lo = double(std::numeric_limits<Y>::lowest()) - double(yzp);
  const double hi = double(std::numeric_limits<Y>::max()) - double(yzp);
  std::vector<double> f(S.begin(), S.end());
  host::parallelFor(N * P, N * P * M, [&](int64_t b, int64_t e) {
    for(int64_t np = b; np < e; ++np)
      requantizeRowPerChannel(acc + np * M, y + np * M, M, f.data(), lo, hi, int32_t(yzp));
  });
}

template <class Fn>
void dispatch8(Type t, Fn&& fn) {
  if(t == Type::uint8) fn(TypeTag<uint8_t>{});
  else fn(TypeTag<int8_t>{});
}

// The exact integer convolution (no oneDNN): acc[n, m, p] in int64.
void convExact(const KernelCtx& c, const QConvState& s, const host::ConvDims& cd, const TensorBase& x,
               std::vector<int64_t>& acc) {
  const int64_t xzp = intAt(*c.in[kXZp], 0);
  const host::ConvGeom& g = cd.g;
  const bool bias = c.in.size() > kBias;
  acc.assign(size_t(cd.N * cd.M * cd.P), 0);
  host::parallelFor(cd.N * cd.M, cd.N * cd.M * cd.P * cd.CK, [&](int64_t b, int64_t e) {
    for(int64_t nm = b; nm < e; ++nm) {
      const int64_t n = nm / cd.M, m = nm % cd.M, grp = m / cd.Mg;
      int64_t* out = acc.data() + nm * cd.P;
      const int32_t* wm = s.wq.data() + m * cd.CK;
      const int64_t b0 = bias ? intAt(*c.in[kBias], m) : 0;
      for(int64_t o0 = 0; o0 < g.pos[0]; ++o0)
        for(int64_t o1 = 0; o1 < g.pos[1]; ++o1)
          for(int64_t o2 = 0; o2 < g.pos[2]; ++o2) {
            int64_t sum = b0;
            for(int64_t ci = 0; ci < cd.Cg; ++ci) {
              const int64_t plane = (n * cd.C + grp * cd.Cg + ci) * g.imgSize;
              for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
                const int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
                if(i0 < 0 || i0 >= g.img[0]) continue;
                for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                  const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
                  if(i1 < 0 || i1 >= g.img[1]) continue;
                  for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                    const int64_t i2 = o2 * g.s[2] + k2 * g.d[2] - g.pb[2];
                    if(i2 < 0 || i2 >= g.img[2]) continue;
                    const int64_t xv = intAt(x, plane + (i0 * g.img[1] + i1) * g.img[2] + i2) - xzp;
                    sum += xv * wm[((ci * g.k[0] + k0) * g.k[1] + k1) * g.k[2] + k2];
                  }
                }
              }
            }
            out[(o0 * g.pos[1] + o1) * g.pos[2] + o2] = sum;
          }
    }
  });
}

// Copies an 8-bit [N, C, H, W] tensor between layouts: toNhwc from plain
// NCHW to channels-last (memory order N, H, W, C), else back.
void channelsLast(const TensorBase& from, TensorBase& to, bool toNhwc) {
  const Shape& sh = from.shape();
  const int64_t N = sh[0], C = sh[1], P = sh[2] * sh[3];
  const uint8_t* a = static_cast<const uint8_t*>(from.raw());
  uint8_t* b = static_cast<uint8_t*>(to.raw());
  host::parallelFor(N * C, N * C * P, [&](int64_t lo, int64_t hi) {
    for(int64_t nc = lo; nc < hi; ++nc) {
      const int64_t n = nc / C, ch = nc % C;
      for(int64_t p = 0; p < P; ++p) {
        const int64_t plain = nc * P + p, last = (n * P + p) * C + ch;
        if(toNhwc) b[last] = a[plain];
        else b[plain] = a[last];
      }
    }
  });
}

// acc[n, m, o..] += the products of s.restTaps: the int8 kernel's sums made
// whole (host::int8PairSplit). x is u8 with zero point xzp; padding adds
// nothing. Channels-last x or acc as the convolution's: a channels-last acc
// goes position by position (each position's row of M sums stays in
// cache), a plain one entry by entry (each entry's row of positions).
void addRest(const QConvState& s, const host::ConvDims& cd, const uint8_t* x, int32_t xzp, bool xNhwc, bool yNhwc,
             int32_t* acc) {
  const host::ConvGeom& g = cd.g;
  const int64_t C = cd.C, M = cd.M, P = cd.P, imgSize = g.imgSize;
  auto xAt = [&](int64_t n, int64_t ch, int64_t at) {
    return int32_t(x[xNhwc ? (n * imgSize + at) * C + ch : (n * C + ch) * imgSize + at]) - xzp;
  };
  const int64_t work = int64_t(s.restTaps.size()) * cd.N * P;
  if(yNhwc && xNhwc && g.identity()) {  // 1x1, stride 1, no padding: x's position is y's
    host::parallelFor(cd.N * P, work, [&](int64_t b, int64_t e) {
      for(int64_t np = b; np < e; ++np) {
        int32_t* __restrict row = acc + np * M;
        const uint8_t* xp = x + np * C;
        for(const RestTap& t : s.restTaps) row[t.m] += t.w * (int32_t(xp[t.ch]) - xzp);
      }
    });
    return;
  }
  if(yNhwc) {
    host::parallelFor(cd.N * P, work, [&](int64_t b, int64_t e) {
      for(int64_t np = b; np < e; ++np) {
        const int64_t n = np / P, op = np % P;
        const int64_t o2 = op % g.pos[2], o1 = (op / g.pos[2]) % g.pos[1], o0 = op / (g.pos[2] * g.pos[1]);
        const int64_t b0 = o0 * g.s[0], b1 = o1 * g.s[1], b2 = o2 * g.s[2];
        int32_t* __restrict row = acc + np * M;
        bool inside = xNhwc;  // every tap of the rest inside x: no checks
        const int64_t base[3] = {b0, b1, b2};
        for(int d = 0; d < 3 && inside; ++d)
          inside = base[d] + s.restLo[d] >= 0 && base[d] + s.restHi[d] < g.img[d];
        if(inside) {
          const uint8_t* xw = x + (n * imgSize + (b0 * g.img[1] + b1) * g.img[2] + b2) * C;
          for(const RestTap& t : s.restTaps) row[t.m] += t.w * (int32_t(xw[t.dx]) - xzp);
          continue;
        }
        for(const RestTap& t : s.restTaps) {
          const int64_t i0 = b0 + t.off[0], i1 = b1 + t.off[1], i2 = b2 + t.off[2];
          if(i0 < 0 || i0 >= g.img[0] || i1 < 0 || i1 >= g.img[1] || i2 < 0 || i2 >= g.img[2]) continue;
          row[t.m] += t.w * xAt(n, t.ch, (i0 * g.img[1] + i1) * g.img[2] + i2);
        }
      }
    });
    return;
  }
  host::parallelFor(M, work, [&](int64_t mb, int64_t me) {
    for(size_t r = s.restStart[size_t(mb)]; r < s.restStart[size_t(me)]; ++r) {
      const RestTap& t = s.restTaps[r];
      for(int64_t n = 0; n < cd.N; ++n) {
        int32_t* row = acc + (n * M + t.m) * P;
        for(int64_t o0 = 0; o0 < g.pos[0]; ++o0) {
          const int64_t i0 = o0 * g.s[0] + t.off[0];
          if(i0 < 0 || i0 >= g.img[0]) continue;
          for(int64_t o1 = 0; o1 < g.pos[1]; ++o1) {
            const int64_t i1 = o1 * g.s[1] + t.off[1];
            if(i1 < 0 || i1 >= g.img[1]) continue;
            for(int64_t o2 = 0; o2 < g.pos[2]; ++o2) {
              const int64_t i2 = o2 * g.s[2] + t.off[2];
              if(i2 < 0 || i2 >= g.img[2]) continue;
              row[(o0 * g.pos[1] + o1) * g.pos[2] + o2] += t.w * xAt(n, t.ch, (i0 * g.img[1] + i1) * g.img[2] + i2);
            }
          }
        }
      }
    }
  });
}

// The int8 path: true when oneDNN ran it. Without VNNI, weights beyond
// [-64, 64] go through int8PairSplit: oneDNN gives the int32 sums of the
// clamped weights, addRest the rest, and the requantization is the exact
// path's (float64 product).
bool qconvDnnl(KernelCtx& c, QConvState& s, const host::ConvDims& cd, int nd) {
  const bool xNhwc = c.attrs.i("x_nhwc") != 0, yNhwc = c.attrs.i("y_nhwc") != 0;
  if(!s.triedDnnl) {
    s.triedDnnl = true;
    if(s.wMin >= -128 && s.wMax <= 127) {
      std::vector<int8_t> w8;
      if(!host::dnnlInt8Exact(s.wMaxAbs) && cd.Cg != 1) {
        host::Int8PairSplit sp = host::int8PairSplit(s.wq.data(), cd.M, cd.Cg, cd.g.kSize, s.wq.size() / 256);
        // Each entry of the rest is a scalar multiply-add per output
        // position, a few hundred times the int8 kernel's cost per
        // product: past 1 in 256 weights the float path is faster (ResNet-50
        // and MobileNetV2 quantized per tensor, Zen 3; their layers' rest
        // is a median 1 in 770 and 1 in 280 of the weights).
        if(!sp.tooMany) {
          w8 = std::move(sp.main);
          const host::ConvGeom& g = cd.g;
          s.restStart.assign(size_t(cd.M) + 1, 0);
          for(int d = 0; d < 3; ++d) s.restLo[d] = s.restHi[d] = 0;
          for(const host::Int8PairSplit::Entry& e : sp.rest) {
            RestTap t;
            t.m = e.outer;
            t.ch = (e.outer / cd.Mg) * cd.Cg + e.l;
            t.w = e.w;
            const int64_t k[3] = {e.inner / (g.k[2] * g.k[1]), (e.inner / g.k[2]) % g.k[1], e.inner % g.k[2]};
            for(int d = 0; d < 3; ++d) t.off[d] = k[d] * g.d[d] - g.pb[d];
            t.dx = ((t.off[0] * g.img[1] + t.off[1]) * g.img[2] + t.off[2]) * cd.C + t.ch;
            for(int d = 0; d < 3; ++d) {
              s.restLo[d] = std::min(s.restLo[d], t.off[d]);
              s.restHi[d] = std::max(s.restHi[d], t.off[d]);
            }
            s.restTaps.push_back(t);
            ++s.restStart[size_t(e.outer) + 1];
          }
          for(size_t m = 0; m < size_t(cd.M); ++m) s.restStart[m + 1] += s.restStart[m];
        }
      } else {
        w8.assign(s.wq.begin(), s.wq.end());
      }
      std::vector<int32_t> b32;
      if(c.in.size() > kBias) b32.assign(c.in[kBias]->data<int32_t>(), c.in[kBias]->data<int32_t>() + cd.M);
      // x's zero point as oneDNN sees it (int8 x runs as uint8: + 128)
      const int64_t xzpU8 = intAt(*c.in[kXZp], 0) + (c.in[kX]->type() == Type::int8 ? 128 : 0);
      const bool xZeroFixed = c.node.child(kXZp)->kind() == NodeKind::Constant && xzpU8 == 0;
      if(!w8.empty())
        s.dnnl = host::dnnlQConvPrepare(cd, nd, w8.data(), b32.empty() ? nullptr : b32.data(), s.S,
                                        c.out.type() == Type::int8, xNhwc, yNhwc, !s.restTaps.empty(), xZeroFixed);
    }
  }
  if(!s.dnnl) return false;
  int64_t xzp = intAt(*c.in[kXZp], 0);
  const uint8_t* x = static_cast<const uint8_t*>(c.in[kX]->raw());
  Tensor shifted;
  if(c.in[kX]->type() == Type::int8) {  // as u8: x + 128 with the zero point + 128
    shifted = c.scratch(c.in[kX]->shape(), Type::uint8);
    toUnsigned(c.in[kX]->data<int8_t>(), shifted->data<uint8_t>(), c.in[kX]->size());
    x = shifted->data<uint8_t>();
    xzp += 128;
  }
  if(s.restTaps.empty()) {
    host::dnnlQConvRun(*s.dnnl, x, int32_t(xzp), c.out.raw(), int32_t(intAt(*c.in[kYZp], 0)));
    return true;
  }
  Tensor accT = c.scratch(c.out.shape(), Type::int32);
  int32_t* acc = accT->data<int32_t>();
  host::dnnlQConvRun(*s.dnnl, x, int32_t(xzp), acc, 0);
  addRest(s, cd, x, int32_t(xzp), xNhwc, yNhwc, acc);
  dispatch8(c.out.type(), [&](auto tag) {
    using Y = typename decltype(tag)::type;
    const int64_t yzp = intAt(*c.in[kYZp], 0);
    if(yNhwc) requantizeNhwc(acc, c.out.data<Y>(), s.S, yzp, cd.N, cd.M, cd.P);
    else requantize(acc, c.out.data<Y>(), s.S, yzp, cd.N, cd.M, cd.P);
  });
  return true;
}

// The float32 path: true when the float convolution ran through oneDNN.
bool qconvFloat(KernelCtx& c, QConvState& s, const host::ConvDims& cd, int nd, const TensorBase& x, TensorBase& y,
                bool xNhwc, bool yNhwc) {
  if(s.wf.empty()) {
    s.wf.assign(s.wq.begin(), s.wq.end());
    if(c.in.size() > kBias) {
      const int32_t* b = c.in[kBias]->data<int32_t>();
      s.bf.assign(b, b + cd.M);
    }
  }
  Tensor xfT = c.scratch(x.shape(), Type::float32), accT = c.scratch(y.shape(), Type::float32);
  float* xf = xfT->data<float>();
  const float xzp = float(intAt(*c.in[kXZp], 0));
  dispatch8(x.type(), [&](auto tag) {
    using X = typename decltype(tag)::type;
    const X* from = x.data<X>();
    host::parallelFor(x.size(), x.size(), [&](int64_t b, int64_t e) {
      for(int64_t i = b; i < e; ++i) xf[i] = float(from[i]) - xzp;
    });
  });
  // Channels-last x and y stay so: the conversion above does not see the
  // layout, oneDNN's float kernels take NHWC, the requantization below
  // reads it.
  host::ConvLayouts lay;
  lay.x = xNhwc ? 1 : 0;
  lay.y = yNhwc ? 1 : 0;
  if(!host::dnnlConvForward(cd, nd, xf, s.wf.data(), s.bf.empty() ? nullptr : s.bf.data(), accT->data<float>(),
                            nullptr, &s.slot, lay))
    return false;
  dispatch8(y.type(), [&](auto tag) {
    using Y = typename decltype(tag)::type;
    if(yNhwc) requantizeNhwc(accT->data<float>(), y.data<Y>(), s.S, intAt(*c.in[kYZp], 0), cd.N, cd.M, cd.P);
    else requantize(accT->data<float>(), y.data<Y>(), s.S, intAt(*c.in[kYZp], 0), cd.N, cd.M, cd.P);
  });
  return true;
}

void qconvKernel(KernelCtx& c) {
  const host::ConvDims cd = ops::convDims(c.in[kX]->shape(), c.out.shape(), host::spatialDims(c.in[kW]->shape()),
                                          c.attrs);
  const int nd = c.out.shape().rank() - 2;
  if(c.out.size() == 0) return;
  // Kept on the node while W is a constant; rebuilt per run otherwise.
  std::shared_ptr<void>& slot = c.node.kernelState();
  const bool keep = c.node.child(kW)->kind() == NodeKind::Constant;
  std::shared_ptr<QConvState> st = keep ? std::static_pointer_cast<QConvState>(slot) : nullptr;
  if(!st || !current(*st, c)) {
    st = std::make_shared<QConvState>();
    build(*st, c);
    if(keep) slot = st;
  }
  const bool dnnl = host::dnnlEnabled() && cd.N * cd.C * cd.g.imgSize > 0;
  if(dnnl && qconvDnnl(c, *st, cd, nd)) return;
  const bool xNhwc = c.attrs.i("x_nhwc") != 0, yNhwc = c.attrs.i("y_nhwc") != 0;
  if(dnnl && qconvFloat(c, *st, cd, nd, *c.in[kX], c.out, xNhwc, yNhwc)) return;
  // The exact loops read and write plain NCHW: channels-last tensors are
  // transposed around them.
  Tensor xPlain, yPlain;
  const TensorBase* x = c.in[kX];
  TensorBase* y = &c.out;
  if(xNhwc) {
    xPlain = c.scratch(x->shape(), x->type());
    channelsLast(*x, *xPlain, false);
    x = xPlain.get();
  }
  if(yNhwc) {
    yPlain = c.scratch(y->shape(), y->type());
    y = yPlain.get();
  }
  std::vector<int64_t> acc;
  convExact(c, *st, cd, *x, acc);
  dispatch8(y->type(), [&](auto tag) {
    using Y = typename decltype(tag)::type;
    requantize(acc.data(), y->data<Y>(), st->S, intAt(*c.in[kYZp], 0), cd.N, cd.M, cd.P);
  });
  if(yNhwc) channelsLast(*yPlain, c.out, true);
}

void inferQConv(InferCtx& c) {
  c.check(is8Bit(c.typeOf(kX)), "x has element type ", c.typeOf(kX), "; QLinearConv takes uint8 or int8");
  c.check(is8Bit(c.typeOf(kW)), "w has element type ", c.typeOf(kW), "; QLinearConv takes uint8 or int8");
  c.check(is8Bit(c.typeOf(kYZp)), "y_zero_point has element type ", c.typeOf(kYZp), "; it must be uint8 or int8");
  c.check(c.typeOf(kXZp) == c.typeOf(kX), "x_zero_point has element type ", c.typeOf(kXZp), " but x has ",
          c.typeOf(kX));
  c.check(c.typeOf(kWZp) == c.typeOf(kW), "w_zero_point has element type ", c.typeOf(kWZp), " but w has ",
          c.typeOf(kW));
  for(size_t i : {kXScale, kWScale, kYScale})
    c.check(c.typeOf(i) == Type::float32, i == kXScale ? "x_scale" : i == kWScale ? "w_scale" : "y_scale",
            " has element type ", c.typeOf(i), " but must be float32");
  const Shape& xs = c.shapeOf(kX);
  const Shape& ws = c.shapeOf(kW);
  c.shape = ops::inferConvWindow(c, xs, ws);
  const int64_t M = ws[0];
  for(size_t i : {kXScale, kXZp, kYScale, kYZp})
    c.check(c.shapeOf(i).elements() == 1 && c.shapeOf(i).rank() <= 1, "input ", i, " of shape ", c.shapeOf(i),
            " must be a scalar (per-tensor quantization of x and y)");
  for(size_t i : {kWScale, kWZp}) {
    const Shape& s = c.shapeOf(i);
    c.check(s.rank() <= 1 && (s.elements() == 1 || s.elements() == M), i == kWScale ? "w_scale" : "w_zero_point",
            " of shape ", s, " must be a scalar or have one entry per output channel (", M, ")");
  }
  if(c.n() > kBias) {
    c.check(c.typeOf(kBias) == Type::int32, "B has element type ", c.typeOf(kBias), " but must be int32");
    c.check(c.shapeOf(kBias) == Shape({M}), "B of shape ", c.shapeOf(kBias), " must be [", M, "]");
  }
  c.type = c.typeOf(kYZp);
  for(const char* a : {"x_nhwc", "y_nhwc"}) {
    const int64_t v = c.attrs.i(a);
    c.check(v == 0 || v == 1, a, " must be 0 or 1, got ", v);
    c.check(v == 0 || xs.rank() == 4, a, " (channels-last) needs a 2-D convolution");
  }
}

// QLinearConv 10: its inputs as they are; auto_pad resolved to pads. A
// missing zero point is 0 of its tensor's type (y's: x's type).
void importQLinearConv(OnnxImportCtx& c) {
  Expr x = c.input(kX), w = c.input(kW);
  checkSpatialInput(c, x);
  c.check(is8Bit(x->value_type()) && is8Bit(w->value_type()), "x (", x->value_type(), ") and w (", w->value_type(),
          ") must be uint8 or int8");
  std::vector<Expr> in(kBias);
  for(size_t i = 0; i < kBias; ++i) in[i] = optionalInput(c, i);
  c.check(in[kXScale] && in[kWScale] && in[kYScale], "x_scale, w_scale and y_scale are required");
  if(!in[kXZp]) in[kXZp] = c.graph().scalar(0, x->value_type());
  if(!in[kWZp]) in[kWZp] = c.graph().scalar(0, w->value_type());
  if(!in[kYZp]) in[kYZp] = c.graph().scalar(0, x->value_type());
  c.setOutput(0, qlinear_conv(in[kX], in[kXScale], in[kXZp], in[kW], in[kWScale], in[kWZp], in[kYScale], in[kYZp],
                              optionalInput(c, kBias), importConvOptions(c, x, w)));
}

void exportQLinearConv(OnnxExportCtx& c) {
  const Attrs a = c.attrs();
  ONYX_ASSERT(!a.i("x_nhwc") && !a.i("y_nhwc"), "qlinear_conv: channels-last tensors in a graph being exported (the "
                                                "int8_layout pass runs on CPU inference graphs only)");
  c.emit("QLinearConv", c.inputs(), {c.output()}, ops::convOnnxAttrs(c, c.inputShape(kX), c.inputShape(kW)));
}

}  // namespace

[[maybe_unused]] static OpDef& kQLinearConvDef = kQLinearConv
    .doc("y = saturate(round((conv(x - x_zero_point, w - w_zero_point) + B) * x_scale * w_scale / y_scale) + "
         "y_zero_point): ONNX QLinearConv's inputs (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, "
         "y_zero_point, B); uint8/int8 x, w and y, int32 B, w_scale and w_zero_point per tensor or per output "
         "channel; conv's attributes; x_nhwc, y_nhwc 1: that tensor is stored channels-last (set by the "
         "int8_layout pass between int8 ops)")
    .inputs(8, 9)
    .attr("strides", IntList{})
    .attr("dilations", IntList{})
    .attr("pads", IntList{})
    .attr("group", int64_t(1))
    .attr("x_nhwc", int64_t(0))
    .attr("y_nhwc", int64_t(0))
    .infer(inferQConv)
    .cpu(qconvKernel)
    .notDifferentiable("integer output (quantized models are run, not trained)")
    .gpuOnHost("no GPU form yet: int8 convolution runs on the CPU kernels")
    .onnx("QLinearConv", 10)
    .importer(importQLinearConv)
    .exporter(exportQLinearConv);

Expr qlinear_conv(Expr x, Expr xScale, Expr xZeroPoint, Expr w, Expr wScale, Expr wZeroPoint, Expr yScale,
                  Expr yZeroPoint, Expr b, const ConvOptions& o) {
  std::vector<Expr> in{x, xScale, xZeroPoint, w, wScale, wZeroPoint, yScale, yZeroPoint};
  if(b) in.push_back(b);
  return x->graph()->make(kQLinearConv, in,
                          {{"strides", attr(o.strides)}, {"dilations", attr(o.dilations)}, {"pads", attr(o.pads)},
                           {"group", attr(o.group)}});
}

// ----------------------------------------------------------- matmul_integer
//
// y [.., M, N] = (A [.., M, K] - a_zp) (B [K, N] - b_zp[n]) in int32, A and B
// 8-bit. The products of 8-bit differences are exact in float32 and so are
// their sums while below 2^24. Every partial sum of row a of A and column b
// of B (in whatever order a GEMM adds) is at most sum |a_k| |b_k|, which is
// at most each of max|a| * sum|b|, sum|a| * max|b| and |a|_2 |b|_2
// (Cauchy-Schwarz); the kernel takes the smallest of the three over this
// run's rows and B's columns (B's kept with it when B is a constant) and
// runs float32 GEMM (OpenBLAS) when it is below 2^24, float64 GEMM (exact
// for any K below 2^37) otherwise. Where oneDNN's int8 matmul sums exactly
// (VNNI, or |B - b_zp| <= 64: reduce_range), that runs instead.

namespace {

struct MatMulIntState {
  const void* b = nullptr;
  std::vector<int64_t> zp;
  std::vector<float> bf;  // B - b_zp, [K, N]
  std::vector<double> bd;  // the same in float64, made when first needed
  double maxAbs = 0, maxColumnSum = 0, maxColumnNorm = 0;
  bool fitsInt8 = true;  // every B - b_zp in [-128, 127]
  // oneDNN's int8 matmul, by row count and thread count (made when exact on
  // this CPU; oneDNN splits the work for the threads it was made for: one
  // made for 1 thread stays on one)
  struct Made {
    int64_t rows;
    int threads;
    std::shared_ptr<host::DnnlQMatMul> q, q2;  // q2: w8b's product, added (none without w8b)
  };
  std::vector<Made> dnnl;
  // How oneDNN gets B - b_zp (decided when first needed): as it is (exact
  // with VNNI or within [-64, 64]); without VNNI, split (int8Weights: the
  // clamped weights, the sparse rest then added by addMatMulRest), or as
  // the sum of two matrices within [-64, 64] whose products oneDNN adds
  // (dense); none: oneDNN does not run it.
  // wide: host::int16Gemm instead of oneDNN (where it would need dense or
  // could not take B).
  enum class Int8 { untried, none, plain, split, dense, wide } int8 = Int8::untried;
  std::vector<host::Int8PairSplit::Entry> rest;  // split: outer 0, l = k, inner = n
  // B - b_zp in int16 for host::int16Gemm (made when first needed)
  host::Int16Panels b16;
};

// A product of at most kSmallRows rows (a CNN's classifier at batch 1):
// oneDNN 2.6's int8 matmul took 0.54 ms for 1 x 1280 by 1280 x 1000 on one
// Zen 3 core, a pass over B's 1.3 MB; host::int16Gemm (exact for any 8-bit
// values) is a GEMV over its panels there.
constexpr int64_t kSmallRows = 2;

bool smallRowsFit(int64_t rows, int64_t K) { return rows <= kSmallRows && K > 0 && host::int16GemmFits(K); }

// Without VNNI, B - b_zp beyond [-64, 64] with more than the split's rest
// (onnxruntime's default quantize_dynamic of random-weight models), or
// beyond int8: host::int16Gemm, exact, where oneDNN needs two int8 products
// (or the float path runs). ONYX_INT16_GEMM=0 leaves them to those (for
// comparing).
bool int16ForFullRange(int64_t K) {
  static const bool on = [] {
    const char* v = std::getenv("ONYX_INT16_GEMM");
    return !(v && std::string(v) == "0");
  }();
  return on && host::int16GemmFits(K);
}

// y [rows, N] (int32) = (A - a_zp) . (B - b_zp) through host::int16Gemm.
void int16Product(MatMulIntState& st, const TensorBase& A, int64_t azp, int64_t rows, int64_t K, int64_t N,
                  int32_t* y) {
  if(st.b16.empty()) st.b16 = host::Int16Panels::pack(st.bf.data(), K, N);
  if(A.type() == Type::uint8) host::int16Gemm(A.data<uint8_t>(), K, int32_t(azp), rows, st.b16, y, N);
  else host::int16Gemm(A.data<int8_t>(), K, int32_t(azp), rows, st.b16, y, N);
}

// The rest of MatMulIntState's split added to y [rows, N] (int32): y[r, n]
// += w * (a[r, k] - azp) per entry.
void addMatMulRest(const MatMulIntState& st, const uint8_t* a, int32_t azp, int64_t rows, int64_t K, int64_t N,
                   int32_t* y) {
  host::parallelFor(rows, rows * int64_t(st.rest.size()), [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      const uint8_t* ar = a + r * K;
      int32_t* __restrict yr = y + r * N;
      for(const host::Int8PairSplit::Entry& t : st.rest) yr[t.inner] += t.w * (int32_t(ar[t.l]) - azp);
    }
  });
}

void buildMatMulInt(MatMulIntState& s, const TensorBase& B, const TensorBase* bz) {
  const int64_t K = B.shape()[0], N = B.shape()[1];
  s.b = B.raw();
  s.zp.assign(size_t(bz ? bz->size() : 1), 0);
  for(size_t i = 0; bz && i < s.zp.size(); ++i) s.zp[i] = intAt(*bz, int64_t(i));
  s.bf.resize(size_t(K * N));
  std::vector<double> col(size_t(N), 0), sq(size_t(N), 0);
  s.maxAbs = 0;
  s.fitsInt8 = true;
  for(int64_t k = 0; k < K; ++k)
    for(int64_t n = 0; n < N; ++n) {
      const int64_t v = intAt(B, k * N + n) - s.zp[s.zp.size() == 1 ? 0 : size_t(n)];
      const double m = double(v < 0 ? -v : v);
      s.bf[size_t(k * N + n)] = float(v);
      col[size_t(n)] += m;
      sq[size_t(n)] += m * m;
      s.maxAbs = std::max(s.maxAbs, m);
      s.fitsInt8 = s.fitsInt8 && v >= -128 && v <= 127;
    }
  s.maxColumnSum = s.maxColumnNorm = 0;
  for(int64_t n = 0; n < N; ++n) {
    s.maxColumnSum = std::max(s.maxColumnSum, col[size_t(n)]);
    s.maxColumnNorm = std::max(s.maxColumnNorm, std::sqrt(sq[size_t(n)]));
  }
  s.bd.clear();
}

// What matmul_integer_to_float does after the integer product: y [rows, N]
// = float(sum) * scale + bias, scale[n] one value or one per column (the
// float32 product a_scale * b_scale), bias [N] or null.
struct ToFloat {
  const float* scale = nullptr;
  bool perColumn = false;
  const float* bias = nullptr;
  float* y = nullptr;
};

// One row; an AVX2 build beside the baseline one (target avx2 without fma:
// the multiply and the add round separately, as the graph's mul and add).
__attribute__((always_inline)) inline void toFloatRowBody(const int32_t* __restrict a, float* __restrict y,
                                                          int64_t N, const float* __restrict s, bool perColumn,
                                                          const float* __restrict bias) {
  if(perColumn && bias) {
    for(int64_t n = 0; n < N; ++n) y[n] = float(a[n]) * s[n] + bias[n];
  } else if(perColumn) {
    for(int64_t n = 0; n < N; ++n) y[n] = float(a[n]) * s[n];
  } else if(bias) {
    const float s0 = s[0];
    for(int64_t n = 0; n < N; ++n) y[n] = float(a[n]) * s0 + bias[n];
  } else {
    const float s0 = s[0];
    for(int64_t n = 0; n < N; ++n) y[n] = float(a[n]) * s0;
  }
}
ONYX_TARGET_AVX2 void toFloatRowAvx2(const int32_t* a, float* y, int64_t N, const float* s, bool perColumn,
                                     const float* bias) {
  toFloatRowBody(a, y, N, s, perColumn, bias);
}
void toFloatRowBase(const int32_t* a, float* y, int64_t N, const float* s, bool perColumn, const float* bias) {
  toFloatRowBody(a, y, N, s, perColumn, bias);
}

void toFloatEpilogue(const int32_t* acc, int64_t rows, int64_t N, const ToFloat& f) {
  const bool avx2 = host::vec::bestIsa() != host::vec::Isa::scalar;
  host::parallelFor(rows, rows * N, [&](int64_t b, int64_t e) {
    for(int64_t r = b; r < e; ++r) {
      if(avx2) toFloatRowAvx2(acc + r * N, f.y + r * N, N, f.scale, f.perColumn, f.bias);
      else toFloatRowBase(acc + r * N, f.y + r * N, N, f.scale, f.perColumn, f.bias);
    }
  });
}

// B - b_zp (all within int8) as oneDNN's weights, by st.int8 (untried:
// decides, and returns, how): w8 as it is (plain), w8 clamped with the
// rest listed in *rest when given (split, while the rest is at most 1 in
// 256 weights), or w8 + w8b (dense).
MatMulIntState::Int8 int8Weights(const MatMulIntState& st, int64_t K, int64_t N, std::vector<int8_t>& w8,
                                 std::vector<int8_t>& w8b, std::vector<host::Int8PairSplit::Entry>* rest) {
  using Int8 = MatMulIntState::Int8;
  if(st.int8 == Int8::plain) {
    w8.assign(st.bf.begin(), st.bf.end());
    return Int8::plain;
  }
  std::vector<int32_t> w32(st.bf.begin(), st.bf.end());
  if(st.int8 != Int8::dense) {
    host::Int8PairSplit sp = host::int8PairSplit(w32.data(), 1, K, N, size_t(K * N) / 256);
    if(!sp.tooMany) {
      w8 = std::move(sp.main);
      if(rest) *rest = std::move(sp.rest);
      return Int8::split;
    }
  }
  w8.resize(w32.size());
  w8b.resize(w32.size());
  for(size_t i = 0; i < w32.size(); ++i) {
    const int32_t m = std::min(64, std::max(-64, w32[i]));
    w8[i] = int8_t(m);
    w8b[i] = int8_t(w32[i] - m);
  }
  return Int8::dense;
}

// (A - az) . (B - bz) for matmul_integer's form into y (int32), or, with f,
// on to float32 through f's epilogue (y then unused).
void integerProduct(KernelCtx& c, const TensorBase& A, const TensorBase& B, const TensorBase* az,
                    const TensorBase* bz, int64_t bInput, int64_t bzInput, int32_t* y, const ToFloat* f) {
  const int64_t K = B.shape()[0], N = B.shape()[1], rows = K ? A.size() / K : 0;
  if(rows * N == 0) return;
  Tensor accScratch;
  auto intOut = [&]() -> int32_t* {
    if(!f) return y;
    accScratch = c.scratch(Shape({rows, N}), Type::int32);
    return accScratch->data<int32_t>();
  };
  if(K == 0) {  // empty sums
    int32_t* acc = intOut();
    std::fill(acc, acc + rows * N, 0);
    if(f) toFloatEpilogue(acc, rows, N, *f);
    return;
  }
  std::shared_ptr<void>& slot = c.node.kernelState();
  const bool keep = c.node.child(size_t(bInput))->kind() == NodeKind::Constant &&
                    (!bz || c.node.child(size_t(bzInput))->kind() == NodeKind::Constant);
  std::shared_ptr<MatMulIntState> st = keep ? std::static_pointer_cast<MatMulIntState>(slot) : nullptr;
  if(!st || st->b != B.raw()) {
    st = std::make_shared<MatMulIntState>();
    buildMatMulInt(*st, B, bz);
    if(keep) slot = st;
  }
  int64_t azp = az ? intAt(*az, 0) : 0;
  // int8 through oneDNN where it sums exactly (see qlinear_conv); s8 A runs
  // as u8 (A + 128, zero point + 128). Without VNNI, full-range weights are
  // split (host::int8PairSplit): oneDNN sums the clamped weights, the rest
  // is added after, while it is at most 1 in 256 weights; past that, B is
  // the sum of two matrices within [-64, 64] and oneDNN adds both products.
  using Int8 = MatMulIntState::Int8;
  if(host::dnnlEnabled() && st->int8 == Int8::untried) {
    st->int8 = Int8::none;
    if(st->fitsInt8 && host::dnnlInt8Exact(int(st->maxAbs))) {
      st->int8 = Int8::plain;
    } else if(st->fitsInt8) {
      std::vector<int8_t> w8, w8b;
      st->int8 = int8Weights(*st, K, N, w8, w8b, &st->rest);
    }
    // Where oneDNN would need two int8 products (or cannot take B - b_zp),
    // host::int16Gemm's one exact product instead (BERT-base quantized
    // dynamically, Zen 3: 128 x 768 by 768 x 3072 in 7.4-9.3 ms against
    // 10.5-12.9 ms for the two int8 products).
    if((st->int8 == Int8::dense || st->int8 == Int8::none) && int16ForFullRange(K)) st->int8 = Int8::wide;
  }
  if(smallRowsFit(rows, K) || st->int8 == Int8::wide) {
    int32_t* acc = intOut();
    int16Product(*st, A, azp, rows, K, N, acc);
    if(f) toFloatEpilogue(acc, rows, N, *f);
    return;
  }
  if(host::dnnlEnabled() && st->int8 != Int8::none) {
    std::shared_ptr<host::DnnlQMatMul> q, q2;
    const int threads = host::numThreads();
    for(auto& e : st->dnnl)
      if(e.rows == rows && e.threads == threads) {
        q = e.q;
        q2 = e.q2;
      }
    if(!q) {
      // The int8 weights are made again per shape (a pass like oneDNN's
      // reorder of them) rather than kept beside bf.
      std::vector<int8_t> w8, w8b;
      int8Weights(*st, K, N, w8, w8b, nullptr);
      q = host::dnnlQMatMulPrepare(rows, K, N, w8.data());
      if(q && !w8b.empty()) {
        q2 = host::dnnlQMatMulPrepare(rows, K, N, w8b.data(), true);
        if(!q2) q.reset();
      }
      if(q) st->dnnl.push_back({rows, threads, q, q2});
    }
    if(q) {
      const uint8_t* a8 = static_cast<const uint8_t*>(A.raw());
      Tensor shifted;
      if(A.type() == Type::int8) {
        shifted = c.scratch(A.shape(), Type::uint8);
        toUnsigned(A.data<int8_t>(), shifted->data<uint8_t>(), A.size());
        a8 = shifted->data<uint8_t>();
        azp += 128;
      }
      int32_t* acc = intOut();
      host::dnnlQMatMulRun(*q, a8, int32_t(azp), acc);
      if(q2) host::dnnlQMatMulRun(*q2, a8, int32_t(azp), acc);
      if(!st->rest.empty()) addMatMulRest(*st, a8, int32_t(azp), rows, K, N, acc);
      if(f) toFloatEpilogue(acc, rows, N, *f);
      return;
    }
  }
  int32_t* acc32 = intOut();
  Tensor af = c.scratch(Shape({rows, K}), Type::float32);
  float* a = af->data<float>();
  // This run's rows: max |a|, max sum |a|, max |a|_2.
  double maxA = 0, maxRowSum = 0, maxRowNorm = 0;
  dispatch8(A.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = A.data<T>();
    for(int64_t r = 0; r < rows; ++r) {
      double sum = 0, sq = 0;
      int64_t most = 0;
      for(int64_t k = r * K; k < (r + 1) * K; ++k) {
        const int64_t v = int64_t(p[k]) - azp;
        const int64_t m = v < 0 ? -v : v;
        a[k] = float(v);
        sum += double(m);
        sq += double(m * m);
        most = m > most ? m : most;
      }
      maxA = std::max(maxA, double(most));
      maxRowSum = std::max(maxRowSum, sum);
      maxRowNorm = std::max(maxRowNorm, std::sqrt(sq));
    }
  });
  const double bound = std::min({maxA * st->maxColumnSum, maxRowSum * st->maxAbs, maxRowNorm * st->maxColumnNorm});
  // A square root may round down by an ulp: a margin far above that.
  if(bound * (1 + 1e-9) < double(int64_t(1) << 24)) {
    Tensor accT = c.scratch(Shape({rows, N}), Type::float32);
    float* acc = accT->data<float>();
    host::gemm<float>(false, false, rows, N, K, 1.0, a, K, st->bf.data(), N, 0.0, acc, N);
    for(int64_t i = 0; i < rows * N; ++i) acc32[i] = int32_t(acc[i]);
  } else {
    if(st->bd.empty()) st->bd.assign(st->bf.begin(), st->bf.end());
    std::vector<double> ad(a, a + rows * K), acc(size_t(rows * N));
    host::gemm<double>(false, false, rows, N, K, 1.0, ad.data(), K, st->bd.data(), N, 0.0, acc.data(), N);
    for(int64_t i = 0; i < rows * N; ++i) acc32[i] = int32_t(acc[size_t(i)]);
  }
  if(f) toFloatEpilogue(acc32, rows, N, *f);
}

void matmulIntegerKernel(KernelCtx& c) {
  const TensorBase* az = c.in.size() > 2 ? c.in[2] : nullptr;
  const TensorBase* bz = c.in.size() > 3 ? c.in[3] : nullptr;
  integerProduct(c, *c.in[0], *c.in[1], az, bz, 1, 3, c.out.data<int32_t>(), nullptr);
}

// matmul_integer_to_float's inputs, as onnxruntime's MatMulIntegerToFloat.
enum QmIn : size_t { kA = 0, kB, kAScale, kBScale, kAZp, kBZp, kMmBias };

void matmulIntegerToFloatKernel(KernelCtx& c) {
  const TensorBase& bs = *c.in[kBScale];
  const int64_t N = c.in[kB]->shape()[1];
  ToFloat f;
  f.perColumn = bs.size() > 1;
  // a_scale * b_scale in float32, as the graph it replaces computes it
  std::vector<float> scale(size_t(f.perColumn ? N : 1));
  const float as = c.in[kAScale]->data<float>()[0];
  for(size_t n = 0; n < scale.size(); ++n) scale[n] = as * bs.data<float>()[n];
  f.scale = scale.data();
  f.bias = c.in.size() > kMmBias ? c.in[kMmBias]->data<float>() : nullptr;
  f.y = c.out.data<float>();
  integerProduct(c, *c.in[kA], *c.in[kB], c.in[kAZp], c.in[kBZp], kB, kBZp, nullptr, &f);
}

// The shape of (A [.., M, K]) . (B [K, N]) and matmul_integer's checks of
// A, B and the zero points at `azp`, `bzp` (-1: none).
Shape inferIntegerProduct(InferCtx& c, int azp, int bzp) {
  c.check(is8Bit(c.typeOf(0)) && is8Bit(c.typeOf(1)), "A (", c.typeOf(0), ") and B (", c.typeOf(1),
          ") must be uint8 or int8");
  const Shape& a = c.shapeOf(0);
  const Shape& b = c.shapeOf(1);
  c.check(a.rank() >= 2 && b.rank() == 2 && a[-1] == b[0], "A of shape ", a, " and B of shape ", b,
          " must be [.., M, K] and [K, N]");
  if(azp >= 0) {
    c.check(c.typeOf(azp) == c.typeOf(0) && c.shapeOf(azp).elements() == 1,
            "a_zero_point must be one value of A's type, got ", c.shapeOf(azp), " ", c.typeOf(azp));
  }
  if(bzp >= 0) {
    const int64_t k = c.shapeOf(bzp).elements();
    c.check(c.typeOf(bzp) == c.typeOf(1) && c.shapeOf(bzp).rank() <= 1 && (k == 1 || k == b[1]),
            "b_zero_point must be one value or one per column of B, of B's type, got ", c.shapeOf(bzp), " ",
            c.typeOf(bzp));
  }
  Shape::Dims d = a.dims();
  d.back() = b[1];
  return Shape(d);
}

}  // namespace

[[maybe_unused]] static OpDef& kMatMulIntegerDef = kMatMulInteger
    .doc("y = (A - a_zero_point) . (B - b_zero_point) in int32: A [.., M, K] and B [K, N] uint8 or int8, "
         "a_zero_point one value, b_zero_point one or one per column")
    .inputs(2, 4)
    .infer([](InferCtx& c) {
      c.shape = inferIntegerProduct(c, c.n() > 2 ? 2 : -1, c.n() > 3 ? 3 : -1);
      c.type = Type::int32;
    })
    .cpu(matmulIntegerKernel)
    .notDifferentiable("integer output (quantized models are run, not trained)")
    .onnxExport(10, [](OnnxExportCtx& c) { c.emit("MatMulInteger", c.inputs(), {c.output()}); });

Expr matmul_integer(Expr a, Expr b, Expr aZeroPoint, Expr bZeroPoint) {
  std::vector<Expr> in{a, b};
  if(aZeroPoint || bZeroPoint) in.push_back(aZeroPoint ? aZeroPoint : a->graph()->scalar(0, a->value_type()));
  if(bZeroPoint) in.push_back(bZeroPoint);
  return a->graph()->make(kMatMulInteger, in);
}

// ------------------------------------------------ matmul_integer_to_float
//
// onnxruntime's MatMulIntegerToFloat (com.microsoft), what its optimizer
// makes of MatMulInteger -> Cast -> Mul (-> Add): y = float((A - a_zp) (B -
// b_zp)) * (a_scale * b_scale) + bias, the integer product as matmul_integer
// computes it, then float32 steps in that order (the scale product first,
// as the graph it replaces). Made by the fuse_matmul_integer_float pass from
// quantize_dynamic's graphs and imported from the contrib op. The int32
// product comes from oneDNN's int8 kernel (AMX or VNNI where the CPU has
// them) into scratch memory and the epilogue converts, scales and adds in
// one pass: the same float32 steps as the graph it replaces, so the same
// bits. (oneDNN 2.6 can scale and add itself, but with a scale given per run
// it leaves its AMX kernel for a generic GEMM: 45 -> 75 ms for BERT-base's
// 72 products on one core.)

[[maybe_unused]] static OpDef& kMatMulIntegerToFloatDef = kMatMulIntegerToFloat
    .doc("y = float32((A - a_zero_point) . (B - b_zero_point)) * (a_scale * b_scale) + bias: onnxruntime's "
         "MatMulIntegerToFloat (inputs A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias); A [.., M, K] "
         "and B [K, N] uint8 or int8, a_scale and a_zero_point one value, b_scale and b_zero_point one or one per "
         "column, bias [N] float32 or absent")
    .inputs(6, 7)
    .infer([](InferCtx& c) {
      const Shape y = inferIntegerProduct(c, kAZp, kBZp);
      const int64_t N = c.shapeOf(kB)[1];
      c.check(c.typeOf(kAScale) == Type::float32 && c.shapeOf(kAScale).elements() == 1,
              "a_scale must be one float32 value, got ", c.shapeOf(kAScale), " ", c.typeOf(kAScale));
      const Shape& bs = c.shapeOf(kBScale);
      c.check(c.typeOf(kBScale) == Type::float32 && bs.rank() <= 1 && (bs.elements() == 1 || bs.elements() == N),
              "b_scale must be one float32 value or one per column of B, got ", bs, " ", c.typeOf(kBScale));
      if(c.n() > kMmBias)
        c.check(c.typeOf(kMmBias) == Type::float32 && c.shapeOf(kMmBias) == Shape({N}), "bias must be float32 [",
                N, "], got ", c.shapeOf(kMmBias), " ", c.typeOf(kMmBias));
      c.shape = y;
      c.type = Type::float32;
    })
    .cpu(matmulIntegerToFloatKernel)
    .notDifferentiable("quantized models are run, not trained")
    .noOnnx("no ONNX op in the default domain; exported as ONNX Runtime's com.microsoft MatMulIntegerToFloat")
    .onnxExport(1, [](OnnxExportCtx& c) {
      c.emit("MatMulIntegerToFloat", c.inputs(), {c.output()}, {}, "com.microsoft");
    });

Expr matmul_integer_to_float(Expr a, Expr b, Expr aScale, Expr bScale, Expr aZeroPoint, Expr bZeroPoint, Expr bias) {
  std::vector<Expr> in{a,
                       b,
                       aScale,
                       bScale,
                       aZeroPoint ? aZeroPoint : a->graph()->scalar(0, a->value_type()),
                       bZeroPoint ? bZeroPoint : a->graph()->scalar(0, b->value_type())};
  if(bias) in.push_back(bias);
  return a->graph()->make(kMatMulIntegerToFloat, in);
}

}  // namespace onyx
