// Element-wise functors in the seed's style:  Element(_1 = sin(_2), out, in).
// Placeholders _1.._4 stand for the tensors passed to Element/Add in order;
// expressions over them are evaluated per element in the element's compute
// type (float for float16/bfloat16). The same headers compile under nvcc, so
// the CUDA backend instantiates kernels from the same functors where used.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <onyx/core/hd.h>

namespace onyx {
namespace functional {

struct FunctorBase {};
template <class F>
constexpr bool isFunctor = std::is_base_of<FunctorBase, std::decay_t<F>>::value;

template <int N>
struct Arg;

template <class L, class R>
struct Assign : FunctorBase {
  L l; R r;
  template <class... A>
  ONYX_HD auto operator()(A... a) const { return r(a...); }
};

template <int N>
struct Arg : FunctorBase {
  template <class A0, class... A>
  ONYX_HD auto operator()(A0 a0, A... a) const {
    if constexpr(N == 1) return a0;
    else return Arg<N - 1>{}(a...);
  }
  template <class R, class = std::enable_if_t<isFunctor<R>>>
  Assign<Arg<N>, R> operator=(R r) const { return {{}, {}, r}; }
};

// A captured scalar (a literal in a functor expression).
template <class T>
struct Capture : FunctorBase {
  T v;
  template <class... A>
  ONYX_HD auto operator()(A...) const {
    using C = std::common_type_t<A...>;
    return static_cast<C>(v);
  }
};

template <class T>
ONYX_HD auto lift(T v) {
  if constexpr(isFunctor<T>) return v;
  else return Capture<T>{{}, v};
}

#define ONYX_UNARY(NAME, EXPR)                                                    \
  template <class X>                                                              \
  struct NAME##Op : FunctorBase {                                                 \
    X x;                                                                          \
    template <class... A>                                                         \
    ONYX_HD auto operator()(A... a) const {                                       \
      auto v = x(a...);                                                           \
      using T = decltype(v);                                                      \
      (void)sizeof(T);                                                            \
      return static_cast<T>(EXPR);                                                \
    }                                                                             \
  };                                                                              \
  template <class X, class = std::enable_if_t<isFunctor<X>>>                      \
  ONYX_HD NAME##Op<X> NAME(X x) { return {{}, x}; }

#define ONYX_BINARY(NAME, EXPR)                                                   \
  template <class X, class Y>                                                     \
  struct NAME##Op : FunctorBase {                                                 \
    X x; Y y;                                                                     \
    template <class... A>                                                         \
    ONYX_HD auto operator()(A... a) const {                                       \
      using T = std::common_type_t<decltype(x(a...)), decltype(y(a...))>;         \
      T u = static_cast<T>(x(a...)), w = static_cast<T>(y(a...));                 \
      return static_cast<T>(EXPR);                                                \
    }                                                                             \
  };                                                                              \
  template <class X, class Y, class = std::enable_if_t<isFunctor<X> || isFunctor<Y>>> \
  ONYX_HD auto NAME(X x, Y y) {                                                   \
    auto lx = lift(x);                                                            \
    auto ly = lift(y);                                                            \
    return NAME##Op<decltype(lx), decltype(ly)>{{}, lx, ly};                      \
  }

// Scalar helpers used by the functors (and by reference code in tests).
template <class T> ONYX_HD T sigmoidOf(T v) {
  // Split by sign so exp never overflows.
  return v >= T(0) ? T(1) / (T(1) + std::exp(-v)) : std::exp(v) / (T(1) + std::exp(v));
}
template <class T> ONYX_HD T softplusOf(T v) {
  return v > T(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
}
// Integer add/sub/mul wrap around in two's complement, as numpy and
// onnxruntime give them, computed in unsigned int / uint64 (signed overflow,
// including that of int16 or uint16 promoted to int, is undefined
// behaviour). Floats and bool as written.
template <class T>
using WrapInt = std::bool_constant<std::is_integral<T>::value && !std::is_same<T, bool>::value>;
template <class T>
using WrapWord = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;
template <class T> ONYX_HD T wrapAdd(T u, T w) {
  if constexpr(WrapInt<T>::value) return T(WrapWord<T>(u) + WrapWord<T>(w));
  else return static_cast<T>(u + w);
}
template <class T> ONYX_HD T wrapSub(T u, T w) {
  if constexpr(WrapInt<T>::value) return T(WrapWord<T>(u) - WrapWord<T>(w));
  else return static_cast<T>(u - w);
}
template <class T> ONYX_HD T wrapMul(T u, T w) {
  if constexpr(WrapInt<T>::value) return T(WrapWord<T>(u) * WrapWord<T>(w));
  else return static_cast<T>(u * w);
}
// -v; signed integers wrap (-INT_MIN is INT_MIN, as in numpy) instead of
// overflowing, which is undefined.
template <class T> ONYX_HD T negOf(T v) {
  if constexpr(std::is_integral<T>::value && std::is_signed<T>::value)
    return T(typename std::make_unsigned<T>::type(0) - typename std::make_unsigned<T>::type(v));
  else return -v;
}
template <class T> ONYX_HD T absOf(T v) {
  if constexpr(std::is_unsigned<T>::value) return v;
  // Integers negate in unsigned arithmetic: |INT_MIN| wraps to INT_MIN, as in
  // numpy and onnxruntime, where -v would be undefined.
  else if constexpr(std::is_integral<T>::value)
    return v < T(0) ? negOf(v) : v;
  else return v < T(0) ? T(-v) : v;
}
// Rounds halfway cases to even, whatever the rounding mode (as ONNX Round).
template <class T> ONYX_HD T roundHalfEvenOf(T v) {
  T f = std::floor(v);
  T d = v - f;
  if(d > T(0.5)) return f + T(1);
  if(d < T(0.5)) return f;
  return std::fmod(f, T(2)) == T(0) ? f : f + T(1);
}
// u to the power w. Integers by repeated squaring, wrapping as the type
// does: exact on every device (nvcc's pow on integers gave pow(3, 1) = 2),
// where the double pow loses bits above 2^53. A negative integer exponent
// gives the truncated quotient, as the double pow converted back did: 1 and
// -1 keep their powers, everything else is 0.
template <class T> ONYX_HD T powOf(T u, T w) {
  if constexpr(std::is_integral<T>::value && !std::is_same<T, bool>::value) {
    // Unsigned, and at least 32 bits: uint8/uint16 products would be
    // promoted to int, where they can overflow.
    using U = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
    if constexpr(std::is_signed<T>::value) {
      if(w < 0) return u == T(1) ? T(1) : u == T(-1) ? ((w & 1) ? T(-1) : T(1)) : T(0);
    }
    U r = 1, b = static_cast<U>(u);
    for(U e = static_cast<U>(w); e; e >>= 1) {
      if(e & 1u) r = static_cast<U>(r * b);
      b = static_cast<U>(b * b);
    }
    return static_cast<T>(r);
  } else {
    return std::pow(u, w);
  }
}
// v < 0, without a pointless compare for unsigned types.
template <class T> ONYX_HD bool isNegative(T v) {
  if constexpr(std::is_unsigned<T>::value) return false;
  else return v < T(0);
}
// NaN stays NaN, as in PyTorch and numpy.
template <class T> ONYX_HD T reluOf(T v) {
  if constexpr(std::is_unsigned<T>::value) return v;
  else return v < T(0) ? T(0) : v;
}
template <class T> ONYX_HD T signOf(T v) {
  if constexpr(std::is_unsigned<T>::value) return static_cast<T>(v > T(0));
  else return static_cast<T>((T(0) < v) - (v < T(0)));
}

ONYX_UNARY(neg, negOf(v))
ONYX_UNARY(abs, absOf(v))
ONYX_UNARY(sign, signOf(v))
ONYX_UNARY(exp, std::exp(v))
ONYX_UNARY(expm1, std::expm1(v))
ONYX_UNARY(log, std::log(v))
ONYX_UNARY(sqrt, std::sqrt(v))
ONYX_UNARY(reciprocal, T(1) / v)
ONYX_UNARY(sin, std::sin(v))
ONYX_UNARY(cos, std::cos(v))
ONYX_UNARY(tan, std::tan(v))
ONYX_UNARY(tanh, std::tanh(v))
ONYX_UNARY(erf, std::erf(v))
ONYX_UNARY(sigmoid, sigmoidOf(v))
ONYX_UNARY(softplus, softplusOf(v))
ONYX_UNARY(relu, reluOf(v))
ONYX_UNARY(floor, std::floor(v))
ONYX_UNARY(ceil, std::ceil(v))
ONYX_UNARY(roundEven, roundHalfEvenOf(v))
ONYX_UNARY(acos, std::acos(v))
ONYX_UNARY(asin, std::asin(v))
ONYX_UNARY(atan, std::atan(v))
ONYX_UNARY(sinh, std::sinh(v))
ONYX_UNARY(cosh, std::cosh(v))
ONYX_UNARY(asinh, std::asinh(v))
ONYX_UNARY(acosh, std::acosh(v))
ONYX_UNARY(atanh, std::atanh(v))
ONYX_UNARY(softsign, v / (T(1) + std::fabs(v)))
ONYX_UNARY(hardSwish, v * std::fmax(T(0), std::fmin(T(1), v * T(1.0 / 6.0) + T(0.5))))
ONYX_UNARY(mish, v * std::tanh(softplusOf(v)))
ONYX_UNARY(logicalNot, !v)

ONYX_BINARY(prelu, isNegative(u) ? wrapMul(u, w) : u)  // (integers wrap, as mul: a signed overflow was UB, found by the fuzzer)
ONYX_BINARY(reluGrad, w > T(0) ? u : T(0))
ONYX_BINARY(add, wrapAdd(u, w))
ONYX_BINARY(sub, wrapSub(u, w))
ONYX_BINARY(mul, wrapMul(u, w))
ONYX_BINARY(div, u / w)
ONYX_BINARY(pow, powOf(u, w))
ONYX_BINARY(fmaxOf, std::fmax(u, w))
ONYX_BINARY(fminOf, std::fmin(u, w))
ONYX_BINARY(minimum, w < u ? w : u)
ONYX_BINARY(maximum, u < w ? w : u)
ONYX_BINARY(lt, u < w)
ONYX_BINARY(le, u <= w)
ONYX_BINARY(gt, u > w)
ONYX_BINARY(ge, u >= w)
ONYX_BINARY(eq, u == w)
ONYX_BINARY(ne, u != w)
ONYX_BINARY(logicalAnd, u && w)
ONYX_BINARY(logicalOr, u || w)
ONYX_BINARY(logicalXor, (u != T(0)) != (w != T(0)))

template <class X, class Y, class = std::enable_if_t<isFunctor<X> || isFunctor<Y>>> ONYX_HD auto operator+(X x, Y y) { return add(x, y); }
template <class X, class Y, class = std::enable_if_t<isFunctor<X> || isFunctor<Y>>> ONYX_HD auto operator-(X x, Y y) { return sub(x, y); }
template <class X, class Y, class = std::enable_if_t<isFunctor<X> || isFunctor<Y>>> ONYX_HD auto operator*(X x, Y y) { return mul(x, y); }
template <class X, class Y, class = std::enable_if_t<isFunctor<X> || isFunctor<Y>>> ONYX_HD auto operator/(X x, Y y) { return div(x, y); }
template <class X, class = std::enable_if_t<isFunctor<X>>> ONYX_HD auto operator-(X x) { return neg(x); }

// if_then_else(c, a, b): c != 0 ? a : b
template <class C, class X, class Y>
struct IfThenElseOp : FunctorBase {
  C c; X x; Y y;
  template <class... A>
  ONYX_HD auto operator()(A... a) const {
    using T = std::common_type_t<decltype(x(a...)), decltype(y(a...))>;
    return c(a...) ? static_cast<T>(x(a...)) : static_cast<T>(y(a...));
  }
};
template <class C, class X, class Y>
ONYX_HD auto if_then_else(C c, X x, Y y) {
  auto lc = lift(c); auto lx = lift(x); auto ly = lift(y);
  return IfThenElseOp<decltype(lc), decltype(lx), decltype(ly)>{{}, lc, lx, ly};
}

#undef ONYX_UNARY
#undef ONYX_BINARY

namespace placeholders {
constexpr Arg<1> _1{};
constexpr Arg<2> _2{};
constexpr Arg<3> _3{};
constexpr Arg<4> _4{};
}  // namespace placeholders
using namespace placeholders;

}  // namespace functional
}  // namespace onyx
