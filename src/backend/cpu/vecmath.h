// Vector math over contiguous float32 arrays: SLEEF's vector transcendentals
// (and plain arithmetic) in AVX-512 or AVX2 registers, chosen once at run time
// from the CPU, with a portable scalar body where neither is present.
//
//   vec::sigmoid(x, y, n)        y[i] = sigmoid(x[i]), i in [0, n); y may be x
//   vec::binary(vec::Bin::add, a, sa, b, sb, y, n)
//                                y[i] = a[i * sa] + b[i * sb], sa and sb 0 or 1
//
// The functions run on the calling thread; vec::forBlocks splits an array
// across the pool. Compositions (sigmoid, silu, gelu, mish, ...) stay in
// registers: one pass over memory. The ops' float32 kernels call these
// (ops/kernel_helpers.h); the functors of functional.h stay the reference
// and serve every other type, shape and device.
//
// Accuracy (float32, against the correctly rounded value; measured bounds in
// tests/unit/test_vecmath.cpp): exp, expm1, log, sin, cos, tan, asin, acos,
// atan, atanh, tanh, erf and pow are SLEEF's u10 functions, 1.0 ULP. sqrt and
// reciprocal are the instructions (correctly rounded). The compositions round
// a few times more (sigmoid and silu on AVX2 through a Cephes-style e^-|x|,
// vecmath_avx2.cpp, twice as fast as SLEEF's exp: 2.4 and 3.1 ULP measured):
// sigmoid 3 ULP, silu 3.5, softplus 3, mish 4, elu/celu 2,
// selu 3, softsign 2; gelu 4 ULP plus 4 eps |x| absolute (1 + erf and 1 + tanh
// cancel for negative x, in the functors' float formula as well).
// sinh, cosh, asinh, acosh and log1p have no vector form: SLEEF's float ones
// overflow early (sinh/cosh past |x| = 88.5, asinh/acosh past 1.8e19, log1p
// past 1e38) where the true value is finite; their ops keep the functors.
#pragma once
#include <cstdint>

#include <onyx/backend/cpu/parallel.h>

namespace onyx {
namespace host {
namespace vec {

// The bodies: `scalar` is the portable one (std:: functions, the compiler's
// vectorization), avx2 needs AVX2 and FMA, avx512 needs AVX-512F.
enum class Isa { scalar, avx2, avx512 };
const char* isaName(Isa isa);
// The best body this CPU runs (decided once).
Isa bestIsa();
// The body in use (bestIsa() unless a test forced another).
Isa activeIsa();
// Forces a body (tests compare them); false, and no change, when the CPU
// lacks it. Not for use while kernels run on other threads.
bool setIsa(Isa isa);
// On a function: compile it for AVX2 (a second build of a kernel beside the
// baseline one, picked where bestIsa() is not scalar); empty off x86-64.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ONYX_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define ONYX_TARGET_AVX2
#endif
// Whether a SIMD body is in use: the ops take their vector path only then
// (the scalar body is no faster than the functors).
inline bool accelerated() { return activeIsa() != Isa::scalar; }

// ---- unary: y[i] = f(x[i]) over [0, n); y == x is allowed (in place).
using UnaryFn = void (*)(const float* x, float* y, int64_t n);
void exp(const float* x, float* y, int64_t n);
void expm1(const float* x, float* y, int64_t n);
void log(const float* x, float* y, int64_t n);
void sqrt(const float* x, float* y, int64_t n);
void reciprocal(const float* x, float* y, int64_t n);  // 1 / x
void sin(const float* x, float* y, int64_t n);
void cos(const float* x, float* y, int64_t n);
void tan(const float* x, float* y, int64_t n);
void asin(const float* x, float* y, int64_t n);
void acos(const float* x, float* y, int64_t n);
void atan(const float* x, float* y, int64_t n);
void atanh(const float* x, float* y, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void erf(const float* x, float* y, int64_t n);
void sigmoid(const float* x, float* y, int64_t n);   // 1 / (1 + e^-x)
void silu(const float* x, float* y, int64_t n);      // x sigmoid(x) (swish)
void softplus(const float* x, float* y, int64_t n);  // ln(1 + e^x)
void mish(const float* x, float* y, int64_t n);      // x tanh(softplus(x))
void geluErf(const float* x, float* y, int64_t n);   // x/2 (1 + erf(x / sqrt 2))
void geluTanh(const float* x, float* y, int64_t n);  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void softsign(const float* x, float* y, int64_t n);  // x / (1 + |x|)
void relu(const float* x, float* y, int64_t n);      // x < 0 ? 0 : x (NaN stays)
void hardSwish(const float* x, float* y, int64_t n); // x max(0, min(1, x/6 + 1/2))

// ---- unary with parameters
// scale * (x > 0 ? x : alpha (e^x - 1)): elu (scale 1) and selu.
void elu(const float* x, float* y, int64_t n, float alpha, float scale);
// x > 0 ? x : alpha (e^(x/alpha) - 1)
void celu(const float* x, float* y, int64_t n, float alpha);
// x > 0 ? x : alpha x
void leakyRelu(const float* x, float* y, int64_t n, float alpha);
// max(0, min(1, alpha x + beta)) with fmin/fmax's NaN rule (NaN gives 1)
void hardSigmoid(const float* x, float* y, int64_t n, float alpha, float beta);
// min(max(x, lo), hi) with the functors' NaN rule (NaN stays)
void clip(const float* x, float* y, int64_t n, float lo, float hi);

// ---- binary: y[i] = op(a[i * sa], b[i * sb]) with sa, sb in {0, 1} (0: a
// scalar operand). y may be a or b. max and min keep the functors' rule
// (maximum: a < b ? b : a; minimum: b < a ? b : a); pow is SLEEF's u10.
enum class Bin { add, sub, mul, div, max, min, pow };
void binary(Bin op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n);

// Elements per block of forBlocks (16 KB of float32): fine enough that a
// tensor of a few blocks still splits across threads.
constexpr int64_t kBlock = 4096;

// fn(begin, end) over [0, n) in blocks of kBlock elements (multiples of the
// vector width), spread over the threads when n is large; `weight` is the
// work per element in units of a plain load-op-store (transcendentals cost
// more, so they split sooner).
template <class Fn>
void forBlocks(int64_t n, int64_t weight, Fn&& fn) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  parallelFor(blocks, n * weight, [&](int64_t b, int64_t e) {
    int64_t end = e * kBlock < n ? e * kBlock : n;
    fn(b * kBlock, end);
  });
}

}  // namespace vec
}  // namespace host
}  // namespace onyx
