// The function table of one vecmath body (vecmath.h). Internal to
// backend/cpu: vecmath.cpp picks a table, vecmath_avx512.cpp and
// vecmath_avx2.cpp fill theirs from vecmath_body.h. Plain function pointers
// and no templates, so that nothing here is compiled for one ISA and shared
// with code compiled for another.
#pragma once
#include <cstdint>

namespace onyx {
namespace host {
namespace vec {

// Every unary entry takes two parameters (unused by most).
using TableUnary = void (*)(const float* x, float* y, int64_t n, float p, float q);
using TableBinary = void (*)(int op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n);

struct Table {
  TableUnary exp, expm1, log, sqrt, reciprocal, sin, cos, tan, asin, acos, atan, atanh, tanh, erf, sigmoid, silu, softplus, mish, geluErf, geluTanh, softsign, relu, hardSwish, elu, celu,
      leakyRelu, hardSigmoid, clip;
  TableBinary binary;
};

// The SIMD bodies' tables (vecmath_avx512.cpp, vecmath_avx2.cpp); null where
// the build does not target x86-64. The CPU must be checked before use.
const Table* tableAvx512();
const Table* tableAvx2();

}  // namespace vec
}  // namespace host
}  // namespace onyx
