// GPU kernels of ops/quantized.cpp's integer matmuls (device code in
// quantized.cu). qlinear_conv runs on host copies (gpuOnHost).
#include <algorithm>

#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>
#include <onyx/ops/quantized.h>

namespace onyx {
namespace cuda {
namespace {

// A, B and the zero points at azIn, bzIn (absent: 0) of a KernelCtx.
IntMatMul productOf(const KernelCtx& c, size_t azIn, size_t bzIn) {
  IntMatMul m;
  const TensorBase& A = *c.in[0];
  const TensorBase& B = *c.in[1];
  m.a = A.raw();
  m.aSigned = A.type() == Type::int8;
  m.b = B.raw();
  m.bSigned = B.type() == Type::int8;
  m.K = B.shape()[0];
  m.N = B.shape()[1];
  m.rows = m.K ? A.size() / m.K : 0;
  if(c.in.size() > azIn) m.az = c.in[azIn]->raw();
  if(c.in.size() > bzIn) {
    m.bz = c.in[bzIn]->raw();
    m.bzCount = c.in[bzIn]->size();
  }
  return m;
}

// y = (A - a_zp) . (B - b_zp) in int32
ONYX_GPU_KERNEL("matmul_integer", [](KernelCtx& c) {
  IntMatMul m = productOf(c, 2, 3);
  if(m.rows == 0 && c.out.size() > 0) m.rows = c.out.size() / std::max<int64_t>(m.N, 1);  // K = 0: empty sums
  m.y32 = c.out.data<int32_t>();
  matmulInteger(c.out.getDeviceId().no, m);
});

// y = float32((A - a_zp) . (B - b_zp)) * (a_scale * b_scale) + bias
ONYX_GPU_KERNEL("matmul_integer_to_float", [](KernelCtx& c) {
  IntMatMul m = productOf(c, 4, 5);
  if(m.rows == 0 && c.out.size() > 0) m.rows = c.out.size() / std::max<int64_t>(m.N, 1);
  m.yf = c.out.data<float>();
  m.aScale = c.in[2]->data<float>();
  m.bScale = c.in[3]->data<float>();
  m.bScaleCount = c.in[3]->size();
  if(c.in.size() > 6) m.bias = c.in[6]->data<float>();
  matmulInteger(c.out.getDeviceId().no, m);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
