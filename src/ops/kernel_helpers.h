// Shared helpers for family files: kernels from functors, dtype dispatch.
// Only src/ops/*.cpp include this.
#pragma once
#include <array>
#include <cstring>
#include <type_traits>

#include <onyx/backend/cpu/element.h>
#include <onyx/backend/cpu/vecmath.h>
#if defined(ONYX_GPU_PLUGIN) && !defined(__CUDACC__)
#error "ONYX_GPU_PLUGIN is defined for the CUDA plugin's nvcc compile of a functor family only"
#endif
#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {
namespace ops {

// v clamped to [lo, hi] (integers), then rounded half to even: adding and
// subtracting 1.5 * 2^52 (double) or 1.5 * 2^23 (float) leaves the nearest
// integer (ties to even, the default rounding mode) for |v| below 2^51 or
// 2^22, which the clamp ensures. NaN clamps to lo (callers that must map
// NaN elsewhere test it themselves). Single comparisons, so that loops over
// it vectorize, unlike nearbyint (libonyx builds without -ffast-math): the
// requantization loops of src/ops/quant.cpp and quantized.cpp.
template <class F>
inline F roundClamped(F v, F lo, F hi) {
  static_assert(std::is_same<F, float>::value || std::is_same<F, double>::value, "float or double");
  constexpr F kMagic = std::is_same<F, double>::value ? F(6755399441055744.0) : F(12582912.0);
  v = v >= lo ? v : lo;
  v = v > hi ? hi : v;
  return (v + kMagic) - kMagic;
}

// Element-wise kernels from a functor, for every device this file is compiled
// for: `.kernel(ops::unaryNumeric(sin(_2)))` registers the CPU kernel in
// libonyx (g++) and, where the CUDA plugin is built, the GPU kernel of the
// same functor: nvcc compiles the family file a second time into the plugin
// (ONYX_GPU_PLUGIN; the list of these families is ONYX_FUNCTOR_FAMILIES in
// CMakeLists.txt), which grafts it onto the op when it loads. That compile's
// generated wrapper includes the device templates (backend/cuda/element.cuh,
// reduce.cuh) before the family file: src/ops includes nothing of the
// plugin's. The inline namespace keeps the two builds of these templates
// apart (no ODR clash).
#ifdef ONYX_GPU_PLUGIN
inline namespace with_cuda {
#else
inline namespace host_only {
#endif

// The float32 fast path of the host kernels (backend/cpu/vecmath.h): an op
// may give a vector form beside its functor, used when every tensor is
// float32 and laid out as the form needs (below); anything else (other types,
// strided broadcasts, float64 gradient checks, the GPU) runs the functor.
namespace vector_path {
// Unary: out and input 0 float32 with one shape. v(x, y, n) runs over the
// flat arrays in blocks across threads (y may be x: in place).
template <class Vec>
bool unary(KernelCtx& c, const Vec& v) {
  if(!host::vec::accelerated()) return false;
  const TensorBase& x = *c.in[0];
  if(c.out.type() != Type::float32 || x.type() != Type::float32 || x.shape() != c.out.shape()) return false;
  const float* xp = x.data<float>();
  float* yp = c.out.data<float>();
  // Transcendentals cost several plain ops per element: split sooner.
  host::vec::forBlocks(x.size(), 4, [&](int64_t b, int64_t e) { v(xp + b, yp + b, e - b); });
  return true;
}
// Binary with broadcasting, where along the innermost (merged) dim each
// input is contiguous or one value: equal shapes, a scalar operand, or a
// per-channel [C,1,1] operand of an NCHW tensor (rows of H*W).
inline bool binary(KernelCtx& c, host::vec::Bin op) {
  if(!host::vec::accelerated()) return false;
  const TensorBase& a = *c.in[0];
  const TensorBase& b = *c.in[1];
  if(c.out.type() != Type::float32 || a.type() != Type::float32 || b.type() != Type::float32) return false;
  host::BroadcastPlan<2> plan(c.out.shape(), {&a.shape(), &b.shape()});
  const int last = plan.rank - 1;
  const int64_t sa = plan.strides[0][last], sb = plan.strides[1][last];
  if(sa > 1 || sb > 1) return false;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = c.out.data<float>();
  if(plan.rank == 1) {  // one run (equal shapes, or a scalar operand): split it in blocks
    host::vec::forBlocks(plan.total, 3, [&](int64_t i, int64_t e) {
      host::vec::binary(op, ap + i * sa, sa, bp + i * sb, sb, yp + i, e - i);
    });
  } else {  // rows along the innermost dim, split across threads by the plan
    plan.run([&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
      host::vec::binary(op, ap + off[0], st[0], bp + off[1], st[1], yp + o, n);
    });
  }
  return true;
}
}  // namespace vector_path

struct OnHost {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { host::elementwise<TOut, TIn...>(f, out, ins...); }
  template <class Vec>
  static bool vectorUnary(KernelCtx& c, const Vec& v) { return vector_path::unary(c, v); }
  static bool vectorBinary(KernelCtx& c, host::vec::Bin op) { return vector_path::binary(c, op); }
};
#ifdef ONYX_GPU_PLUGIN
struct OnGpu {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { cuda::elementwise<TOut, TIn...>(f, out, ins...); }
  template <class Vec>
  static bool vectorUnary(KernelCtx&, const Vec&) { return false; }
  static bool vectorBinary(KernelCtx&, host::vec::Bin) { return false; }
};
#endif

// The element types a form runs on (dispatched on input 0) and its output type.
struct FloatTypes {  // float16/bfloat16 compute in float
  template <class Fn> static void dispatch(Type t, const char* w, Fn&& fn) { dispatchFloat(t, w, fn); }
  template <class T> using Out = T;
};
struct NumericTypes {
  template <class Fn> static void dispatch(Type t, const char* w, Fn&& fn) { dispatchNumeric(t, w, fn); }
  template <class T> using Out = T;
};
struct AnyToBool {  // comparisons: any input type, bool out
  template <class Fn> static void dispatch(Type t, const char* w, Fn&& fn) { dispatchAll(t, w, fn); }
  template <class T> using Out = bool;
};
struct BoolOnly {  // logic: bool in and out (inference checks the types)
  template <class Fn> static void dispatch(Type, const char*, Fn&& fn) { fn(TypeTag<bool>{}); }
  template <class T> using Out = bool;
};

// No vector form: the functor serves every case.
struct NoVector {};

// y = f(x) (N = 1) or y = f(a, b) with broadcasting (N = 2), every input of
// one type T and y of Types::Out<T>; f = make(attrs) is made per run, so it
// can hold the node's attributes. vecMake(attrs), unless NoVector, gives the
// float32 vector form tried first: a callable v(x, y, n) (N = 1) or a
// host::vec::Bin (N = 2).
template <class On, class Types, size_t N, class Make, class VecMake = NoVector>
KernelFn elementwiseOn(Make make, VecMake vecMake = {}) {
  static_assert(N == 1 || N == 2, "element-wise forms take one or two inputs");
  return [make, vecMake](KernelCtx& c) {
    if constexpr(!std::is_same<VecMake, NoVector>::value) {
      if constexpr(N == 1) {
        if(On::vectorUnary(c, vecMake(c.attrs))) return;
      } else {
        if(On::vectorBinary(c, vecMake(c.attrs))) return;
      }
    } else {
      (void)vecMake;  // captured either way (clang: -Wunused-lambda-capture)
    }
    auto f = make(c.attrs);
    Types::dispatch(c.in[0]->type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using TOut = typename Types::template Out<T>;
      if constexpr(N == 1) On::template run<TOut, T>(f, c.out, *c.in[0]);
      else On::template run<TOut, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}
template <class Types, size_t N, class Make, class VecMake = NoVector>
Kernels elementwiseKernels(Make make, VecMake vecMake = {}) {
  // The GPU never takes the vector path (OnGpu declines it).
#ifdef ONYX_GPU_PLUGIN
  return {elementwiseOn<OnHost, Types, N>(make, vecMake), elementwiseOn<OnGpu, Types, N>(make, vecMake)};
#else
  return {elementwiseOn<OnHost, Types, N>(make, vecMake), KernelFn()};
#endif
}
template <class F>
auto fixed(F f) {
  return [f](const Attrs&) { return f; };
}

template <class F> Kernels unaryFloat(F f) { return elementwiseKernels<FloatTypes, 1>(fixed(f)); }
template <class F> Kernels unaryNumeric(F f) { return elementwiseKernels<NumericTypes, 1>(fixed(f)); }
template <class F> Kernels binaryFloat(F f) { return elementwiseKernels<FloatTypes, 2>(fixed(f)); }
template <class F> Kernels binaryNumeric(F f) { return elementwiseKernels<NumericTypes, 2>(fixed(f)); }
// The same with the float32 vector form beside the functor:
// `.kernel(ops::unaryFloat(tanh(_2), host::vec::tanh))`,
// `.kernel(ops::binaryNumeric(_2 + _3, host::vec::Bin::add))`.
template <class F> Kernels unaryFloat(F f, host::vec::UnaryFn v) {
  return elementwiseKernels<FloatTypes, 1>(fixed(f), fixed(v));
}
template <class F> Kernels unaryNumeric(F f, host::vec::UnaryFn v) {
  return elementwiseKernels<NumericTypes, 1>(fixed(f), fixed(v));
}
template <class F> Kernels binaryNumeric(F f, host::vec::Bin op) {
  return elementwiseKernels<NumericTypes, 2>(fixed(f), fixed(op));
}
template <class F> Kernels compare(F f) { return elementwiseKernels<AnyToBool, 2>(fixed(f)); }
template <class F> Kernels logicalUnary(F f) { return elementwiseKernels<BoolOnly, 1>(fixed(f)); }
template <class F> Kernels logicalBinary(F f) { return elementwiseKernels<BoolOnly, 2>(fixed(f)); }
// Kernels written once for both devices: body(on, c) runs element-wise
// work through `on` (OnHost, or OnGpu in the CUDA plugin's nvcc build), as
// `decltype(on)::template run<TOut, TIn...>(f, c.out, ins...)`. For kernels
// that pick their functor or types at run time (where, clip, gelu).
template <class Body>
Kernels onDevices(Body body) {
  KernelFn cpu = [body](KernelCtx& c) { body(OnHost(), c); };
#ifdef ONYX_GPU_PLUGIN
  return {cpu, [body](KernelCtx& c) { body(OnGpu(), c); }};
#else
  return {cpu, KernelFn()};
#endif
}

// Why a random op's GPU kernel draws on the host (OpDef::gpuOnHost): the
// random ops promise that a seed gives the same values on every device (as
// param initializers do), at the cost of a copy of the output.
constexpr const char* kDrawOnHost =
    "random draws are made on the host so that a seed gives the same values on every device";

// y = f(x) on float types with f made from the node's attributes at run
// time: make(attrs) returns the functor (e.g. `_2 * alpha + beta`).
template <class Make> Kernels unaryFloatWith(Make make) { return elementwiseKernels<FloatTypes, 1>(make); }
// The same with a vector form made from the attributes: vecMake(attrs)
// returns a callable v(x, y, n) over float32 arrays.
template <class Make, class VecMake> Kernels unaryFloatWith(Make make, VecMake vecMake) {
  return elementwiseKernels<FloatTypes, 1>(make, vecMake);
}
// A vector form from up to two float attributes of the node:
// vecWith(host::vec::elu, "alpha", "gamma") runs elu(x, y, n, alpha, gamma).
template <class Fn>
auto vecWith(Fn fn, const char* p, const char* q = nullptr) {
  return [fn, p, q](const Attrs& a) {
    float pv = static_cast<float>(a.f(p)), qv = q ? static_cast<float>(a.f(q)) : 0.f;
    return [fn, pv, qv](const float* x, float* y, int64_t n) { fn(x, y, n, pv, qv); };
  };
}
template <class Make> Kernels unaryNumericWith(Make make) { return elementwiseKernels<NumericTypes, 1>(make); }

}  // inline namespace

// Infers like the input but requires a float type.
inline void inferFloatUnary(InferCtx& c) {
  c.requireFloat(0);
  infer::sameAsInput0(c);
}

// out = input 0, byte for byte, on the tensors' device (a kernel made of it
// serves both devices: OpDef::anyDevice).
inline void copyInput0(KernelCtx& c) {
  if(c.out.type() == Type::string) {  // strings live in a vector, not in raw()
    c.out.strings() = c.in[0]->strings();
    return;
  }
  if(c.out.bytes() == 0) return;
  if(c.out.onHost()) std::memcpy(c.out.raw(), c.in[0]->raw(), c.out.bytes());
  else gpuBackend().copyBytes(c.out.getDeviceId().no, c.out.raw(), c.in[0]->raw(), c.out.bytes());
}

// Scalar operand as a rank-0 constant of x's type.
inline Expr scalarLike(Expr x, double v) { return x->graph()->scalar(v, x->value_type()); }

}  // namespace ops
}  // namespace onyx
