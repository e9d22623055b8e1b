// Shared helpers for family files: kernels from functors, dtype dispatch.
// Only src/ops/*.cpp include this.
#pragma once
#include <onyx/backend/cpu/element.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {
namespace ops {

// y = f(x) on float types (float16/bfloat16 compute in float).
template <class F>
KernelFn unaryFloat(F f) {
  return [f](KernelCtx& c) {
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      host::elementwise<T, T>(f, c.out, *c.in[0]);
    });
  };
}

// y = f(x) on every numeric type.
template <class F>
KernelFn unaryNumeric(F f) {
  return [f](KernelCtx& c) {
    dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      host::elementwise<T, T>(f, c.out, *c.in[0]);
    });
  };
}

// y = f(a, b) with broadcasting, same type in and out.
template <class F>
KernelFn binaryNumeric(F f) {
  return [f](KernelCtx& c) {
    dispatchNumeric(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      host::elementwise<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}

template <class F>
KernelFn binaryFloat(F f) {
  return [f](KernelCtx& c) {
    dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      host::elementwise<T, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}

// bool y = f(a, b) with broadcasting; a and b share any type.
template <class F>
KernelFn compare(F f) {
  return [f](KernelCtx& c) {
    dispatchAll(c.in[0]->type(), c.node.type().c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      host::elementwise<bool, T, T>(f, c.out, *c.in[0], *c.in[1]);
    });
  };
}

// Infers like the input but requires a float type.
inline void inferFloatUnary(InferCtx& c) {
  c.requireFloat(0);
  infer::sameAsInput0(c);
}

// Scalar operand as a rank-0 constant of x's type.
inline Expr scalarLike(Expr x, double v) { return x->graph()->scalar(v, x->value_type()); }

}  // namespace ops
}  // namespace onyx
