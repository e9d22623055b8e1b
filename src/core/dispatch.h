// Run-time element type -> compile-time C++ type.
//   dispatchFloat(t, "sin", [&](auto tag){ using T = typename decltype(tag)::type; ... });
// The name is used in the error when the type is not supported by that op.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <onyx/core/error.h>
#include <onyx/core/types.h>

namespace onyx {

template <class T>
struct TypeTag { using type = T; };

// Casting from double that is defined for out-of-range and NaN inputs
// (plain static_cast to an integer is UB there).
template <class T>
T castFromDouble(double v) {
  if constexpr(std::is_same<T, bool>::value) {
    return v != 0;
  } else if constexpr(std::is_integral<T>::value) {
    if(std::isnan(v)) return 0;
    if(v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if(v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
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
