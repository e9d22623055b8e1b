// How the CUDA plugin gives registry ops their GPU kernels. There is one
// mechanism, by op name, grafted onto the registry when the plugin loads
// (plugin.cpp):
//  - ops whose kernels come from functors (ops/kernel_helpers.h) get theirs
//    from the plugin's nvcc compile of their family file: nothing to write;
//  - every other GPU kernel is registered here, in ops_<family>.cpp, with
//    ONYX_GPU_KERNEL("op", fn), its device code in a .cu file (kernels.h);
//  - ops declared .gpuOnHost("why") get a kernel that runs their CPU kernel
//    on host copies.
// A GPU kernel registered for an unknown op, or for one that has one
// already, fails the plugin's load (an internal error naming the op).
#pragma once
#include <onyx/core/tensor.h>
#include <onyx/graph/op_def.h>
#include <onyx/ops/movers.h>

namespace onyx {
namespace cuda {

// Registers f as the GPU kernel of registry op `op` (a static object per
// registration, so adding a kernel touches no list).
struct GpuKernel {
  GpuKernel(const char* op, KernelFn f);
};

// out = input 0, byte for byte (both on the GPU).
void copyInput0(KernelCtx& c);

// The GPU kernel that runs `cpu` on host copies of the inputs and uploads
// the result (what .gpuOnHost ops get; also a GPU kernel's path for the
// cases it does not take, as cast's storage-only types).
KernelFn onHostCopies(KernelFn cpu);

// The lines of x along the node's "axis" attribute (rank 0: one line of one
// element), for the kernels that run a thread per line.
inline ops::Lines linesOf(const TensorBase& x, const Attrs& a) { return ops::linesAlong(x.shape(), a.i("axis")); }

}  // namespace cuda
}  // namespace onyx

#define ONYX_GPU_KERNEL_CAT2(a, b) a##b
#define ONYX_GPU_KERNEL_CAT(a, b) ONYX_GPU_KERNEL_CAT2(a, b)
// ONYX_GPU_KERNEL("cumsum", [](KernelCtx& c) { ... });
#define ONYX_GPU_KERNEL(op, ...) \
  static const ::onyx::cuda::GpuKernel ONYX_GPU_KERNEL_CAT(kGpuKernel, __LINE__)(op, __VA_ARGS__)
