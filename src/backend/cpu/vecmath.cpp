// vecmath.h: picks a body once from the CPU, and the portable scalar body.
#include <onyx/backend/cpu/vecmath.h>

#include <atomic>
#include <cmath>

#include <onyx/backend/cpu/functional.h>
#include <onyx/backend/cpu/vecmath_table.h>

namespace onyx {
namespace host {
namespace vec {

namespace {

// ---- the scalar body: the functors' scalar formulas, for CPUs without AVX2
// (and as a third body the tests compare).
template <class F>
void mapScalar(const float* x, float* y, int64_t n, F f) {
  for(int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
float unitClamp(float v) { return std::fmax(0.f, std::fmin(1.f, v)); }

#define ONYX_SCALAR_UNARY(NAME, EXPR)                                          \
  void NAME##Scalar(const float* x, float* y, int64_t n, float p, float q) { \
    (void)p;                                                                   \
    (void)q;                                                                   \
    mapScalar(x, y, n, [=](float v) -> float { return EXPR; });                \
  }
ONYX_SCALAR_UNARY(exp, std::exp(v))
ONYX_SCALAR_UNARY(expm1, std::expm1(v))
ONYX_SCALAR_UNARY(log, std::log(v))
ONYX_SCALAR_UNARY(sqrt, std::sqrt(v))
ONYX_SCALAR_UNARY(reciprocal, 1.f / v)
ONYX_SCALAR_UNARY(sin, std::sin(v))
ONYX_SCALAR_UNARY(cos, std::cos(v))
ONYX_SCALAR_UNARY(tan, std::tan(v))
ONYX_SCALAR_UNARY(asin, std::asin(v))
ONYX_SCALAR_UNARY(acos, std::acos(v))
ONYX_SCALAR_UNARY(atan, std::atan(v))
ONYX_SCALAR_UNARY(atanh, std::atanh(v))
ONYX_SCALAR_UNARY(tanh, std::tanh(v))
ONYX_SCALAR_UNARY(erf, std::erf(v))
ONYX_SCALAR_UNARY(sigmoid, functional::sigmoidOf(v))
ONYX_SCALAR_UNARY(silu, v * functional::sigmoidOf(v))
ONYX_SCALAR_UNARY(softplus, functional::softplusOf(v))
ONYX_SCALAR_UNARY(mish, v * std::tanh(functional::softplusOf(v)))
ONYX_SCALAR_UNARY(geluErf, 0.5f * v * (1.f + std::erf(v * 0.70710678118654752440f)))
ONYX_SCALAR_UNARY(geluTanh, 0.5f * v * (1.f + std::tanh(0.79788456080286535588f * (v + 0.044715f * v * v * v))))
ONYX_SCALAR_UNARY(softsign, v / (1.f + std::fabs(v)))
ONYX_SCALAR_UNARY(relu, v < 0.f ? 0.f : v)
ONYX_SCALAR_UNARY(hardSwish, v * unitClamp(v * static_cast<float>(1.0 / 6.0) + 0.5f))
ONYX_SCALAR_UNARY(elu, q * (v > 0.f ? v : p * std::expm1(v)))
ONYX_SCALAR_UNARY(celu, v > 0.f ? v : p * std::expm1(v / p))
ONYX_SCALAR_UNARY(leakyRelu, v > 0.f ? v : v * p)
ONYX_SCALAR_UNARY(hardSigmoid, unitClamp(p * v + q))
ONYX_SCALAR_UNARY(clip, [&] {
  float m = v < p ? p : v;
  return q < m ? q : m;
}())
#undef ONYX_SCALAR_UNARY

float binScalar(int op, float a, float b) {
  switch(op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return a < b ? b : a;
    case 5: return b < a ? b : a;
    default: return std::pow(a, b);
  }
}
void binaryScalar(int op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  for(int64_t i = 0; i < n; ++i) y[i] = binScalar(op, a[i * sa], b[i * sb]);
}

const Table* tableScalar() {
  static const Table t = [] {
    Table s{};
    s.exp = expScalar; s.expm1 = expm1Scalar; s.log = logScalar; s.sqrt = sqrtScalar;
    s.reciprocal = reciprocalScalar; s.sin = sinScalar; s.cos = cosScalar; s.tan = tanScalar;
    s.asin = asinScalar; s.acos = acosScalar; s.atan = atanScalar; 
    s.atanh = atanhScalar; s.tanh = tanhScalar; s.erf = erfScalar;
    s.sigmoid = sigmoidScalar; s.silu = siluScalar; s.softplus = softplusScalar; s.mish = mishScalar;
    s.geluErf = geluErfScalar; s.geluTanh = geluTanhScalar; s.softsign = softsignScalar; s.relu = reluScalar;
    s.hardSwish = hardSwishScalar; s.elu = eluScalar; s.celu = celuScalar; s.leakyRelu = leakyReluScalar;
    s.hardSigmoid = hardSigmoidScalar; s.clip = clipScalar;
    s.binary = binaryScalar;
    return s;
  }();
  return &t;
}

bool cpuHas(Isa isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // The CPU first: tableAvx512() runs code compiled for its ISA (the table's
  // static initialiser), which is an illegal instruction on a CPU without it.
  if(isa == Isa::avx512) return __builtin_cpu_supports("avx512f") && tableAvx512();
  if(isa == Isa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && tableAvx2();
#endif
  return isa == Isa::scalar;
}

const Table* tableOf(Isa isa) {
  switch(isa) {
    case Isa::avx512: return tableAvx512();
    case Isa::avx2: return tableAvx2();
    default: return tableScalar();
  }
}

struct Active {
  std::atomic<Isa> isa;
  std::atomic<const Table*> table;
  Active() {
    Isa best = bestIsa();
    isa.store(best);
    table.store(tableOf(best));
  }
};
Active& active() {
  static Active a;
  return a;
}
const Table& t() { return *active().table.load(std::memory_order_relaxed); }

}  // namespace

const char* isaName(Isa isa) {
  switch(isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "scalar";
  }
}

Isa bestIsa() {
  static const Isa best = cpuHas(Isa::avx512) ? Isa::avx512 : cpuHas(Isa::avx2) ? Isa::avx2 : Isa::scalar;
  return best;
}

Isa activeIsa() { return active().isa.load(std::memory_order_relaxed); }

bool setIsa(Isa isa) {
  if(!cpuHas(isa)) return false;
  active().table.store(tableOf(isa));
  active().isa.store(isa);
  return true;
}

#define ONYX_VEC_FORWARD(NAME) \
  void NAME(const float* x, float* y, int64_t n) { t().NAME(x, y, n, 0.f, 0.f); }
ONYX_VEC_FORWARD(exp)
ONYX_VEC_FORWARD(expm1)
ONYX_VEC_FORWARD(log)
ONYX_VEC_FORWARD(sqrt)
ONYX_VEC_FORWARD(reciprocal)
ONYX_VEC_FORWARD(sin)
ONYX_VEC_FORWARD(cos)
ONYX_VEC_FORWARD(tan)
ONYX_VEC_FORWARD(asin)
ONYX_VEC_FORWARD(acos)
ONYX_VEC_FORWARD(atan)
ONYX_VEC_FORWARD(atanh)
ONYX_VEC_FORWARD(tanh)
ONYX_VEC_FORWARD(erf)
ONYX_VEC_FORWARD(sigmoid)
ONYX_VEC_FORWARD(silu)
ONYX_VEC_FORWARD(softplus)
ONYX_VEC_FORWARD(mish)
ONYX_VEC_FORWARD(geluErf)
ONYX_VEC_FORWARD(geluTanh)
ONYX_VEC_FORWARD(softsign)
ONYX_VEC_FORWARD(relu)
ONYX_VEC_FORWARD(hardSwish)
#undef ONYX_VEC_FORWARD

void elu(const float* x, float* y, int64_t n, float alpha, float scale) { t().elu(x, y, n, alpha, scale); }
void celu(const float* x, float* y, int64_t n, float alpha) { t().celu(x, y, n, alpha, 0.f); }
void leakyRelu(const float* x, float* y, int64_t n, float alpha) { t().leakyRelu(x, y, n, alpha, 0.f); }
void hardSigmoid(const float* x, float* y, int64_t n, float alpha, float beta) {
  t().hardSigmoid(x, y, n, alpha, beta);
}
void clip(const float* x, float* y, int64_t n, float lo, float hi) { t().clip(x, y, n, lo, hi); }

void binary(Bin op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  t().binary(static_cast<int>(op), a, sa, b, sb, y, n);
}

}  // namespace vec
}  // namespace host
}  // namespace onyx
