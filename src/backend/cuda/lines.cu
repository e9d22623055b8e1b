// GPU kernels over the lines of a tensor (kernels.h): cumsum / cumprod, the
// gradient of cumprod, hardmax. A thread per line, each scanned in order
// with the CPU kernels' arithmetic (ops/cumulative.cpp, nn.cpp),
// so results carry the CPU's bits; these ops are not hot enough for a
// parallel scan to matter yet.
#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

struct LineAt {
  int64_t n, inner;
  bool reverse;
  __device__ int64_t base(int64_t r) const { return (r / inner) * n * inner + r % inner; }
  // Element s of line r in scan order.
  __device__ int64_t at(int64_t r, int64_t s) const { return base(r) + (reverse ? n - 1 - s : s) * inner; }
};

template <class T>
struct CumulateBody {
  const T* x;
  T* y;
  LineAt L;
  bool exclusive, product;
  __device__ void operator()(int64_t r) const {
    using A = host::AccOf<T>;
    A acc = product ? A(1) : A(0);
    for(int64_t s = 0; s < L.n; ++s) {
      const int64_t o = L.at(r, s);
      const A v = static_cast<A>(loadDev(x, o));
      if(exclusive) storeDev(y, o, acc);
      acc = product ? acc * v : acc + v;
      if(!exclusive) storeDev(y, o, acc);
    }
  }
};

// dx_j = P_j * z_j (see cumprod_grad in ops/cumulative.cpp).
template <class T>
struct CumprodGradBody {
  const T *x, *g;
  T* dx;
  double* z;
  LineAt L;
  bool exclusive;
  __device__ void operator()(int64_t r) const {
    const int64_t n = L.n;
    double* zr = z + r * n;
    double next = 0;
    for(int64_t j = n - 1; j >= 0; --j) {
      double zj;
      if(j == n - 1) zj = exclusive ? 0.0 : double(loadDev(g, L.at(r, j)));
      else if(exclusive) zj = double(loadDev(g, L.at(r, j + 1))) + double(loadDev(x, L.at(r, j + 1))) * next;
      else zj = double(loadDev(g, L.at(r, j))) + double(loadDev(x, L.at(r, j + 1))) * next;
      zr[j] = zj;
      next = zj;
    }
    double p = 1;
    for(int64_t j = 0; j < n; ++j) {
      storeDev(dx, L.at(r, j), p * zr[j]);
      p *= double(loadDev(x, L.at(r, j)));
    }
  }
};

template <class T>
struct HardmaxBody {
  const T* x;
  T* y;
  LineAt L;
  __device__ void operator()(int64_t r) const {
    using C = typename ComputeOf<T>::type;
    int64_t best = 0;
    C m = loadDev(x, L.at(r, 0));
    for(int64_t j = 1; j < L.n; ++j) {
      const C v = loadDev(x, L.at(r, j));
      if(v > m) {
        m = v;
        best = j;
      }
    }
    for(int64_t j = 0; j < L.n; ++j) storeDev(y, L.at(r, j), C(j == best ? 1 : 0));
  }
};

}  // namespace

void cumulate(size_t dev, Type t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse, bool product) {
  const char* what = product ? "cumprod" : "cumsum";
  dispatchNumeric(t, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev,
              CumulateBody<T>{static_cast<const T*>(x), static_cast<T*>(y), {n, inner, reverse}, exclusive, product},
              outer * inner, what);
  });
}

void cumprodGrad(size_t dev, Type t, const void* x, const void* dy, void* dx, double* z, int64_t outer, int64_t n,
                 int64_t inner, bool exclusive, bool reverse) {
  dispatchFloat(t, "cumprod_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev,
              CumprodGradBody<T>{static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), z,
                                 {n, inner, reverse}, exclusive},
              outer * inner, "cumprod_grad");
  });
}

void hardmax(size_t dev, Type t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner) {
  if(n == 0) return;
  dispatchFloat(t, "hardmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, HardmaxBody<T>{static_cast<const T*>(x), static_cast<T*>(y), {n, inner, false}}, outer * inner,
              "hardmax");
  });
}

}  // namespace cuda
}  // namespace onyx
