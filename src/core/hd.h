// ONYX_HD marks a function both the CPU and, in the CUDA plugin's nvcc
// build, the GPU compile (the element-wise functors, the saturating casts).
#pragma once

#ifndef ONYX_HD
#ifdef __CUDACC__
#define ONYX_HD __host__ __device__ inline
#else
#define ONYX_HD inline
#endif
#endif
