// GPU kernels of ops/conversion.cpp: cast (device code in copy.cu). The
// family is not a functor family (ONYX_FUNCTOR_FAMILIES); bitcast's kernel
// serves both devices (OpDef::anyDevice).
#include <onyx/backend/cuda/kernels.h>
#include <onyx/backend/cuda/plugin.h>

namespace onyx {
namespace cuda {
namespace {

// y = x converted to the element type `to`. The storage-only element types
// (float8, int4, ...) have no device arithmetic: their casts run the CPU
// kernel on host copies.
ONYX_GPU_KERNEL("cast", [](KernelCtx& c) {
  Type ti = c.in[0]->type(), to = c.out.type();
  if(isComputeType(ti) && isComputeType(to)) return assign(c.out, *c.in[0]);
  static const KernelFn viaHost = onHostCopies(Registry::instance().find("cast")->kernels[0]);
  viaHost(c);
});

}  // namespace
}  // namespace cuda
}  // namespace onyx
