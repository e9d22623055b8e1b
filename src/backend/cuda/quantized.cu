// Device code of the integer matmuls (ops/quantized.cpp): matmul_integer and
// matmul_integer_to_float, one thread per output element summing its row
// and column in int64 (exact, then wrapped to int32 as the CPU's), and
// matmul_integer_to_float's float32 epilogue in the CPU's order: the scale
// product, then the multiply, then the bias, each rounded (no FMA).
#include <onyx/backend/cuda/kernels.h>

#include <onyx/backend/cuda/common.cuh>

namespace onyx {
namespace cuda {

namespace {

__device__ inline int load8(const void* p, bool isSigned, int64_t i) {
  return isSigned ? int(static_cast<const int8_t*>(p)[i]) : int(static_cast<const uint8_t*>(p)[i]);
}

struct MatMulIntBody {
  IntMatMul m;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / m.N, n = i % m.N;
    const int za = m.az ? load8(m.az, m.aSigned, 0) : 0;
    const int zb = m.bz ? load8(m.bz, m.bSigned, m.bzCount == 1 ? 0 : n) : 0;
    int64_t acc = 0;
    for(int64_t k = 0; k < m.K; ++k)
      acc += int64_t(load8(m.a, m.aSigned, r * m.K + k) - za) * int64_t(load8(m.b, m.bSigned, k * m.N + n) - zb);
    const int32_t sum = int32_t(uint32_t(uint64_t(acc)));
    if(!m.yf) {
      m.y32[i] = sum;
      return;
    }
    const float s = __fmul_rn(m.aScale[0], m.bScale[m.bScaleCount == 1 ? 0 : n]);
    const float v = __fmul_rn(float(sum), s);
    m.yf[i] = m.bias ? __fadd_rn(v, m.bias[n]) : v;
  }
};

}  // namespace

void matmulInteger(size_t dev, const IntMatMul& m) { forEachOn(dev, MatMulIntBody{m}, m.rows * m.N, "matmul_integer"); }

}  // namespace cuda
}  // namespace onyx
