// Pooling: max_pool (+ the positions of its maxima), average_pool (+ its
// adjoint), the composites LpPool, the global pools and MaxUnpool import as,
// and the ONNX imports of MaxPool and AveragePool (those of LpPool, the
// global pools and MaxUnpool are in converters/import_pooling.cpp).
//
// Windows are the convolution's (backend/cpu/conv_geom.h): 3 spatial dims
// always, the real 1 to 3 the last ones, so one loop nest serves 1-D, 2-D and
// 3-D.
#include <onyx/ops/pooling.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONYX_POOL_AVX2 1
#endif

#include <onyx/graph/node_initializers.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/kernel_helpers.h>
#include <onyx/ops/movers.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>
#include <onyx/ops/window_helpers.h>

namespace onyx {

using ops::AttrList;
using ops::addList;
using ops::allEqual;
using ops::checkedSpatial;
using ops::checkedSpatialRank;
using ops::emitVia;
using ops::pick;
using ops::requireNumeric;
using ops::spatialOf;
using host::windowCount;

// ---------------------------------------------------------------- helpers

namespace {

std::vector<int64_t> kernelOf(const Attrs& a) { return ops::toVec(a.ints("kernel_shape")); }

}  // namespace

host::PoolGeom ops::poolGeom(const Attrs& a, const Shape& x, const Shape& y) {
  return host::poolGeom(x, y, kernelOf(a), spatialOf(a, x.rank() - 2));
}

namespace {

using Geom = host::ConvGeom;
using host::PoolGeom;
using ops::poolGeom;

// Output shape of a pool over `xs`.
Shape pooledShape(InferCtx& c, const Shape& xs) {
  int nd = checkedSpatialRank(c, xs, "x");
  const IntList& k = c.attrs.ints("kernel_shape");
  c.check(k.size() == size_t(nd), "kernel_shape ", attrToString(k), " must have ", nd, " entries (one per spatial dim)");
  host::Spatial sp = checkedSpatial(c, nd, true);
  bool ceilMode = c.attrs.i("ceil_mode") != 0;
  Shape::Dims out{xs[0], xs[1]};
  for(int i = 0; i < nd; ++i) {
    size_t u = size_t(i);
    // Bounded: the kernels plan per tap (a kernel of 2^32 + 1 taps asked for
    // 32 GB of plan), and the dilated size below stays exact.
    c.check(k[u] >= 1 && k[u] <= (int64_t(1) << 24), "kernel_shape must be in 1..2^24, got ", attrToString(k));
    c.check(sp.pads[u] < (k[u] - 1) * sp.dilations[u] + 1 && sp.pads[u + size_t(nd)] < (k[u] - 1) * sp.dilations[u] + 1,
            "pads ", attrToString(c.attrs.ints("pads")), " must be smaller than the (dilated) kernel");
    int64_t o = windowCount(xs[2 + i], k[u], sp.strides[u], sp.dilations[u], sp.pads[u], sp.pads[u + size_t(nd)],
                            ceilMode);
    c.check(o >= 1, "kernel ", k[u], " (dilation ", sp.dilations[u], ") is larger than spatial dim ", i, " of x (",
            xs[2 + i], ") plus padding");
    out.push_back(o);
  }
  return Shape(out);
}

// Calls f(i0, i1, i2) for the in-range taps of the window at (o0, o1, o2).
template <class F>
inline void forWindow(const Geom& g, int64_t o0, int64_t o1, int64_t o2, F&& f) {
  for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
    if(i0 < 0 || i0 >= g.img[0]) continue;
    for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
      if(i1 < 0 || i1 >= g.img[1]) continue;
      for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        int64_t i2 = o2 * g.s[2] + k2 * g.d[2] - g.pb[2];
        if(i2 < 0 || i2 >= g.img[2]) continue;
        f(i0, i1, i2);
      }
    }
  }
}

// Runs f(plane, o0, o1, o2, outFlat) over every output element, planes in parallel.
template <class F>
void forOutputs(const PoolGeom& p, F&& f) {
  const Geom& g = p.g;
  host::parallelFor(p.planes, p.planes * g.posSize * g.kSize, [&](int64_t b, int64_t e) {
    for(int64_t pl = b; pl < e; ++pl) {
      int64_t o = pl * g.posSize;
      for(int64_t o0 = 0; o0 < g.pos[0]; ++o0)
        for(int64_t o1 = 0; o1 < g.pos[1]; ++o1)
          for(int64_t o2 = 0; o2 < g.pos[2]; ++o2, ++o) f(pl, o0, o1, o2, o);
    }
  });
}

template <class T>
bool greaterOrNan(T v, T best) {
  if constexpr(std::is_floating_point<T>::value) return v > best || (std::isnan(v) && !std::isnan(best));
  else return v > best;
}

// Max of each window and/or the flat index of its (first) maximum.
template <class T>
void maxPoolKernel(const TensorBase& xt, TensorBase* yt, TensorBase* it, const PoolGeom& p, int storageOrder) {
  using C = typename ComputeOf<T>::type;
  const Geom& g = p.g;
  const T* x = xt.data<T>();
  T* y = yt ? yt->data<T>() : nullptr;
  int64_t* ind = it ? it->data<int64_t>() : nullptr;
  forOutputs(p, [&](int64_t pl, int64_t o0, int64_t o1, int64_t o2, int64_t o) {
    const T* xp = x + pl * g.imgSize;
    C best = std::numeric_limits<C>::lowest();
    if constexpr(std::is_floating_point<C>::value) best = -std::numeric_limits<C>::infinity();
    int64_t bi = -1, b0 = 0, b1 = 0, b2 = 0;
    forWindow(g, o0, o1, o2, [&](int64_t i0, int64_t i1, int64_t i2) {
      int64_t idx = (i0 * g.img[1] + i1) * g.img[2] + i2;
      C v = host::load(xp, idx);
      if(bi < 0 || greaterOrNan(v, best)) {
        best = v;
        bi = idx;
        b0 = i0;
        b1 = i1;
        b2 = i2;
      }
    });
    if(y) host::store(y, o, best);
    if(ind) {
      int64_t local = storageOrder == 0 ? bi : b0 + (b1 + b2 * g.img[1]) * g.img[0];
      ind[o] = bi < 0 ? -1 : pl * g.imgSize + local;
    }
  });
}

// Divisor of each window position along one of the 3 axes.
std::vector<int64_t> axisCounts(const Geom& g, int a, bool includePad) {
  std::vector<int64_t> cnt(size_t(g.pos[a]));
  const int64_t lo = includePad ? -g.pb[a] : 0, hi = includePad ? g.img[a] + g.pe[a] : g.img[a];
  for(int64_t o = 0; o < g.pos[a]; ++o) {
    int64_t n = 0;
    for(int64_t k = 0; k < g.k[a]; ++k) {
      int64_t i = o * g.s[a] + k * g.d[a] - g.pb[a];
      n += i >= lo && i < hi;
    }
    cnt[size_t(o)] = n;
  }
  return cnt;
}

struct Divisors {
  std::vector<int64_t> c[3];
  Divisors(const Geom& g, bool includePad) {
    for(int a = 0; a < 3; ++a) c[a] = axisCounts(g, a, includePad);
  }
  double at(int64_t o0, int64_t o1, int64_t o2) const {
    return double(c[0][size_t(o0)] * c[1][size_t(o1)] * c[2][size_t(o2)]);
  }
};

// The max of two pooled values, NaN propagated (the first NaN seen stays).
inline float maxNan(float v, float m) { return (v > m || v != v) ? v : m; }

// For each tap k2 of the window along the last axis, the outputs [lo, hi)
// whose input o2 * s + k2 * d - pb lies in [0, img): worked out once, so
// that the loops over a row need no bounds check per tap and output.
void tapRanges(const Geom& g, std::vector<int64_t>& lo, std::vector<int64_t>& hi) {
  lo.assign(size_t(g.k[2]), 0);
  hi.assign(size_t(g.k[2]), 0);
  for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
    const int64_t off = k2 * g.d[2] - g.pb[2];
    const int64_t a = off >= 0 ? 0 : (-off + g.s[2] - 1) / g.s[2];
    const int64_t b = g.img[2] - off <= 0 ? 0 : (g.img[2] - off - 1) / g.s[2] + 1;
    lo[size_t(k2)] = std::min(a, g.pos[2]);
    hi[size_t(k2)] = std::max(lo[size_t(k2)], std::min(b, g.pos[2]));
  }
}

// The taps k in [lo[o], hi[o]) of output o along axis a whose input lies
// inside the image (no bounds check left in the loops over taps).
void tapRange(const Geom& g, int a, std::vector<int64_t>& lo, std::vector<int64_t>& hi) {
  lo.assign(size_t(g.pos[a]), 0);
  hi.assign(size_t(g.pos[a]), 0);
  for(int64_t o = 0; o < g.pos[a]; ++o) {
    int64_t l = g.k[a], h = 0;
    for(int64_t k = 0; k < g.k[a]; ++k) {
      const int64_t i = o * g.s[a] + k * g.d[a] - g.pb[a];
      if(i >= 0 && i < g.img[a]) {
        l = std::min(l, k);
        h = k + 1;
      }
    }
    lo[size_t(o)] = l;
    hi[size_t(o)] = std::max(l, h);
  }
}

// Whether firstMaxRows2d takes the problem: float32, 2-D windows.
bool firstMaxRows2dFits(const TensorBase& xt, const PoolGeom& p) {
  const Geom& g = p.g;
  return xt.type() == Type::float32 && g.pos[0] == 1 && g.img[0] == 1 && g.k[0] == 1 &&
         g.imgSize < (int64_t(1) << 31);
}

// The first maximum of each window of a float32 image batch (2-D windows),
// as maxPoolKernel chooses it, its taps visited in the same order, but one
// output row at a time and tap by tap, each tap a loop over the row's
// outputs with selects instead of branches (ResNet-18's 3x3/2 pool over
// 32x64x112x112, the first step of its max_pool gradient: 241 -> 57 ms on 2
// threads; the per-window loop was bound by its loop-carried state).
// Planes in parallel: onPlane(pl) starts plane pl, then onRow(pl, o1, at)
// gets output row o1's maxima as plane-local flat indices (-1: an empty
// window), on the thread that owns the plane.
template <class OnPlane, class OnRow>
void firstMaxRows2d(const float* x, const PoolGeom& p, OnPlane&& onPlane, OnRow&& onRow) {
  const Geom& g = p.g;
  std::vector<int64_t> lo1, hi1, lo2, hi2;
  tapRange(g, 1, lo1, hi1);
  tapRanges(g, lo2, hi2);
  const int64_t W = g.img[2], P2 = g.pos[2];
  host::parallelFor(p.planes, p.planes * g.posSize * g.kSize, [&](int64_t b, int64_t e) {
    std::vector<float> best(static_cast<size_t>(P2));
    std::vector<int32_t> at(static_cast<size_t>(P2));
    float* bp = best.data();
    int32_t* ap = at.data();
    for(int64_t pl = b; pl < e; ++pl) {
      const float* xp = x + pl * g.imgSize;
      onPlane(pl);
      for(int64_t o1 = 0; o1 < g.pos[1]; ++o1) {
        std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
        std::fill(at.begin(), at.end(), -1);
        for(int64_t k1 = lo1[size_t(o1)]; k1 < hi1[size_t(o1)]; ++k1) {
          const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
          const float* row = xp + i1 * W;
          for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
            const int64_t off = k2 * g.d[2] - g.pb[2], s2 = g.s[2];
            const int32_t base = int32_t(i1 * W + off);
            for(int64_t o2 = lo2[size_t(k2)]; o2 < hi2[size_t(k2)]; ++o2) {
              const float v = row[o2 * s2 + off];
              const float bv = bp[o2];
              const int32_t cur = ap[o2];
              const bool take = (cur < 0) | (v > bv) | ((v != v) & (bv == bv));
              bp[o2] = take ? v : bv;
              ap[o2] = take ? base + int32_t(o2 * s2) : cur;
            }
          }
        }
        onRow(pl, o1, static_cast<const int32_t*>(ap));
      }
    }
  });
}

// max_pool_indices through firstMaxRows2d.
bool maxPoolIndices2d(const TensorBase& xt, TensorBase& it, const PoolGeom& p, int storageOrder) {
  if(!firstMaxRows2dFits(xt, p)) return false;
  const Geom& g = p.g;
  int64_t* ind = it.data<int64_t>();
  const int64_t W = g.img[2], P2 = g.pos[2];
  firstMaxRows2d(
      xt.data<float>(), p, [](int64_t) {},
      [&](int64_t pl, int64_t o1, const int32_t* ap) {
        int64_t* o = ind + pl * g.posSize + o1 * P2;
        for(int64_t o2 = 0; o2 < P2; ++o2) {
          const int64_t local = ap[o2];
          o[o2] = local < 0 ? -1 : pl * g.imgSize + (storageOrder == 0 ? local : local / W + (local % W) * g.img[1]);
        }
      });
  return true;
}

// max_pool's gradient: each dy added at its window's first maximum (the
// windows of one plane write only that plane, so planes go in parallel).
template <class T>
void maxPoolGradKernel(KernelCtx& c) {
  const TensorBase& dyt = *c.in[0];
  const TensorBase& xt = *c.in[1];
  const PoolGeom p = poolGeom(c.attrs, xt.shape(), dyt.shape());
  const Geom& g = p.g;
  const T* dy = dyt.data<T>();
  T* dx = c.out.data<T>();
  if constexpr(std::is_same<T, float>::value) {
    if(firstMaxRows2dFits(xt, p)) {
      // One pass over x and dy, dx written as it goes (ResNet-18's 3x3/2
      // pool, batch 32: 95 ms as max_pool_indices + scatter_add).
      const int64_t P2 = g.pos[2];
      firstMaxRows2d(
          xt.data<float>(), p, [&](int64_t pl) { std::fill(dx + pl * g.imgSize, dx + (pl + 1) * g.imgSize, 0.f); },
          [&](int64_t pl, int64_t o1, const int32_t* ap) {
            float* xp = dx + pl * g.imgSize;
            const float* d = dy + pl * g.posSize + o1 * P2;
            for(int64_t o2 = 0; o2 < P2; ++o2)
              if(ap[o2] >= 0) xp[ap[o2]] += d[o2];
          });
      return;
    }
  }
  // Elsewhere: the windows' maxima as max_pool_indices finds them, then dy
  // added there plane by plane.
  Tensor idxT = c.scratch(dyt.shape(), Type::int64);
  maxPoolKernel<T>(xt, nullptr, idxT.get(), p, 0);
  const int64_t* idx = idxT->data<int64_t>();
  host::parallelFor(p.planes, p.planes * (g.imgSize + g.posSize), [&](int64_t b, int64_t e) {
    for(int64_t pl = b; pl < e; ++pl) {
      std::fill(dx + pl * g.imgSize, dx + (pl + 1) * g.imgSize, T());
      for(int64_t o = pl * g.posSize; o < (pl + 1) * g.posSize; ++o)
        if(idx[o] >= 0) host::store(dx, idx[o], host::load(dx, idx[o]) + host::load(dy, o));
    }
  });
}

// 2-D max pooling of float32, int8 or uint8 with an undilated window, one
// output row at a time: the window's rows are first reduced element-wise
// over the full input width (unit-stride loops), then each output reduces
// its window along that row. The maximum of the same taps (NaN propagates,
// as poolRows); compiled twice, for AVX2 and for the baseline, and picked at
// run time.
template <class T>
struct MaxRowsArgs {
  const T* x;
  T* y;
  const PoolGeom* p;
  int64_t rb, re;
  const int64_t *lo, *hi;  // by tap along the row: the outputs [lo, hi) it reaches in range
};

template <class T>
inline T maxOf(T v, T m) {
  if constexpr(std::is_floating_point<T>::value) return maxNan(v, m);
  else return v > m ? v : m;
}
template <class T>
constexpr T lowestOf() {
  if constexpr(std::is_floating_point<T>::value) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}

template <class T>
__attribute__((always_inline)) inline void maxPool2dRows(const MaxRowsArgs<T>& a, T* vm) {
  const Geom& g = a.p->g;
  const int64_t W = g.pos[2], IW = g.img[2], s2 = g.s[2];
  for(int64_t r = a.rb; r < a.re; ++r) {
    const int64_t pl = r / g.pos[1], o1 = r % g.pos[1];
    const T* xp = a.x + pl * g.imgSize;
    bool first = true;
    for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
      if(i1 < 0 || i1 >= g.img[1]) continue;
      const T* row = xp + i1 * IW;
      if(first) {
        for(int64_t i = 0; i < IW; ++i) vm[i] = row[i];
        first = false;
        continue;
      }
      for(int64_t i = 0; i < IW; ++i) vm[i] = maxOf(row[i], vm[i]);
    }
    T* out = a.y + r * W;
    std::fill(out, out + W, lowestOf<T>());
    if(first) continue;  // no row of the window in range (not reached: pads < kernel)
    // Along the row, a tap at a time over the outputs it reaches (as poolRows).
    if(std::is_floating_point<T>::value && s2 == 2) {
      // Stride 2: the row's even and odd entries apart first, so that every
      // tap reads unit-stride (input 2 o2 + d is even[o2 + d / 2] or
      // odd[o2 + (d - 1) / 2]): the same taps in the same order. (Not for
      // 8-bit values: their split does not vectorize, and measured slower.)
      T* even = vm + IW;
      T* odd = even + (IW + 1) / 2;
      for(int64_t i = 0; i < IW / 2; ++i) {
        even[i] = vm[2 * i];
        odd[i] = vm[2 * i + 1];
      }
      if(IW % 2) even[IW / 2] = vm[IW - 1];
      for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const int64_t d = k2 - g.pb[2];
        const T* src = d % 2 == 0 ? even + d / 2 : odd + (d - 1) / 2;
        for(int64_t o2 = a.lo[k2]; o2 < a.hi[k2]; ++o2) out[o2] = maxOf(src[o2], out[o2]);
      }
      continue;
    }
    for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
      const T* src = vm + k2 - g.pb[2];
      for(int64_t o2 = a.lo[k2]; o2 < a.hi[k2]; ++o2) out[o2] = maxOf(src[o2 * s2], out[o2]);
    }
  }
}

template <class T>
ONYX_TARGET_AVX2 void maxPool2dRowsAvx2(const MaxRowsArgs<T>& a, T* vm) {
  maxPool2dRows(a, vm);
}
template <class T>
void maxPool2dRowsBase(const MaxRowsArgs<T>& a, T* vm) {
  maxPool2dRows(a, vm);
}

// Whether maxPool2d takes this pool: 2-D (the first of the 3 axes unused)
// with dilation 1 along the rows.
bool maxPool2dFits(const PoolGeom& p) {
  const Geom& g = p.g;
  return g.img[0] == 1 && g.k[0] == 1 && g.pos[0] == 1 && g.d[2] == 1 && g.img[2] > 0;
}

template <class T>
void maxPool2d(const T* x, T* y, const PoolGeom& p) {
  const bool avx2 = host::vec::bestIsa() != host::vec::Isa::scalar;
  const Geom& g = p.g;
  const int64_t rows = p.planes * g.pos[1];
  std::vector<int64_t> lo, hi;
  tapRanges(g, lo, hi);
  host::parallelFor(rows, rows * g.pos[2] * g.kSize, [&](int64_t rb, int64_t re) {
    // The rows' maximum, then (stride 2) its even and odd entries.
    std::vector<T> vm(static_cast<size_t>(2 * g.img[2] + 1));
    const MaxRowsArgs<T> a{x, y, &p, rb, re, lo.data(), hi.data()};
    if(avx2) maxPool2dRowsAvx2(a, vm.data());
    else maxPool2dRowsBase(a, vm.data());
  });
}

// A 2-D max pool of float32 tensors stored channel-blocked ([N, C/b, H, W,
// b] in memory, b = 8 or 16; set by the blocked_layout pass between
// convolutions): each output position takes the maximum of its taps' rows
// of b channels, taps in row-major order (the first maximum, NaN
// propagated, as maxPool2d).
template <int B>
__attribute__((always_inline)) inline void maxPoolBlockedRows(const float* x, float* y, const Geom& g, int64_t rb,
                                                              int64_t re) {
  const int64_t OH = g.pos[1], OW = g.pos[2], IH = g.img[1], IW = g.img[2];
  for(int64_t r = rb; r < re; ++r) {  // r: (n, channel block, output row)
    const int64_t plane = r / OH, oh = r % OH;
    const float* xp = x + plane * IH * IW * B;
    float* yr = y + r * OW * B;
    for(int64_t ow = 0; ow < OW; ++ow) {
      float acc[B];
      for(int i = 0; i < B; ++i) acc[i] = -std::numeric_limits<float>::infinity();
      for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
        const int64_t ih = oh * g.s[1] + k1 * g.d[1] - g.pb[1];
        if(ih < 0 || ih >= IH) continue;
        for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const int64_t iw = ow * g.s[2] + k2 * g.d[2] - g.pb[2];
          if(iw < 0 || iw >= IW) continue;
          const float* __restrict in = xp + (ih * IW + iw) * B;
          for(int i = 0; i < B; ++i) acc[i] = maxOf(in[i], acc[i]);
        }
      }
      for(int i = 0; i < B; ++i) yr[ow * B + i] = acc[i];
    }
  }
}

#ifdef ONYX_POOL_AVX2
// The same with AVX2 intrinsics, B / 8 vectors per position, separably: per
// output row, the maximum of its window's input rows at every input column
// first (col), then each output the maximum of its taps along col. The
// windows of a 3x3 stride-2 pool share their rows and a column, so this is
// 2 maxima per output instead of 8 (SqueezeNet's first pool, 64 x 111 x
// 111 on one Zen 3 core: 0.37 ms against onnxruntime's 0.16). max_ps(v, m)
// is v > m ? v : m and m when either is NaN; a NaN v is then blended in:
// any NaN of the window gives NaN, as maxNan's tap-by-tap order does. (Of a
// window's zeros of both signs, the one kept may differ from the plain
// kernel's, whose taps go row by row.)
__attribute__((target("avx2"))) inline __m256 maxNanAvx2(__m256 v, __m256 m) {
  return _mm256_blendv_ps(_mm256_max_ps(v, m), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
template <int B>
__attribute__((target("avx2"))) void maxPoolBlockedRowsAvx2(const float* x, float* y, const Geom& g, int64_t rb,
                                                            int64_t re) {
  constexpr int V = B / 8;
  const int64_t OH = g.pos[1], OW = g.pos[2], IH = g.img[1], IW = g.img[2];
  std::vector<float> colBuf(size_t(IW * B));
  float* col = colBuf.data();
  std::vector<const float*> rowsIn;
  rowsIn.reserve(size_t(g.k[1]));
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for(int64_t r = rb; r < re; ++r) {
    const int64_t plane = r / OH, oh = r % OH;
    const float* xp = x + plane * IH * IW * B;
    float* yr = y + r * OW * B;
    // col[iw] = max over the window's rows in range of x[ih, iw], in one
    // pass over them.
    rowsIn.clear();
    for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      const int64_t ih = oh * g.s[1] + k1 * g.d[1] - g.pb[1];
      if(ih >= 0 && ih < IH) rowsIn.push_back(xp + ih * IW * B);
    }
    const bool any = !rowsIn.empty();
    if(any)
      for(int64_t i = 0; i < IW * B; i += 8) {
        __m256 v = _mm256_loadu_ps(rowsIn[0] + i);
        for(size_t q = 1; q < rowsIn.size(); ++q) v = maxNanAvx2(_mm256_loadu_ps(rowsIn[q] + i), v);
        _mm256_storeu_ps(col + i, v);
      }
    for(int64_t ow = 0; ow < OW; ++ow) {
      __m256 acc[V];
      for(int j = 0; j < V; ++j) acc[j] = lowest;
      if(any)
        for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const int64_t iw = ow * g.s[2] + k2 * g.d[2] - g.pb[2];
          if(iw < 0 || iw >= IW) continue;
          for(int j = 0; j < V; ++j) acc[j] = maxNanAvx2(_mm256_loadu_ps(col + iw * B + 8 * j), acc[j]);
        }
      for(int j = 0; j < V; ++j) _mm256_storeu_ps(yr + ow * B + 8 * j, acc[j]);
    }
  }
}
#endif

template <int B>
void maxPoolBlockedB(const float* x, float* y, const PoolGeom& p) {
  [[maybe_unused]] const bool avx2 = host::vec::bestIsa() != host::vec::Isa::scalar;
  const Geom& g = p.g;
  const int64_t rows = p.planes / B * g.pos[1];
  host::parallelFor(rows, rows * g.pos[2] * g.kSize * B, [&](int64_t rb, int64_t re) {
#ifdef ONYX_POOL_AVX2
    if(avx2) return maxPoolBlockedRowsAvx2<B>(x, y, g, rb, re);
#endif
    maxPoolBlockedRows<B>(x, y, g, rb, re);
  });
}

// A 2-D average pool of float32 tensors stored channel-blocked: each lane
// sums its taps in double in row-major order and divides by the window's
// count, as poolRows does per plane.
void avgPoolBlocked(const float* x, float* y, const PoolGeom& p, const Divisors& div, int64_t b) {
  const Geom& g = p.g;
  const int64_t OH = g.pos[1], OW = g.pos[2], IH = g.img[1], IW = g.img[2];
  const int64_t rows = p.planes / b * OH;
  host::parallelFor(rows, rows * OW * g.kSize * b, [&](int64_t rb, int64_t re) {
    std::vector<double> acc(size_t(b), 0.0);
    for(int64_t r = rb; r < re; ++r) {
      const int64_t plane = r / OH, oh = r % OH;
      const float* xp = x + plane * IH * IW * b;
      float* yr = y + r * OW * b;
      for(int64_t ow = 0; ow < OW; ++ow) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
          const int64_t ih = oh * g.s[1] + k1 * g.d[1] - g.pb[1];
          if(ih < 0 || ih >= IH) continue;
          for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
            const int64_t iw = ow * g.s[2] + k2 * g.d[2] - g.pb[2];
            if(iw < 0 || iw >= IW) continue;
            const float* in = xp + (ih * IW + iw) * b;
            for(int64_t i = 0; i < b; ++i) acc[size_t(i)] += double(in[i]);
          }
        }
        const double d = div.at(0, oh, ow);
        for(int64_t i = 0; i < b; ++i) yr[ow * b + i] = float(d > 0 ? acc[size_t(i)] / d : 0.0);
      }
    }
  });
}

void maxPoolBlocked(const float* x, float* y, const PoolGeom& p, int64_t b) {
  ONYX_ASSERT(b == 8 || b == 16, "max_pool: block ", b);
  if(b == 8) maxPoolBlockedB<8>(x, y, p);
  else maxPoolBlockedB<16>(x, y, p);
}

// The pools of float, double (and, max only, int8/uint8) values, a row of
// outputs at a time: for each
// tap of the window the in-range outputs of the row (a range per tap along
// the last axis, worked out once) take that tap's input in one tight loop
// over the row, instead of a bounds check per tap and output. Each output
// still sees its taps in the same order as forWindow, so the results are
// bit for bit those of the per-output loops (the first maximum, NaN
// propagated; the average summed in double in the same order).
template <class T, bool Max>
void poolRows(const T* x, T* y, const PoolGeom& p, const Divisors* div) {
  using Acc = std::conditional_t<Max, T, double>;
  const Geom& g = p.g;
  std::vector<int64_t> lo, hi;
  tapRanges(g, lo, hi);
  const int64_t rows = p.planes * g.pos[0] * g.pos[1], W = g.pos[2];
  host::parallelFor(rows, rows * W * g.kSize, [&](int64_t rb, int64_t re) {
    std::vector<Acc> acc(static_cast<size_t>(W));
    for(int64_t r = rb; r < re; ++r) {
      const int64_t pl = r / (g.pos[0] * g.pos[1]), o0 = r / g.pos[1] % g.pos[0], o1 = r % g.pos[1];
      const T* xp = x + pl * g.imgSize;
      std::fill(acc.begin(), acc.end(), Max ? lowestOf<Acc>() : Acc(0));
      for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
        int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
        if(i0 < 0 || i0 >= g.img[0]) continue;
        for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
          int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
          if(i1 < 0 || i1 >= g.img[1]) continue;
          const T* row = xp + (i0 * g.img[1] + i1) * g.img[2];
          for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
            const T* src = row + k2 * g.d[2] - g.pb[2];
            const int64_t s2 = g.s[2];
            Acc* a = acc.data();
            for(int64_t o2 = lo[size_t(k2)]; o2 < hi[size_t(k2)]; ++o2) {
              T v = src[o2 * s2];
              if constexpr(Max) a[o2] = (v > a[o2] || v != v) ? v : a[o2];
              else a[o2] += double(v);
            }
          }
        }
      }
      T* out = y + r * W;
      if constexpr(Max) {
        std::copy(acc.begin(), acc.end(), out);
      } else {
        for(int64_t o2 = 0; o2 < W; ++o2) {
          double d = div->at(o0, o1, o2);
          out[o2] = static_cast<T>(d > 0 ? acc[size_t(o2)] / d : 0.0);
        }
      }
    }
  });
}


template <class T>
void avgPoolKernel(KernelCtx& c) {
  const TensorBase& xt = *c.in[0];
  PoolGeom p = poolGeom(c.attrs, xt.shape(), c.out.shape());
  Divisors div(p.g, c.attrs.i("count_include_pad") != 0);
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  if constexpr(std::is_same<T, float>::value || std::is_same<T, double>::value) {
    return poolRows<T, false>(x, y, p, &div);
  }
  const Geom& g = p.g;
  forOutputs(p, [&](int64_t pl, int64_t o0, int64_t o1, int64_t o2, int64_t o) {
    const T* xp = x + pl * g.imgSize;
    double s = 0;
    forWindow(g, o0, o1, o2, [&](int64_t i0, int64_t i1, int64_t i2) {
      s += double(host::load(xp, (i0 * g.img[1] + i1) * g.img[2] + i2));
    });
    double d = div.at(o0, o1, o2);
    host::store(y, o, d > 0 ? s / d : 0.0);
  });
}

template <class T>
void avgPoolGradKernel(KernelCtx& c) {
  const TensorBase& dyt = *c.in[0];
  PoolGeom p = poolGeom(c.attrs, c.out.shape(), dyt.shape());
  Divisors div(p.g, c.attrs.i("count_include_pad") != 0);
  const T* dy = dyt.data<T>();
  T* dx = c.out.data<T>();
  const Geom& g = p.g;
  std::fill(dx, dx + c.out.size(), T());
  // Planes are independent, so the += stays within one thread.
  forOutputs(p, [&](int64_t pl, int64_t o0, int64_t o1, int64_t o2, int64_t o) {
    T* xp = dx + pl * g.imgSize;
    double d = div.at(o0, o1, o2);
    if(d <= 0) return;
    auto v = host::load(dy, o) / static_cast<typename ComputeOf<T>::type>(d);
    forWindow(g, o0, o1, o2, [&](int64_t i0, int64_t i1, int64_t i2) {
      int64_t idx = (i0 * g.img[1] + i1) * g.img[2] + i2;
      host::store(xp, idx, host::load(xp, idx) + v);
    });
  });
}

AttrList poolAttrs(const std::vector<int64_t>& kernel, const PoolOptions& o) {
  return {{"kernel_shape", attr(kernel)},
          {"strides", attr(o.strides)},
          {"pads", attr(o.pads)},
          {"dilations", attr(o.dilations)},
          {"ceil_mode", attr(o.ceilMode)}};
}

}  // namespace

// Reads the attributes shared by the ONNX pools into kernel and options.
std::vector<int64_t> importPool(OnnxImportCtx& c, Expr x, PoolOptions& o) {
  checkSpatialInput(c, x);
  const int nd = x->shape().rank() - 2;
  std::vector<int64_t> k = c.attrInts("kernel_shape", {});
  c.check(k.size() == size_t(nd), "kernel_shape must have ", nd, " entries (one per spatial dim), got ", k.size());
  o.strides = importList(c, "strides", nd, 1);
  o.dilations = importList(c, "dilations", nd, 1);
  o.ceilMode = c.attrInt("ceil_mode", 0) != 0;
  o.pads = importPads(c, x->shape(), k, o.strides, o.dilations);
  return k;
}

namespace {

// MaxPool (max_pool; max_pool_indices as its second output) or AveragePool.
// Lists holding ONNX's defaults are left out. ceil_mode is written only where
// it changes the output size (where the last window would start in the end
// padding, the importer's rule gives the floor size); before opset 10 its
// overhang becomes end padding, which no max and no mean without
// count_include_pad counts. Types: float16/float/double, int8/uint8 in MaxPool
// from opset 12, bfloat16 from 22; a max is exact in float (bfloat16) or
// double (integers up to 32 bits), and the mean of bfloat16 runs in double
// as its kernel does, rounding once in the Cast back.
void exportPool(OnnxExportCtx& c, bool avg, bool indices) {
  const char* opType = avg ? "AveragePool" : "MaxPool";
  const int opset = c.opset();
  const Attrs a = c.attrs();
  const Shape& xs = c.inputShape(0);
  const Shape& ys = c.node().shape();
  const int nd = xs.rank() - 2;
  const std::vector<int64_t> k = kernelOf(a);
  host::Spatial sp = spatialOf(a, nd);
  // count_include_pad counts the padding only (never the ceil_mode overhang).
  const bool countPad = avg && a.i("count_include_pad") != 0 && !allEqual(sp.pads, 0);
  bool ceil = false;
  std::vector<int64_t> overhang(size_t(nd), 0);
  for(int i = 0; i < nd && a.i("ceil_mode") != 0; ++i) {
    size_t u = size_t(i);
    int64_t eff = (k[u] - 1) * sp.dilations[u] + 1, pe = sp.pads[u + size_t(nd)];
    int64_t span = xs[2 + i] + sp.pads[u] + pe - eff;
    if(windowCount(xs[2 + i], k[u], sp.strides[u], sp.dilations[u], sp.pads[u], pe, false) == ys[2 + i]) continue;
    ceil = true;
    overhang[u] = (ys[2 + i] - 1) * sp.strides[u] - span;
  }
  if(ceil && opset < 10) {
    if(countPad) c.requireOpset(10, "ceil_mode with count_include_pad");
    for(int i = 0; i < nd; ++i) {
      size_t u = size_t(i), e = u + size_t(nd);
      sp.pads[e] += overhang[u];
      if(sp.pads[e] >= (k[u] - 1) * sp.dilations[u] + 1)
        c.requireOpset(10, "ceil_mode here (end padding in its place would reach the kernel size)");
    }
    ceil = false;
  }
  OnnxAttrs at;
  at.emplace_back("kernel_shape", attr(k));
  addList(at, "strides", sp.strides, 1);
  addList(at, "pads", sp.pads, 0);
  if(!allEqual(sp.dilations, 1)) {
    const int need = avg ? 19 : 10;
    c.requireOpset(need, str(opType, " with dilations"));
    at.emplace_back("dilations", attr(sp.dilations));
  }
  if(ceil) at.emplace_back("ceil_mode", int64_t(1));
  if(countPad) {
    c.requireOpset(7, "AveragePool's count_include_pad");
    at.emplace_back("count_include_pad", int64_t(1));
  }
  if(indices && a.i("storage_order") != 0) at.emplace_back("storage_order", int64_t(1));
  const Type t = c.inputType(0);
  Type via = Type::undefined;
  if(t == Type::bfloat16) {
    if(opset < 22) via = avg ? Type::float64 : Type::float32;
  } else if(!avg && (t == Type::int8 || t == Type::uint8)) {
    if(opset < 12) via = Type::float64;
  } else if(!isFloat(t)) {
    c.check(!avg && isInt(t) && typeBits(t) <= 32, opType, " has no exact form for element type ", t);
    via = Type::float64;
  }
  emitVia(c, opType, c.inputs(), via, at, indices);
}

}  // namespace

ONYX_OP(kMaxPoolIndices, "max_pool_indices");
ONYX_OP(kMaxPoolGrad, "max_pool_grad");
ONYX_OP(kAvgPoolGrad, "average_pool_grad");

ONYX_OP(kMaxPool, "max_pool")
    .doc("y[n, c, o..] = max over the window x[n, c, o*s + k*d - pad_begin] (padding ignored); block 8 or 16: x "
         "and y are stored channel-blocked (oneDNN's nChw8c/16c; float32, 2-D, set by the blocked_layout pass)")
    .inputs(1)
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("pads", IntList{})
    .attr("dilations", IntList{})
    .attr("ceil_mode", int64_t(0))
    .attr("block", int64_t(0))
    .infer([](InferCtx& c) {
      requireNumeric(c);
      c.shape = pooledShape(c, c.shapeOf(0));
      const int64_t b = c.attrs.i("block");
      c.check(b == 0 || b == 8 || b == 16, "block must be 0 (plain) or 8 or 16 (channel-blocked), got ", b);
      c.check(b == 0 || (c.typeOf(0) == Type::float32 && c.shapeOf(0).rank() == 4 && c.shapeOf(0)[1] % b == 0),
              "block (a channel-blocked layout) needs a float32 2-D pool whose channels are a multiple of ", b,
              ", got ", c.typeOf(0), " ", c.shapeOf(0));
    })
    .cpu([](KernelCtx& c) {
      PoolGeom p = poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
      if(const int64_t b = c.attrs.i("block"))
        return maxPoolBlocked(c.in[0]->data<float>(), c.out.data<float>(), p, b);
      dispatchNumeric(c.out.type(), "max_pool", [&](auto tag) {
        using T = typename decltype(tag)::type;
        // (int8 and uint8: quantized models' max pools, which run on the
        // 8-bit values where their QDQ pair is dropped.)
        if constexpr(std::is_same<T, float>::value || std::is_same<T, int8_t>::value ||
                     std::is_same<T, uint8_t>::value) {
          if(maxPool2dFits(p)) maxPool2d(c.in[0]->data<T>(), c.out.data<T>(), p);
          else poolRows<T, true>(c.in[0]->data<T>(), c.out.data<T>(), p, nullptr);
        } else if constexpr(std::is_same<T, double>::value)
          poolRows<T, true>(c.in[0]->data<T>(), c.out.data<T>(), p, nullptr);
        else
          maxPoolKernel<T>(*c.in[0], &c.out, nullptr, p, 0);
      });
    })
    // dx = dy added at each window's first maximum, in one op.
    .backward([](GradCtx& g) {
      ONYX_ASSERT(g.attrs.i("block") == 0, "max_pool: a gradient through channel-blocked tensors (the "
                  "blocked_layout pass runs on inference graphs only)");
      g.add(0, g.graph.make(kMaxPoolGrad, {g.dy, g.x(0)},
                            pick(g.attrs, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode"})));
    })
    // One rule for every opset: attributes absent in older opsets take their
    // defaults; int8/uint8 (opset 12) go through the integer kernel.
    .onnx("MaxPool", 1)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0);
      PoolOptions o;
      std::vector<int64_t> k = importPool(c, x, o);
      int storage = int(c.attrInt("storage_order", 0));
      c.check(storage == 0 || storage == 1, "storage_order must be 0 or 1, got ", storage);
      c.setOutput(0, max_pool(x, k, o));
      if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, max_pool_indices(x, k, o, storage));
    })
    .exporter([](OnnxExportCtx& c) {
      ONYX_ASSERT(c.attrs().i("block") == 0, "max_pool: channel-blocked tensors in a graph being exported (the "
                  "blocked_layout pass runs for the CPU kernels only)");
      exportPool(c, false, false);
    });

Expr max_pool(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o) {
  return x->graph()->make(kMaxPool, {x}, poolAttrs(kernel, o));
}

[[maybe_unused]] static OpDef& kMaxPoolIndicesDef = kMaxPoolIndices
    .doc("i[n, c, o..] = flat index (over all of x) of the first maximum of max_pool's window; storage_order 1 "
         "numbers the spatial dims column-major")
    .inputs(1)
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("pads", IntList{})
    .attr("dilations", IntList{})
    .attr("ceil_mode", int64_t(0))
    .attr("storage_order", int64_t(0))
    .infer([](InferCtx& c) {
      requireNumeric(c);
      c.shape = pooledShape(c, c.shapeOf(0));
      c.type = Type::int64;
      int64_t so = c.attrs.i("storage_order");
      c.check(so == 0 || so == 1, "storage_order must be 0 or 1, got ", so);
    })
    .cpu([](KernelCtx& c) {
      PoolGeom p = poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
      int so = int(c.attrs.i("storage_order"));
      if(maxPoolIndices2d(*c.in[0], c.out, p, so)) return;
      dispatchNumeric(c.in[0]->type(), "max_pool_indices", [&](auto tag) {
        maxPoolKernel<typename decltype(tag)::type>(*c.in[0], nullptr, &c.out, p, so);
      });
    })
    .notDifferentiable("integer positions; max_pool's gradient uses them")
    .noOnnx("no ONNX op of its own: MaxPool's second output (Indices)")
    .onnxExport(8, [](OnnxExportCtx& c) { exportPool(c, false, true); });

Expr max_pool_indices(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o, int storageOrder) {
  AttrList l = poolAttrs(kernel, o);
  l.emplace_back("storage_order", attr(storageOrder));
  return x->graph()->make(kMaxPoolIndices, {x}, l);
}

[[maybe_unused]] static OpDef& kMaxPoolGradDef = kMaxPoolGrad
    .doc("dx = max_pool's gradient: each dy[n, c, o..] added at the first maximum of its window of x (dx shaped "
         "like x)")
    .inputs(2)
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("pads", IntList{})
    .attr("dilations", IntList{})
    .attr("ceil_mode", int64_t(0))
    .infer([](InferCtx& c) {
      requireNumeric(c);
      c.check(c.typeOf(0) == c.typeOf(1), "dy has type ", c.typeOf(0), " but x has ", c.typeOf(1));
      Shape pooled = pooledShape(c, c.shapeOf(1));
      c.check(pooled == c.shapeOf(0), "dy of shape ", c.shapeOf(0), " is not the pooled shape ", pooled, " of x ",
              c.shapeOf(1));
      c.shape = c.shapeOf(1);
      c.type = c.typeOf(1);
    })
    .cpu([](KernelCtx& c) {
      dispatchNumeric(c.out.type(), "max_pool_grad", [&](auto tag) { maxPoolGradKernel<typename decltype(tag)::type>(c); });
    })
    // Linear in dy: its adjoint reads ddx at each window's first maximum.
    // x only selects (its derivative is 0 wherever it exists).
    .backward([](GradCtx& g) {
      if(!g.needs(0)) return;
      Expr idx = g.graph.make(kMaxPoolIndices, {g.x(1)},
                              pick(g.attrs, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode"}));
      Expr flat = gather(reshape(g.dy, std::vector<int64_t>{-1}), 0, reshape(idx, std::vector<int64_t>{-1}));
      g.add(0, reshape(flat, g.x(0)->shape()));
    })
    .noOnnx("internal: gradient of max_pool");

Expr max_pool_grad(Expr dy, Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o) {
  return dy->graph()->make(kMaxPoolGrad, {dy, x}, poolAttrs(kernel, o));
}

ONYX_OP(kAvgPool, "average_pool")
    .doc("y[n, c, o..] = mean over the window x[n, c, o*s + k*d - pad_begin]; the divisor counts positions inside "
         "x, or also padding with count_include_pad (never the ceil_mode overhang); block 8 or 16: x and y are "
         "stored channel-blocked (oneDNN's nChw8c/16c; float32, 2-D, set by the blocked_layout pass)")
    .inputs(1)
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("pads", IntList{})
    .attr("dilations", IntList{})
    .attr("ceil_mode", int64_t(0))
    .attr("count_include_pad", int64_t(0))
    .attr("block", int64_t(0))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      c.type = c.typeOf(0);
      c.shape = pooledShape(c, c.shapeOf(0));
      const int64_t b = c.attrs.i("block");
      c.check(b == 0 || b == 8 || b == 16, "block must be 0 (plain) or 8 or 16 (channel-blocked), got ", b);
      c.check(b == 0 || (c.typeOf(0) == Type::float32 && c.shapeOf(0).rank() == 4 && c.shapeOf(0)[1] % b == 0),
              "block (a channel-blocked layout) needs a float32 2-D pool whose channels are a multiple of ", b,
              ", got ", c.typeOf(0), " ", c.shapeOf(0));
    })
    .cpu([](KernelCtx& c) {
      if(const int64_t b = c.attrs.i("block")) {
        const PoolGeom p = poolGeom(c.attrs, c.in[0]->shape(), c.out.shape());
        const Divisors div(p.g, c.attrs.i("count_include_pad") != 0);
        return avgPoolBlocked(c.in[0]->data<float>(), c.out.data<float>(), p, div, b);
      }
      dispatchFloat(c.out.type(), "average_pool", [&](auto tag) { avgPoolKernel<typename decltype(tag)::type>(c); });
    })
    .backward([](GradCtx& g) {
      ONYX_ASSERT(g.attrs.i("block") == 0, "average_pool: a gradient through channel-blocked tensors (the "
                  "blocked_layout pass runs on inference graphs only)");
      AttrList l = pick(g.attrs, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "count_include_pad"});
      l.emplace_back("input_shape", attr(g.x(0)->shape().vec()));
      g.add(0, g.graph.make(kAvgPoolGrad, {g.dy}, l));
    })
    .onnx("AveragePool", 1)
    .importer([](OnnxImportCtx& c) {
      Expr x = c.input(0);
      PoolOptions o;
      std::vector<int64_t> k = importPool(c, x, o);
      o.countIncludePad = c.attrInt("count_include_pad", 0) != 0;
      c.setOutput(0, average_pool(x, k, o));
    })
    .exporter([](OnnxExportCtx& c) {
      ONYX_ASSERT(c.attrs().i("block") == 0, "average_pool: channel-blocked tensors in a graph being exported (the "
                  "blocked_layout pass runs for the CPU kernels only)");
      exportPool(c, true, false);
    });

Expr average_pool(Expr x, const std::vector<int64_t>& kernel, const PoolOptions& o) {
  AttrList l = poolAttrs(kernel, o);
  l.emplace_back("count_include_pad", attr(o.countIncludePad));
  return x->graph()->make(kAvgPool, {x}, l);
}

[[maybe_unused]] static OpDef& kAvgPoolGradDef = kAvgPoolGrad
    .doc("dx = average_pool's adjoint: each dy[n, c, o..] / divisor added over its window of x (shape input_shape)")
    .inputs(1)
    .attr("input_shape", IntList{})
    .attr("kernel_shape", IntList{})
    .attr("strides", IntList{})
    .attr("pads", IntList{})
    .attr("dilations", IntList{})
    .attr("ceil_mode", int64_t(0))
    .attr("count_include_pad", int64_t(0))
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      const IntList& is = c.attrs.ints("input_shape");
      Shape xs(Shape::Dims(is.begin(), is.end()));
      Shape pooled = pooledShape(c, xs);
      c.check(pooled == c.shapeOf(0), "dy of shape ", c.shapeOf(0), " is not the pooled shape ", pooled, " of ", xs);
      c.shape = xs;
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      dispatchFloat(c.out.type(), "average_pool_grad",
                    [&](auto tag) { avgPoolGradKernel<typename decltype(tag)::type>(c); });
    })
    // Linear: the adjoint of the adjoint is average_pool itself.
    .backward([](GradCtx& g) {
      g.add(0, g.graph.make(kAvgPool, {g.dy},
                            pick(g.attrs, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode",
                                           "count_include_pad"})));
    })
    .noOnnx("internal: gradient of average_pool");

Expr average_pool_grad(Expr dy, const Shape& inputShape, const std::vector<int64_t>& kernel, const PoolOptions& o) {
  AttrList l = poolAttrs(kernel, o);
  l.emplace_back("count_include_pad", attr(o.countIncludePad));
  l.emplace_back("input_shape", attr(inputShape.vec()));
  return dy->graph()->make(kAvgPoolGrad, {dy}, l);
}

// ---------------------------------------------------------------- composite pools

// As ONNX's reference: kernel size * mean of |x|^p with the padding counted
// (so padding adds 0), then the p-th root.
Expr lp_pool(Expr x, double p, const std::vector<int64_t>& kernel, const PoolOptions& o) {
  PoolOptions a = o;
  a.countIncludePad = true;
  double n = 1;
  for(auto k : kernel) n *= double(k);
  Expr ax = abs(x);
  Expr powered = p == 2 ? ax * ax : p == 1 ? ax : pow(ax, p);
  Expr s = average_pool(powered, kernel, a) * n;
  return p == 1 ? s : p == 2 ? sqrt(s) : pow(s, 1.0 / p);
}

namespace {
std::vector<int> spatialAxes(Expr x) {
  std::vector<int> axes;
  for(int i = 2; i < x->shape().rank(); ++i) axes.push_back(i);
  return axes;
}
}  // namespace

Expr global_average_pool(Expr x) { return mean(x, spatialAxes(x), true); }
Expr global_max_pool(Expr x) { return max(x, spatialAxes(x), true); }
Expr global_lp_pool(Expr x, double p) {
  if(p == 2) return l2_norm(x, spatialAxes(x), true);
  Expr ax = abs(x);
  Expr s = sum(p == 1 ? ax : pow(ax, p), spatialAxes(x), true);
  return p == 1 ? s : pow(s, 1.0 / p);
}

// Zeros with y.flat[indices[i]] = x[i]; a repeated index keeps the last
// value, as ONNX's reference does (ScatterElements, so it exports too).
Expr max_unpool(Expr x, Expr indices, const Shape& outputShape) {
  Expr zero = x->graph()->constant(Shape{1}, inits::zeros(), x->value_type());
  Expr zeros = expand(zero, Shape{outputShape.elements()});
  Expr flat = scatter_elements(zeros, 0, reshape(indices, std::vector<int64_t>{-1}),
                               reshape(x, std::vector<int64_t>{-1}), "none");
  return reshape(flat, outputShape);
}

}  // namespace onyx
