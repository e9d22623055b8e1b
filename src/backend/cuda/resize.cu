// GPU kernels of resize and its adjoint (kernels.h), one axis per pass on
// double buffers, from the taps ops/resize.cpp computes on the host: the
// same sums in the same order as its applyAxis / applyAxisAdjoint, so the
// same bits. The adjoint gathers (each input element sums the (output,
// tap) pairs listed for it, in the CPU's order of additions): no atomics.

#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

struct AxisBody {
  const double* src;
  double* dst;
  int64_t in, out, inner, n;
  const int64_t* idx;
  const double* w;
  const uint8_t* extrap;
  double ev;
  __device__ void operator()(int64_t e) const {
    const int64_t i = e % inner, j = (e / inner) % out, oo = e / (inner * out);
    if(in == 0 || extrap[j]) {
      dst[e] = in == 0 ? 0.0 : ev;
      return;
    }
    double acc = 0.0;
    for(int64_t k = 0; k < n; ++k) {
      const double wk = w[j * n + k];
      if(wk == 0) continue;
      acc += wk * src[(oo * in + idx[j * n + k]) * inner + i];
    }
    dst[e] = acc;
  }
};

struct AdjointBody {
  const double* src;
  double* dst;
  int64_t in, out, inner, n;
  const double* w;
  const int64_t *starts, *lists;
  __device__ void operator()(int64_t e) const {
    const int64_t i = e % inner, p = (e / inner) % in, oo = e / (inner * in);
    double acc = 0.0;
    for(int64_t q = starts[p]; q < starts[p + 1]; ++q) {
      const int64_t jk = lists[q];
      acc += w[jk] * src[(oo * out + jk / n) * inner + i];
    }
    dst[e] = acc;
  }
};

template <class T>
struct ToDoubleBody {
  const T* src;
  double* dst;
  __device__ void operator()(int64_t i) const { dst[i] = static_cast<double>(loadDev(src, i)); }
};

// Integers round to nearest even and saturate (NaN to 0), as castFromDouble
// of nearbyint; floats store as host::store does.
template <class T>
struct FromDoubleBody {
  const double* src;
  T* dst;
  __device__ void operator()(int64_t i) const {
    const double v = src[i];
    if constexpr(std::is_integral<T>::value) {
      dst[i] = saturateToInt<T>(nearbyint(v));
    } else {
      storeDev(dst, i, v);
    }
  }
};

}  // namespace

void resizeAxis(size_t dev, const double* src, double* dst, int64_t outer, int64_t in, int64_t out, int64_t inner,
                const int64_t* idx, const double* w, const uint8_t* extrap, int64_t n, double ev) {
  forEachOn(dev, AxisBody{src, dst, in, out, inner, n, idx, w, extrap, ev}, outer * out * inner, "resize");
}

void resizeAxisAdjoint(size_t dev, const double* src, double* dst, int64_t outer, int64_t in, int64_t out,
                       int64_t inner, const double* w, const int64_t* starts, const int64_t* lists, int64_t n) {
  forEachOn(dev, AdjointBody{src, dst, in, out, inner, n, w, starts, lists}, outer * in * inner, "resize_grad");
}

void toDouble(size_t dev, Type t, const void* src, double* dst, int64_t count) {
  dispatchNumeric(t, "resize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, ToDoubleBody<T>{static_cast<const T*>(src), dst}, count, "resize");
  });
}

void fromDouble(size_t dev, Type t, const double* src, void* dst, int64_t count) {
  dispatchNumeric(t, "resize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, FromDoubleBody<T>{src, static_cast<T*>(dst)}, count, "resize");
  });
}

}  // namespace cuda
}  // namespace onyx
