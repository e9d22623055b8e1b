// Shared helpers for family files: kernels from functors, dtype dispatch.
// Only src/ops/*.cpp include this.
#pragma once
#include <cstring>

#include <onyx/backend/cpu/element.h>
#if defined(ONYX_GPU_PLUGIN) && !defined(__CUDACC__)
#error "ONYX_GPU_PLUGIN is defined for the CUDA plugin's nvcc compile of a functor family only"
#endif
#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {
namespace ops {

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

struct OnHost {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { host::elementwise<TOut, TIn...>(f, out, ins...); }
};
#ifdef ONYX_GPU_PLUGIN
struct OnGpu {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { cuda::elementwise<TOut, TIn...>(f, out, ins...); }
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

// y = f(x) (N = 1) or y = f(a, b) with broadcasting (N = 2), every input of
// one type T and y of Types::Out<T>; f = make(attrs) is made per run, so it
// can hold the node's attributes.
template <class On, class Types, size_t N, class Make>
KernelFn elementwiseOn(Make make) {
  static_assert(N == 1 || N == 2, "element-wise forms take one or two inputs");
  return [make](KernelCtx& c) {
    auto f = make(c.attrs);
    Types::dispatch(c.in[0]->type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using TOut = typename Types::template Out<T>;
      if constexpr(N == 1) On::template run<TOut, T>(f, c.out, *c.in[0]);
      else On::template run<TOut, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}
template <class Types, size_t N, class Make>
Kernels elementwiseKernels(Make make) {
#ifdef ONYX_GPU_PLUGIN
  return {elementwiseOn<OnHost, Types, N>(make), elementwiseOn<OnGpu, Types, N>(make)};
#else
  return {elementwiseOn<OnHost, Types, N>(make), KernelFn()};
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
  if(c.out.bytes() == 0) return;
  if(c.out.onHost()) std::memcpy(c.out.raw(), c.in[0]->raw(), c.out.bytes());
  else gpuBackend().copyBytes(c.out.getDeviceId().no, c.out.raw(), c.in[0]->raw(), c.out.bytes());
}

// Scalar operand as a rank-0 constant of x's type.
inline Expr scalarLike(Expr x, double v) { return x->graph()->scalar(v, x->value_type()); }

}  // namespace ops
}  // namespace onyx
