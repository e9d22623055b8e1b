// A limit on single tensor allocations for the current thread (see below).
// Its own header, so that the allocator's many includers do not depend on it.
#pragma once
#include <cstddef>

namespace onyx {

// While one lives, on its thread, every tensor allocation (deviceMalloc: the
// workspace's chunks, constants computed while a graph is built, outputs)
// larger than `bytes` is an onyx::Error naming the limit; 0: none. A Session
// run with SessionOptions::maxMemoryBytes holds one. Scopes nest (the inner
// one applies until it ends).
class ScopedAllocationLimit {
public:
  explicit ScopedAllocationLimit(size_t bytes);
  ~ScopedAllocationLimit();
  ScopedAllocationLimit(const ScopedAllocationLimit&) = delete;
  ScopedAllocationLimit& operator=(const ScopedAllocationLimit&) = delete;

private:
  size_t previous_;
};

// The current thread's limit (0: none). Host memory a run takes outside
// tensors in proportion to a tensor (values copied into a std::vector while
// a graph is built: TensorBase::get) is held to it too, through
// checkHostAllocation.
size_t allocationLimit();
// An onyx::Error naming `what`, `bytes` and the limit when `bytes` is over it.
void checkHostAllocation(size_t bytes, const char* what);

}  // namespace onyx
