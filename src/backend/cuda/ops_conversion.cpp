// GPU kernels of ops/conversion.cpp: cast (device code in copy.cu). The
// family is not a functor family (ONYX_FUNCTOR_FAMILIES); bitcast's kernel
// serves both devices (OpDef::anyDevice).
#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>

namespace onyx {
namespace cuda {
namespace {

// y = x converted to the element type `to`
ONYX_GPU_KERNEL("cast", [](KernelCtx& c) {
  Type ti = c.in[0]->type(), to = c.out.type();
  ONYX_CHECK(isComputeType(ti) && isComputeType(to), "cast from ", ti, " to ", to,
             " runs on the CPU only (storage-only element types); cast on the CPU");
  assign(c.out, *c.in[0]);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
