// Limits a run holds for the current thread while it builds and runs its
// graph (SessionOptions::maxMemoryBytes, maxLoopIterations). Their own
// header, so that the allocator's and the importer's many includers do not
// depend on them.
#pragma once
#include <cstddef>
#include <cstdint>

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

// The current thread's limit (0: none). Host memory the importer takes in
// proportion to a tensor (an input's values copied into a std::vector) is
// held to it too, through checkHostAllocation.
size_t allocationLimit();
// An onyx::Error naming `what`, `bytes` and the limit when `bytes` is over it.
void checkHostAllocation(size_t bytes, const char* what);

// The most iterations one Loop, or steps one Scan, may unroll while a graph
// is built on this thread: kDefaultLoopIterations unless a scope (a Session
// run with SessionOptions::maxLoopIterations) says otherwise.
constexpr int64_t kDefaultLoopIterations = int64_t(1) << 20;
class ScopedLoopLimit {
public:
  explicit ScopedLoopLimit(int64_t iterations);
  ~ScopedLoopLimit();
  ScopedLoopLimit(const ScopedLoopLimit&) = delete;
  ScopedLoopLimit& operator=(const ScopedLoopLimit&) = delete;

private:
  int64_t previous_;
};
int64_t loopIterationLimit();

}  // namespace onyx
