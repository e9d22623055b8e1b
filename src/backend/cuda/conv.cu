// GPU convolution primitives (kernels.h): im2col, col2im and the channel
// bias, for convolution as windows and cuBLAS GEMMs, as the CPU computes it.
// col2im gathers (a thread per image element sums the taps that reach it),
// so it needs no atomics and is deterministic.
#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

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
    const int64_t i = e % g.imgSize, c = e / g.imgSize;
    const int64_t at[3] = {i / (g.img[1] * g.img[2]), (i / g.img[2]) % g.img[1], i % g.img[2]};
    T sum = T();
    for(int64_t k0 = 0; k0 < g.k[0]; ++k0) {
      const int64_t r0 = at[0] + g.pb[0] - k0 * g.d[0];
      if(r0 < 0 || r0 % g.s[0] != 0 || r0 / g.s[0] >= g.pos[0]) continue;
      for(int64_t k1 = 0; k1 < g.k[1]; ++k1) {
        const int64_t r1 = at[1] + g.pb[1] - k1 * g.d[1];
        if(r1 < 0 || r1 % g.s[1] != 0 || r1 / g.s[1] >= g.pos[1]) continue;
        for(int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const int64_t r2 = at[2] + g.pb[2] - k2 * g.d[2];
          if(r2 < 0 || r2 % g.s[2] != 0 || r2 / g.s[2] >= g.pos[2]) continue;
          const int64_t tap = (k0 * g.k[1] + k1) * g.k[2] + k2;
          const int64_t p = ((r0 / g.s[0]) * g.pos[1] + r1 / g.s[1]) * g.pos[2] + r2 / g.s[2];
          sum += col[(c * g.kSize + tap) * g.posSize + p];
        }
      }
    }
    x[e] = sum;
  }
};

template <class T>
struct ChannelBiasBody {
  T* y;
  const T* b;
  int64_t M, P;
  __device__ void operator()(int64_t e) const { y[e] += b[(e / P) % M]; }
};

// fn(TypeTag<T>) for the element types the GPU kernels take.
template <class Fn>
void dispatchGpu(Type t, const char* what, Fn&& fn) {
  dispatchNumeric(t, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr(!kGpuType<T>) fail(what, ": element type ", t, " is not supported on the GPU yet");
    else fn(tag);
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

}  // namespace cuda
}  // namespace onyx
