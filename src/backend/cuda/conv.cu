// GPU convolution primitives (kernels.h): im2col, col2im and the channel
// bias, for convolution as windows and cuBLAS GEMMs, as the CPU computes it.
// col2im gathers (a thread per image element sums the taps that reach it),
// so it needs no atomics and is deterministic.
#include <onyx/backend/cuda/kernels.h>

#include <cuda/std/limits>

#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

// f(idx, i) for the taps of the window at position o that fall inside the
// image: idx the flat image index, i the coordinates.
template <class F>
__device__ inline void forWindowTaps(const host::ConvGeom& g, const int64_t* o, F&& f) {
  for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    const int64_t i0 = o[0] * g.s[0] + k0 * g.d[0] - g.pb[0];
    if(i0 < 0 || i0 >= g.img[0]) continue;
    for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      const int64_t i1 = o[1] * g.s[1] + k1 * g.d[1] - g.pb[1];
      if(i1 < 0 || i1 >= g.img[1]) continue;
      for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const int64_t i2 = o[2] * g.s[2] + k2 * g.d[2] - g.pb[2];
        if(i2 < 0 || i2 >= g.img[2]) continue;
        const int64_t i[3] = {i0, i1, i2};
        f((i0 * g.img[1] + i1) * g.img[2] + i2, i);
      }
    }
  }
}

// f(tap, p, o) for the windows whose taps reach image element `flat`: tap
// the flat tap index, p the flat window position, o its coordinates (the
// adjoint of forWindowTaps, so sums over it need no atomics).
template <class F>
__device__ inline void forCoveringWindows(const host::ConvGeom& g, int64_t flat, F&& f) {
  const int64_t at[3] = {flat / (g.img[1] * g.img[2]), (flat / g.img[2]) % g.img[1], flat % g.img[2]};
  for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    const int64_t r0 = at[0] + g.pb[0] - k0 * g.d[0];
    if(r0 < 0 || r0 % g.s[0] != 0 || r0 / g.s[0] >= g.pos[0]) continue;
    for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      const int64_t r1 = at[1] + g.pb[1] - k1 * g.d[1];
      if(r1 < 0 || r1 % g.s[1] != 0 || r1 / g.s[1] >= g.pos[1]) continue;
      for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        const int64_t r2 = at[2] + g.pb[2] - k2 * g.d[2];
        if(r2 < 0 || r2 % g.s[2] != 0 || r2 / g.s[2] >= g.pos[2]) continue;
        const int64_t o[3] = {r0 / g.s[0], r1 / g.s[1], r2 / g.s[2]};
        f((k0 * g.k[1] + k1) * g.k[2] + k2, (o[0] * g.pos[1] + o[1]) * g.pos[2] + o[2], o);
      }
    }
  }
}

// col index e = (c * K + tap) * P + p.
template <class T>
struct Im2colBody {
  host::ConvGeom g;
  const T* x;
  T* col;
  __device__ void operator()(int64_t e) const {
    const int64_t p = e % g.posSize, ck = e / g.posSize;
    const int64_t tap = ck % g.kSize, c = ck / g.kSize;
    const int64_t o[3] = {p / (g.pos[1] * g.pos[2]), (p / g.pos[2]) % g.pos[1], p % g.pos[2]};
    const int64_t k[3] = {tap / (g.k[1] * g.k[2]), (tap / g.k[2]) % g.k[1], tap % g.k[2]};
    int64_t off = 0;
    for(int a = 0; a < 3; ++a) {
      const int64_t i = o[a] * g.s[a] + k[a] * g.d[a] - g.pb[a];
      if(i < 0 || i >= g.img[a]) {
        col[e] = T();
        return;
      }
      off = off * g.img[a] + i;
    }
    col[e] = x[c * g.imgSize + off];
  }
};

// Image index e = c * imgSize + i.
template <class T>
struct Col2imBody {
  host::ConvGeom g;
  const T* col;
  T* x;
  __device__ void operator()(int64_t e) const {
    const int64_t c = e / g.imgSize;
    typename ComputeOf<T>::type sum = 0;
    forCoveringWindows(g, e % g.imgSize, [&](int64_t tap, int64_t p, const int64_t*) {
      sum += loadDev(col, (c * g.kSize + tap) * g.posSize + p);
    });
    storeDev(x, e, sum);
  }
};

template <class T>
struct ChannelBiasBody {
  T* y;
  const T* b;
  int64_t M, P;
  __device__ void operator()(int64_t e) const { storeDev(y, e, loadDev(y, e) + loadDev(b, (e / P) % M)); }
};

// Output e = plane * posSize + position: its plane and window position.
struct Window {
  int64_t pl, o[3];
  __device__ Window(const host::ConvGeom& g, int64_t e) {
    pl = e / g.posSize;
    const int64_t p = e % g.posSize;
    o[0] = p / (g.pos[1] * g.pos[2]);
    o[1] = (p / g.pos[2]) % g.pos[1];
    o[2] = p % g.pos[2];
  }
};

// Taps of window o along axis a inside [lo, hi) (the pool's divisor, per axis).
__device__ inline int64_t axisCount(const host::ConvGeom& g, int a, int64_t o, bool includePad) {
  const int64_t lo = includePad ? -g.pb[a] : 0, hi = includePad ? g.img[a] + g.pe[a] : g.img[a];
  int64_t n = 0;
  for(int64_t k = 0; k < g.k[a]; ++k) {
    const int64_t i = o * g.s[a] + k * g.d[a] - g.pb[a];
    n += i >= lo && i < hi;
  }
  return n;
}

__device__ inline double divisorOf(const host::ConvGeom& g, const int64_t* o, bool includePad) {
  return double(axisCount(g, 0, o[0], includePad) * axisCount(g, 1, o[1], includePad) *
                axisCount(g, 2, o[2], includePad));
}

template <class T>
struct MaxPoolBody {
  host::ConvGeom g;
  const T* x;
  T* y;
  int64_t* ind;
  int storageOrder;
  __device__ void operator()(int64_t e) const {
    const Window w(g, e);
    using C = typename ComputeOf<T>::type;  // halves compare (and are NaN) as floats
    const T* xp = x + w.pl * g.imgSize;
    C best = ::cuda::std::numeric_limits<C>::lowest();
    if constexpr(std::is_floating_point<C>::value) best = -::cuda::std::numeric_limits<C>::infinity();
    int64_t bi = -1, b0 = 0, b1 = 0, b2 = 0;
    forWindowTaps(g, w.o, [&](int64_t idx, const int64_t* i) {
      const C v = loadDev(xp, idx);
      bool greater = v > best;
      if constexpr(std::is_floating_point<C>::value) greater = greater || (v != v && best == best);
      if(bi < 0 || greater) {
        best = v;
        bi = idx;
        b0 = i[0];
        b1 = i[1];
        b2 = i[2];
      }
    });
    if(y) storeDev(y, e, best);
    if(ind) {
      const int64_t local = storageOrder == 0 ? bi : b0 + (b1 + b2 * g.img[1]) * g.img[0];
      ind[e] = bi < 0 ? -1 : w.pl * g.imgSize + local;
    }
  }
};

template <class T>
struct AvgPoolBody {
  host::ConvGeom g;
  const T* x;
  T* y;
  bool includePad;
  __device__ void operator()(int64_t e) const {
    const Window w(g, e);
    const T* xp = x + w.pl * g.imgSize;
    double s = 0;
    forWindowTaps(g, w.o, [&](int64_t idx, const int64_t*) { s += double(loadDev(xp, idx)); });
    const double d = divisorOf(g, w.o, includePad);
    storeDev(y, e, d > 0 ? s / d : 0.0);
  }
};

// dx element e = plane * imgSize + i gathers dy / divisor over the windows
// whose taps reach i.
template <class T>
struct AvgPoolGradBody {
  host::ConvGeom g;
  const T* dy;
  T* dx;
  bool includePad;
  __device__ void operator()(int64_t e) const {
    const T* dyp = dy + (e / g.imgSize) * g.posSize;
    using C = typename ComputeOf<T>::type;
    C sum = 0;
    forCoveringWindows(g, e % g.imgSize, [&](int64_t, int64_t p, const int64_t* o) {
      const double d = divisorOf(g, o, includePad);
      if(d > 0) sum += loadDev(dyp, p) / static_cast<C>(d);
    });
    storeDev(dx, e, sum);
  }
};

// max_pool's gradient: each dx element gathers the dy of the windows that
// cover it and whose first maximum (MaxPoolBody's choice) it is, so no two
// threads write one element.
template <class T>
struct MaxPoolGradBody {
  host::ConvGeom g;
  const T* dy;
  const T* x;
  T* dx;
  __device__ void operator()(int64_t e) const {
    const int64_t pl = e / g.imgSize, local = e % g.imgSize;
    const T* xp = x + pl * g.imgSize;
    const T* dyp = dy + pl * g.posSize;
    using C = typename ComputeOf<T>::type;
    C sum = 0;
    forCoveringWindows(g, local, [&](int64_t, int64_t p, const int64_t* o) {
      C best = ::cuda::std::numeric_limits<C>::lowest();
      if constexpr(std::is_floating_point<C>::value) best = -::cuda::std::numeric_limits<C>::infinity();
      int64_t bi = -1;
      forWindowTaps(g, o, [&](int64_t idx, const int64_t*) {
        const C v = loadDev(xp, idx);
        bool greater = v > best;
        if constexpr(std::is_floating_point<C>::value) greater = greater || (v != v && best == best);
        if(bi < 0 || greater) {
          best = v;
          bi = idx;
        }
      });
      if(bi == local) sum += loadDev(dyp, p);
    });
    storeDev(dx, e, sum);
  }
};

// fn(TypeTag<T>) for the element types the GPU kernels take.
template <class Fn>
void dispatchGpu(Type t, const char* what, Fn&& fn) {
  dispatchNumeric(t, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fn(tag);
  });
}

}  // namespace

void im2col(size_t dev, Type t, const void* x, int64_t C, const host::ConvGeom& g, void* col) {
  dispatchGpu(t, "im2col", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, Im2colBody<T>{g, static_cast<const T*>(x), static_cast<T*>(col)}, C * g.kSize * g.posSize,
              "im2col");
  });
}

void col2im(size_t dev, Type t, const void* col, int64_t C, const host::ConvGeom& g, void* x) {
  dispatchGpu(t, "col2im", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, Col2imBody<T>{g, static_cast<const T*>(col), static_cast<T*>(x)}, C * g.imgSize, "col2im");
  });
}

void addChannelBias(size_t dev, Type t, void* y, const void* b, int64_t N, int64_t M, int64_t P) {
  dispatchGpu(t, "conv bias", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, ChannelBiasBody<T>{static_cast<T*>(y), static_cast<const T*>(b), M, P}, N * M * P, "conv bias");
  });
}

void maxPool(size_t dev, Type t, const void* x, void* y, int64_t* ind, int64_t planes, const host::ConvGeom& g,
             int storageOrder) {
  dispatchGpu(t, "max_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, MaxPoolBody<T>{g, static_cast<const T*>(x), static_cast<T*>(y), ind, storageOrder},
              planes * g.posSize, "max_pool");
  });
}

void avgPool(size_t dev, Type t, const void* x, void* y, int64_t planes, const host::ConvGeom& g, bool includePad) {
  dispatchGpu(t, "average_pool", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, AvgPoolBody<T>{g, static_cast<const T*>(x), static_cast<T*>(y), includePad}, planes * g.posSize,
              "average_pool");
  });
}

void maxPoolGrad(size_t dev, Type t, const void* dy, const void* x, void* dx, int64_t planes,
                 const host::ConvGeom& g) {
  dispatchGpu(t, "max_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, MaxPoolGradBody<T>{g, static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx)},
              planes * g.imgSize, "max_pool_grad");
  });
}

void avgPoolGrad(size_t dev, Type t, const void* dy, void* dx, int64_t planes, const host::ConvGeom& g,
                 bool includePad) {
  dispatchGpu(t, "average_pool_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, AvgPoolGradBody<T>{g, static_cast<const T*>(dy), static_cast<T*>(dx), includePad},
              planes * g.imgSize, "average_pool_grad");
  });
}

}  // namespace cuda
}  // namespace onyx
