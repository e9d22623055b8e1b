// GPU element moving and conversion (kernels.h): the primitives of the shape
// ops and of cast/expand, on the device's stream.
#include <onyx/backend/cuda/kernels.h>

#include <cuda/std/limits>

#include <onyx/backend/cpu/strided.h>
#include <onyx/backend/cuda/common.cuh>
#include <onyx/backend/cuda/element.cuh>
#include <onyx/core/dispatch.h>

namespace onyx {
namespace cuda {

namespace {

void checked(cudaError_t e, const char* what, size_t dev) {
  if(e == cudaSuccess) return;
  cudaGetLastError();
  fail("gpu", dev, ": ", what, " failed: ", cudaGetErrorString(e));
}

// One element of W (a word of the element's size) per index.
template <class W>
struct StridedBody {
  host::StridedPlan p;
  W* dst;
  const W* src;
  __device__ void operator()(int64_t i) const {
    int64_t od, os;
    p.offsets(i, od, os);
    dst[od] = src[os];
  }
};

// Elements of any other size: one byte per index.
struct StridedBytesBody {
  host::StridedPlan p;
  char* dst;
  const char* src;
  int64_t esize;
  __device__ void operator()(int64_t i) const {
    int64_t od, os;
    p.offsets(i / esize, od, os);
    const int64_t byte = i % esize;
    dst[od * esize + byte] = src[os * esize + byte];
  }
};

template <class W>
void stridedOf(size_t dev, const host::StridedPlan& p, void* dst, const void* src) {
  forEachOn(dev, StridedBody<W>{p, static_cast<W*>(dst), static_cast<const W*>(src)}, p.total, "strided copy");
}

// y = x converted as the CPU's cast converts (ops/conversion.cpp, kCast).
template <class O>
struct ConvertTo {
  template <class Old, class I>
  __device__ O operator()(Old, I v) const {
    if constexpr(std::is_same<O, I>::value) {
      return v;
    } else if constexpr(std::is_same<O, bool>::value) {
      return v != I(0);
    } else if constexpr(std::is_integral<O>::value) {
      double d = static_cast<double>(v);
      if(d != d) return O(0);
      if(d <= static_cast<double>(::cuda::std::numeric_limits<O>::lowest())) return ::cuda::std::numeric_limits<O>::lowest();
      if(d >= static_cast<double>(::cuda::std::numeric_limits<O>::max())) return ::cuda::std::numeric_limits<O>::max();
      return static_cast<O>(d);
    } else {
      return static_cast<O>(v);
    }
  }
};

template <class W, class I>
struct GatherBody {
  W* dst;
  const W* src;
  const I* idx;
  int64_t m, n, rowElems;
  __device__ void operator()(int64_t e) const {
    int64_t r = e / rowElems, k = e % rowElems;
    int64_t o = r / m, i = static_cast<int64_t>(idx[r % m]);
    if(i < 0) i += n;
    dst[e] = src[(o * n + i) * rowElems + k];
  }
};

template <class W>
void gatherOf(size_t dev, void* dst, const void* src, const void* idx, Type idxType, int64_t outer, int64_t m,
              int64_t n, int64_t rowElems) {
  auto run = [&](auto* ip) {
    using I = std::remove_const_t<std::remove_pointer_t<decltype(ip)>>;
    forEachOn(dev, GatherBody<W, I>{static_cast<W*>(dst), static_cast<const W*>(src), ip, m, n, rowElems},
              outer * m * rowElems, "gather");
  };
  if(idxType == Type::int64) run(static_cast<const int64_t*>(idx));
  else run(static_cast<const int32_t*>(idx));
}

}  // namespace

void gatherRows(size_t dev, void* dst, const void* src, const void* idx, Type idxType, int64_t outer, int64_t m,
                int64_t n, int64_t rowElems, size_t esize) {
  ONYX_ASSERT(idxType == Type::int64 || idxType == Type::int32, "gather indices of type ", idxType);
  switch(esize) {
    case 1: return gatherOf<uint8_t>(dev, dst, src, idx, idxType, outer, m, n, rowElems);
    case 2: return gatherOf<uint16_t>(dev, dst, src, idx, idxType, outer, m, n, rowElems);
    case 4: return gatherOf<uint32_t>(dev, dst, src, idx, idxType, outer, m, n, rowElems);
    case 8: return gatherOf<uint64_t>(dev, dst, src, idx, idxType, outer, m, n, rowElems);
    default:  // other element sizes move as bytes
      return gatherOf<uint8_t>(dev, dst, src, idx, idxType, outer, m, n, rowElems * static_cast<int64_t>(esize));
  }
}

void copyBytes(size_t dev, void* dst, const void* src, size_t bytes) {
  if(bytes == 0 || dst == src) return;
  cudaStream_t s = launchOn(dev);
  checked(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync", dev);
}

void fillZero(size_t dev, void* p, size_t bytes) {
  if(bytes == 0) return;
  cudaStream_t s = launchOn(dev);
  checked(cudaMemsetAsync(p, 0, bytes, s), "cudaMemsetAsync", dev);
}

void copyStrided(size_t dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss, const int64_t* dims,
                 int rank, size_t esize) {
  host::StridedPlan p(ds, ss, dims, rank);
  if(p.total == 0) return;
  if(p.n == 1 && p.a[0] == 1 && p.b[0] == 1) return copyBytes(dev, dst, src, static_cast<size_t>(p.total) * esize);
  switch(esize) {
    case 1: return stridedOf<uint8_t>(dev, p, dst, src);
    case 2: return stridedOf<uint16_t>(dev, p, dst, src);
    case 4: return stridedOf<uint32_t>(dev, p, dst, src);
    case 8: return stridedOf<uint64_t>(dev, p, dst, src);
    default: {
      int64_t e = static_cast<int64_t>(esize);
      forEachOn(dev, StridedBytesBody{p, static_cast<char*>(dst), static_cast<const char*>(src), e}, p.total * e,
                "strided copy");
    }
  }
}

void assign(TensorBase& out, const TensorBase& in) {
  ONYX_ASSERT(!out.onHost() && !in.onHost() && out.getDeviceId() == in.getDeviceId(), "cuda::assign from ",
              in.getDeviceId().toString(), " to ", out.getDeviceId().toString());
  dispatchAll(in.type(), "assign", [&](auto inTag) {
    using I = typename decltype(inTag)::type;
    dispatchAll(out.type(), "assign", [&](auto outTag) {
      using O = typename decltype(outTag)::type;
      elementwise<O, I>(ConvertTo<O>{}, out, in);
    });
  });
}

}  // namespace cuda
}  // namespace onyx
