// GPU index kernels (kernels.h): argmax / argmin, scatter_add (a stable
// sort of the targets, then a sum over each run of equal targets: no
// atomics, the CPU's order of additions, so the same bits), and trilu's
// masked copy,
// computed as the CPU kernels compute them (ops/indexing.cpp, slicing.cpp,
// linalg.cpp).
#include <onyx/backend/cuda/kernels.h>

#include <cub/device/device_radix_sort.cuh>

#include <onyx/backend/cpu/combine.h>
#include <onyx/backend/cuda/common.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

template <class A>
__device__ inline bool isNanDev(A v) {
  if constexpr(std::is_floating_point<A>::value) return v != v;
  else return false;
}
// a > b with NaN above every number (as `above` in ops/indexing.cpp).
template <class A>
__device__ inline bool aboveDev(A a, A b) {
  if(isNanDev(a)) return !isNanDev(b);
  if(isNanDev(b)) return false;
  return a > b;
}

// One line per thread, scanned in order as the CPU does, so ties and NaNs
// resolve the same way.
template <class T>
struct ArgBody {
  const T* x;
  int64_t* y;
  int64_t n, inner;
  bool max, last;
  __device__ void operator()(int64_t r) const {
    const int64_t base = (r / inner) * n * inner + r % inner;
    auto best = loadDev(x, base);  // halves compare (and are NaN) as floats
    int64_t at = 0;
    for(int64_t j = 1; j < n; ++j) {
      const auto v = loadDev(x, base + j * inner);
      const bool better = max ? aboveDev(v, best) : aboveDev(best, v);
      if(better || (last && (v == best || (isNanDev(v) && isNanDev(best))))) {
        best = v;
        at = j;
      }
    }
    y[r] = at;
  }
};

// Element j of line r lands at its rank among the line (how many elements
// come before it: better, or as good with a smaller index), if that is < k.
// The order is strict and total, so each of the k places is written once,
// with the CPU's result (its partial sort under the same order). O(n) per
// element: fine for the usual k and n (classes, beams), slow for very long
// lines.
template <class T>
struct TopkBody {
  const T* x;
  int64_t* y;
  int64_t n, inner, k;
  bool largest;
  __device__ bool before(typename ComputeOf<T>::type a, int64_t i, typename ComputeOf<T>::type b, int64_t j) const {
    const bool first = largest ? aboveDev(a, b) : aboveDev(b, a);
    const bool second = largest ? aboveDev(b, a) : aboveDev(a, b);
    return first || (!second && i < j);
  }
  __device__ void operator()(int64_t e) const {
    const int64_t r = e / n, j = e % n;
    const int64_t base = (r / inner) * n * inner + r % inner;
    const auto v = loadDev(x, base + j * inner);
    int64_t rank = 0;
    for(int64_t i = 0; i < n && rank < k; ++i)
      if(i != j && before(loadDev(x, base + i * inner), i, v, j)) ++rank;
    if(rank < k) y[(r / inner) * k * inner + rank * inner + r % inner] = j;
  }
};

// Element e of rows of m: kept or zero by the diagonal offset k.
template <class W>
struct TriluBody {
  const W* x;
  W* y;
  int64_t n, m, k;
  bool upper;
  __device__ void operator()(int64_t e) const {
    const int64_t j = e % m, i = (e / m) % n;
    const bool keep = upper ? j - i >= k : j - i <= k;
    y[e] = keep ? x[e] : W(0);
  }
};

// y element e = (o, i, k) of [outer, n, inner] sums the update rows j that
// target i, in ascending j: rows[starts[i] .. starts[i + 1]) lists them.
// The sort's input: key j = index j made non-negative, value j = j; an
// index out of [-n, n) raises *bad.
template <class I>
struct ScatterKeysBody {
  const I* idx;
  int64_t* keys;
  int64_t* vals;
  int64_t n;
  int* bad;
  __device__ void operator()(int64_t j) const {
    int64_t i = static_cast<int64_t>(idx[j]);
    if(i < -n || i >= n) {
      *bad = 1;
      i = 0;
    } else if(i < 0) {
      i += n;
    }
    keys[j] = i;
    vals[j] = j;
  }
};

// y[o, key, k] for the run of equal keys that starts at sorted position p:
// the u rows of the run, in ascending j (the sort is stable).
template <class T>
struct ScatterRunBody {
  const T* u;
  T* y;
  const int64_t* keys;
  const int64_t* vals;
  int64_t n, m, inner;
  bool accumulate;  // onto y as it is (a later pair of a scatter_add), not onto zeros
  __device__ void operator()(int64_t e) const {
    const int64_t k = e % inner, p = (e / inner) % m, o = e / (inner * m);
    const int64_t key = keys[p];
    if(p > 0 && keys[p - 1] == key) return;  // not the start of its run
    using C = typename ComputeOf<T>::type;
    T* at = y + (o * n + key) * inner + k;
    T sum = accumulate ? *at : T(0);  // rounded to T after every addition, as the CPU stores it
    for(int64_t q = p; q < m && keys[q] == key; ++q)
      sum = static_cast<T>(static_cast<C>(static_cast<C>(sum) + loadDev(u, (o * m + vals[q]) * inner + k)));
    *at = sum;
  }
};

// y element e of a pad: along each axis k its index maps to x's index
// maps[mapOff[k] + i_k], -1 meaning the fill value.
template <class T>
struct PadBody {
  const T* x;
  T* y;
  const int64_t* maps;
  int rank;
  int64_t dims[16], strides[16], mapOff[16];
  T value;
  __device__ void operator()(int64_t e) const {
    int64_t off = 0, rem = e;
    for(int k = rank - 1; k >= 0; --k) {
      const int64_t mk = maps[mapOff[k] + rem % dims[k]];
      rem /= dims[k];
      if(mk < 0) {
        y[e] = value;
        return;
      }
      off += mk * strides[k];
    }
    y[e] = x[off];
  }
};

// Element e = (t, j) of dst rows of `row` elements (words W of the
// element's size) = src[offs[t] + j].
template <class W>
struct GatherAtBody {
  W* dst;
  const W* src;
  const int64_t* offs;
  int64_t row;
  __device__ void operator()(int64_t e) const { dst[e] = src[offs[e / row] + e % row]; }
};

// y row targets[q], element j, combines the rows srcs[starts[q] ..
// starts[q + 1]) of u in order (red 0: the last one replaces).
template <class T>
struct ScatterAtBody {
  T* y;
  const T* u;
  const int64_t *targets, *starts, *srcs;
  int64_t s;
  int red;
  __device__ void operator()(int64_t e) const {
    const int64_t q = e / s, j = e % s, o = targets[q] + j;
    if(red == 0) {
      y[o] = u[srcs[starts[q + 1] - 1] * s + j];
      return;
    }
    for(int64_t p = starts[q]; p < starts[q + 1]; ++p)
      storeDev(y, o, host::combine(red, loadDev(y, o), loadDev(u, srcs[p] * s + j)));
  }
};

}  // namespace

void padMapped(size_t dev, Type t, const void* x, void* y, const Shape& out, const Shape& in, const int64_t* maps,
               double value) {
  const int rank = out.rank();
  ONYX_CHECK(rank <= 16, "pad: tensors of rank ", rank, " are not supported (at most 16)");
  dispatchAll(t, "pad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    PadBody<T> b{static_cast<const T*>(x), static_cast<T*>(y), maps, rank, {}, {}, {}, castFromDouble<T>(value)};
    auto st = in.strides();
    int64_t mo = 0;
    for(int k = 0; k < rank; ++k) {
      b.dims[k] = out.dims()[k];
      b.strides[k] = st[k];
      b.mapOff[k] = mo;
      mo += out.dims()[k];
    }
    forEachOn(dev, b, out.elements(), "pad");
  });
}

namespace {
// Scratch layout: keys in/out, values in/out (m int64 each), the bad-index
// flag, then cub's temporary storage.
size_t sortBytes(int64_t m) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                  static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                  static_cast<int>(m));
  return bytes;
}
size_t headBytes(int64_t m) { return static_cast<size_t>(4 * m) * sizeof(int64_t) + 256; }
}  // namespace

size_t scatterAddScratch(int64_t m) { return headBytes(m) + sortBytes(m); }

bool scatterAdd(size_t dev, Type t, const void* u, void* y, Type it, const void* idx, int64_t outer, int64_t n,
                int64_t m, int64_t inner, void* scratch, bool accumulate) {
  ONYX_CHECK(m <= INT32_MAX, "scatter_add: ", m, " indices on a GPU (at most 2^31 - 1)");
  if(m == 0) {
    if(!accumulate) fillZero(dev, y, typeBytes(t, static_cast<size_t>(outer * n * inner)));
    return true;
  }
  auto* keys = static_cast<int64_t*>(scratch);
  int64_t *keysOut = keys + m, *vals = keys + 2 * m, *valsOut = keys + 3 * m;
  int* bad = reinterpret_cast<int*>(keys + 4 * m);
  void* temp = static_cast<char*>(scratch) + headBytes(m);
  size_t tempBytes = sortBytes(m);
  cudaStream_t s = launchOn(dev);
  ONYX_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), s) == cudaSuccess, "scatter_add: cudaMemsetAsync failed");
  dispatchIndex(it, "scatter_add", [&](auto itag) {
    using I = typename decltype(itag)::type;
    forEachOn(dev, ScatterKeysBody<I>{static_cast<const I*>(idx), keys, vals, n, bad}, m, "scatter_add");
  });
  int flag = 0;
  ONYX_CHECK(cudaMemcpyAsync(&flag, bad, sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess &&
                 cudaStreamSynchronize(s) == cudaSuccess,
             "scatter_add: reading the index check back failed");
  if(flag) return false;
  int bits = 1;
  while(bits < 63 && (int64_t(1) << bits) < n) ++bits;  // keys are in [0, n)
  cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, tempBytes, keys, keysOut, vals, valsOut, static_cast<int>(m),
                                                  0, bits, s);
  ONYX_CHECK(e == cudaSuccess, "scatter_add: the index sort failed: ", cudaGetErrorString(e));
  if(!accumulate) fillZero(dev, y, typeBytes(t, static_cast<size_t>(outer * n * inner)));
  dispatchNumeric(t, "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev,
              ScatterRunBody<T>{static_cast<const T*>(u), static_cast<T*>(y), keysOut, valsOut, n, m, inner, accumulate},
              outer * m * inner, "scatter_add");
  });
  return true;
}

void argExtreme(size_t dev, Type t, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool max,
                bool last) {
  dispatchNumeric(t, max ? "argmax" : "argmin", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, ArgBody<T>{static_cast<const T*>(x), y, n, inner, max, last}, outer * inner,
              max ? "argmax" : "argmin");
  });
}

void topkIndices(size_t dev, Type t, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, int64_t k,
                 bool largest) {
  if(k == 0) return;
  dispatchNumeric(t, "topk_indices", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, TopkBody<T>{static_cast<const T*>(x), y, n, inner, k, largest}, outer * inner * n, "topk_indices");
  });
}

void trilu(size_t dev, const void* x, void* y, int64_t count, int64_t n, int64_t m, int64_t k, bool upper,
           size_t esize) {
  auto run = [&](auto word) {
    using W = decltype(word);
    forEachOn(dev, TriluBody<W>{static_cast<const W*>(x), static_cast<W*>(y), n, m, k, upper}, count, "trilu");
  };
  switch(esize) {
    case 1: return run(uint8_t());
    case 2: return run(uint16_t());
    case 4: return run(uint32_t());
    case 8: return run(uint64_t());
    default: fail("trilu: elements of ", esize, " bytes are not supported on the GPU");
  }
}

void gatherAt(size_t dev, void* dst, const void* src, const int64_t* offs, int64_t rows, int64_t rowElems,
              size_t esize) {
  auto run = [&](auto word) {
    using W = decltype(word);
    forEachOn(dev, GatherAtBody<W>{static_cast<W*>(dst), static_cast<const W*>(src), offs, rowElems},
              rows * rowElems, "gather");
  };
  switch(esize) {
    case 1: return run(uint8_t());
    case 2: return run(uint16_t());
    case 4: return run(uint32_t());
    case 8: return run(uint64_t());
    default: fail("gather: elements of ", esize, " bytes are not supported on the GPU");
  }
}

void scatterAt(size_t dev, Type t, void* y, const void* u, const int64_t* targets, const int64_t* starts,
               const int64_t* srcs, int64_t count, int64_t s, int red) {
  if(red == 0) {  // any element type: move words of its size
    auto run = [&](auto word) {
      using W = decltype(word);
      forEachOn(dev, ScatterAtBody<W>{static_cast<W*>(y), static_cast<const W*>(u), targets, starts, srcs, s, 0},
                count * s, "scatter");
    };
    switch(typeBits(t)) {
      case 8: return run(uint8_t());
      case 16: return run(uint16_t());
      case 32: return run(uint32_t());
      case 64: return run(uint64_t());
      default: fail("scatter: element type ", t, " is not supported on the GPU");
    }
  }
  dispatchNumeric(t, "scatter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forEachOn(dev, ScatterAtBody<T>{static_cast<T*>(y), static_cast<const T*>(u), targets, starts, srcs, s, red},
              count * s, "scatter");
  });
}

}  // namespace cuda
}  // namespace onyx
