// Run-time element type -> compile-time C++ type.
//   dispatchFloat(t, "sin", [&](auto tag){ using T = typename decltype(tag)::type; ... });
// The name is used in the error when the type is not supported by that op.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <onyx/core/error.h>
#include <onyx/core/hd.h>
#include <onyx/core/types.h>

namespace onyx {

// r in integer type I (not bool), defined everywhere: NaN gives 0, values at
// or past the type's ends give those ends (a plain cast is undefined there).
// The one place for host and device code (castFromDouble, the GPU resize's
// store, Shrink).
template <class I>
ONYX_HD I saturateToInt(double r) {
  static_assert(std::is_integral<I>::value && !std::is_same<I, bool>::value, "saturateToInt: an integer type");
  using U = std::make_unsigned_t<I>;
  constexpr bool isSigned = I(-1) < I(0);
  constexpr I hi = isSigned ? I(U(~U(0)) >> 1) : I(~U(0));
  constexpr I lo = isSigned ? I(-hi - 1) : I(0);
  if(!(r == r)) return I(0);
  if(r <= static_cast<double>(lo)) return lo;
  if(r >= static_cast<double>(hi)) return hi;
  return static_cast<I>(r);
}

template <class T>
struct TypeTag { using type = T; };

// Casting from double that is defined for out-of-range and NaN inputs
// (plain static_cast to an integer is UB there).
template <class T>
T castFromDouble(double v) {
  if constexpr(std::is_same<T, bool>::value) {
    return v != 0;
  } else if constexpr(std::is_integral<T>::value) {
    return saturateToInt<T>(v);
  } else {
    return static_cast<T>(static_cast<typename ComputeOf<T>::type>(v));
  }
}

#define ONYX_DISPATCH_CASE(TYPE, CTYPE) \
  case Type::TYPE: fn(TypeTag<CTYPE>{}); return;

[[noreturn]] inline void unsupportedType(Type t, const char* what, const char* supported) {
  fail(what, ": element type ", t, " is not supported (supported: ", supported, ")");
}

template <class Fn>
void dispatchFloat(Type t, const char* what, Fn&& fn) {
  switch(t) {
    ONYX_DISPATCH_CASE(float32, float)
    ONYX_DISPATCH_CASE(float64, double)
    ONYX_DISPATCH_CASE(float16, float16)
    ONYX_DISPATCH_CASE(bfloat16, bfloat16)
    default: unsupportedType(t, what, "float32, float64, float16, bfloat16");
  }
}

// Numeric types that arithmetic works on.
template <class Fn>
void dispatchNumeric(Type t, const char* what, Fn&& fn) {
  switch(t) {
    ONYX_DISPATCH_CASE(float32, float)
    ONYX_DISPATCH_CASE(float64, double)
    ONYX_DISPATCH_CASE(float16, float16)
    ONYX_DISPATCH_CASE(bfloat16, bfloat16)
    ONYX_DISPATCH_CASE(int8, int8_t)
    ONYX_DISPATCH_CASE(int16, int16_t)
    ONYX_DISPATCH_CASE(int32, int32_t)
    ONYX_DISPATCH_CASE(int64, int64_t)
    ONYX_DISPATCH_CASE(uint8, uint8_t)
    ONYX_DISPATCH_CASE(uint16, uint16_t)
    ONYX_DISPATCH_CASE(uint32, uint32_t)
    ONYX_DISPATCH_CASE(uint64, uint64_t)
    default: unsupportedType(t, what, "float and integer types");
  }
}

// Every compute type, bool included (copies, comparisons, where, gather).
template <class Fn>
void dispatchAll(Type t, const char* what, Fn&& fn) {
  if(t == Type::boolean) { fn(TypeTag<bool>{}); return; }
  switch(t) {
    ONYX_DISPATCH_CASE(float32, float)
    ONYX_DISPATCH_CASE(float64, double)
    ONYX_DISPATCH_CASE(float16, float16)
    ONYX_DISPATCH_CASE(bfloat16, bfloat16)
    ONYX_DISPATCH_CASE(int8, int8_t)
    ONYX_DISPATCH_CASE(int16, int16_t)
    ONYX_DISPATCH_CASE(int32, int32_t)
    ONYX_DISPATCH_CASE(int64, int64_t)
    ONYX_DISPATCH_CASE(uint8, uint8_t)
    ONYX_DISPATCH_CASE(uint16, uint16_t)
    ONYX_DISPATCH_CASE(uint32, uint32_t)
    ONYX_DISPATCH_CASE(uint64, uint64_t)
    default: unsupportedType(t, what, "bool, float and integer types");
  }
}

// Integer index types (gather indices, labels).
template <class Fn>
void dispatchIndex(Type t, const char* what, Fn&& fn) {
  switch(t) {
    ONYX_DISPATCH_CASE(int32, int32_t)
    ONYX_DISPATCH_CASE(int64, int64_t)
    default: unsupportedType(t, what, "int32, int64");
  }
}

#undef ONYX_DISPATCH_CASE

}  // namespace onyx
