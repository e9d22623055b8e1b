// Shared helpers for family files: kernels from functors, dtype dispatch.
// Only src/ops/*.cpp include this.
#pragma once
#include <onyx/backend/cpu/element.h>
#ifdef __CUDACC__
#include <onyx/backend/cuda/element.cuh>
#endif
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {
namespace ops {

// Element-wise kernels from a functor, for every device this file is compiled
// for: `.kernel(ops::unaryNumeric(sin(_2)))` registers the CPU kernel and,
// when nvcc compiles the family file (ONYX_CUDA; the list is in
// CMakeLists.txt), the GPU kernel of the same functor. The inline namespace
// keeps the two builds of these templates apart (no ODR clash between
// family files compiled by g++ and by nvcc).
#ifdef __CUDACC__
inline namespace with_cuda {
#else
inline namespace host_only {
#endif

struct OnHost {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { host::elementwise<TOut, TIn...>(f, out, ins...); }
};
#ifdef __CUDACC__
struct OnGpu {
  template <class TOut, class... TIn, class F, class... Ts>
  static void run(F f, TensorBase& out, const Ts&... ins) { cuda::elementwise<TOut, TIn...>(f, out, ins...); }
};
#define ONYX_BOTH_KERNELS(form, f) Kernels{form<OnHost>(f), form<OnGpu>(f)}
#else
#define ONYX_BOTH_KERNELS(form, f) Kernels{form<OnHost>(f), KernelFn()}
#endif

// y = f(x) on float types (float16/bfloat16 compute in float).
template <class On, class F>
KernelFn unaryFloatOn(F f) {
  return [f](KernelCtx& c) {
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<T, T>(f, c.out, *c.in[0]);
    });
  };
}
template <class F>
Kernels unaryFloat(F f) { return ONYX_BOTH_KERNELS(unaryFloatOn, f); }

// y = f(x) on float types with f made from the node's attributes at run
// time: make(attrs) returns the functor (e.g. `_2 * alpha + beta`).
template <class On, class Make>
KernelFn unaryFloatWithOn(Make make) {
  return [make](KernelCtx& c) {
    auto f = make(c.attrs);
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<T, T>(f, c.out, *c.in[0]);
    });
  };
}
template <class Make>
Kernels unaryFloatWith(Make make) { return ONYX_BOTH_KERNELS(unaryFloatWithOn, make); }

// y = f(x) on every numeric type.
template <class On, class F>
KernelFn unaryNumericOn(F f) {
  return [f](KernelCtx& c) {
    dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<T, T>(f, c.out, *c.in[0]);
    });
  };
}
template <class F>
Kernels unaryNumeric(F f) { return ONYX_BOTH_KERNELS(unaryNumericOn, f); }

// y = f(a, b) with broadcasting, same type in and out.
template <class On, class F>
KernelFn binaryNumericOn(F f) {
  return [f](KernelCtx& c) {
    dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}
template <class F>
Kernels binaryNumeric(F f) { return ONYX_BOTH_KERNELS(binaryNumericOn, f); }

template <class On, class F>
KernelFn binaryFloatOn(F f) {
  return [f](KernelCtx& c) {
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}
template <class F>
Kernels binaryFloat(F f) { return ONYX_BOTH_KERNELS(binaryFloatOn, f); }

// bool y = f(a, b) with broadcasting; a and b share any type.
template <class On, class F>
KernelFn compareOn(F f) {
  return [f](KernelCtx& c) {
    dispatchAll(c.in[0]->type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      On::template run<bool, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}
template <class F>
Kernels compare(F f) { return ONYX_BOTH_KERNELS(compareOn, f); }

// bool y = f(a) and bool y = f(a, b) (broadcasting) on bool tensors.
template <class On, class F>
KernelFn logicalUnaryOn(F f) {
  return [f](KernelCtx& c) { On::template run<bool, bool>(f, c.out, *c.in[0]); };
}
template <class F>
Kernels logicalUnary(F f) { return ONYX_BOTH_KERNELS(logicalUnaryOn, f); }
template <class On, class F>
KernelFn logicalBinaryOn(F f) {
  return [f](KernelCtx& c) { On::template run<bool, bool, bool>(f, c.out, *c.in[0], *c.in[1]); };
}
template <class F>
Kernels logicalBinary(F f) { return ONYX_BOTH_KERNELS(logicalBinaryOn, f); }

#undef ONYX_BOTH_KERNELS
}  // inline namespace

// Infers like the input but requires a float type.
inline void inferFloatUnary(InferCtx& c) {
  c.requireFloat(0);
  infer::sameAsInput0(c);
}

// Scalar operand as a rank-0 constant of x's type.
inline Expr scalarLike(Expr x, double v) { return x->graph()->scalar(v, x->value_type()); }

}  // namespace ops
}  // namespace onyx
