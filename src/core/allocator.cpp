#include <onyx/core/allocator.h>
#include <onyx/core/allocation_limit.h>

#include <cstdlib>

#include <onyx/core/device_backend.h>
#include <onyx/core/error.h>
#include <onyx/core/logging.h>

namespace onyx {

DeviceId parseDevice(const std::string& s) {
  std::string t = s;
  size_t no = 0;
  size_t digits = t.find_first_of("0123456789");
  if(digits != std::string::npos) {
    no = std::stoul(t.substr(digits));
    t = t.substr(0, digits);
  }
  if(t == "cpu") return {no, DeviceType::cpu};
  if(t == "gpu" || t == "cuda") return {no, DeviceType::gpu};
  fail("unknown device '", s, "' (expected cpu, cpu0 or gpu0)");
}

namespace {
thread_local size_t tAllocationLimit = 0;  // 0: none
}

ScopedAllocationLimit::ScopedAllocationLimit(size_t bytes) : previous_(tAllocationLimit) { tAllocationLimit = bytes; }
ScopedAllocationLimit::~ScopedAllocationLimit() { tAllocationLimit = previous_; }
size_t allocationLimit() { return tAllocationLimit; }

namespace {
thread_local int64_t tLoopLimit = kDefaultLoopIterations;
}
ScopedLoopLimit::ScopedLoopLimit(int64_t iterations) : previous_(tLoopLimit) {
  ONYX_CHECK(iterations >= 1, "the loop iteration limit must be at least 1, got ", iterations);
  tLoopLimit = iterations;
}
ScopedLoopLimit::~ScopedLoopLimit() { tLoopLimit = previous_; }
int64_t loopIterationLimit() { return tLoopLimit; }
void checkHostAllocation(size_t bytes, const char* what) {
  ONYX_CHECK(!tAllocationLimit || bytes <= tAllocationLimit, "memory limit: ", what, " of ", bytes,
             " bytes is larger than the limit of ", tAllocationLimit, " bytes (raise maxMemoryBytes / --max-memory)");
}

void* deviceMalloc(DeviceId d, size_t bytes) {
  ONYX_CHECK(!tAllocationLimit || bytes <= tAllocationLimit, "memory limit: a tensor of ", bytes,
             " bytes is larger than the limit of ", tAllocationLimit,
             " bytes (raise maxMemoryBytes / --max-memory)");
  if(d.type == DeviceType::gpu) {
    std::string why = loadGpuBackend();
    ONYX_CHECK(why.empty(), d.toString(), ": ", why);
    return gpuBackend().malloc(d.no, bytes);
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  ONYX_CHECK(p, "out of memory allocating ", bytes, " bytes on ", d.toString());
  return p;
}

void deviceFree(DeviceId d, void* p) {
  if(d.type == DeviceType::gpu) return gpuBackend().free(d.no, p);
  std::free(p);
}

Allocator::Allocator(DeviceId device, size_t alignment) : device_(device), align_(alignment) {}

Allocator::~Allocator() {
  for(auto& c : chunks_) deviceFree(device_, c.first);
}

void Allocator::addChunk(size_t bytes) {
  bytes = alignedSize(bytes);
  auto* p = static_cast<uint8_t*>(deviceMalloc(device_, bytes));
  chunks_.emplace_back(p, bytes);
  capacity_ += bytes;
  free_[reinterpret_cast<uintptr_t>(p)] = bytes;
  logging::memory(str("Reserving ", bytes, " B, device ", device_.toString()));
}

size_t Allocator::alignedSize(size_t bytes) const {
  ONYX_CHECK(bytes <= (size_t(1) << 62), "cannot allocate ", bytes, " bytes");
  return (bytes + align_ - 1) / align_ * align_;
}

void Allocator::reserve(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if(limit_) bytes = std::min(bytes, limit_);
  if(bytes > capacity_) addChunk(bytes - capacity_);
}

void* Allocator::alloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocLocked(alignedSize(bytes == 0 ? 1 : bytes));
}

void* Allocator::allocLocked(size_t bytes) {
  // Best fit keeps large blocks intact for large tensors.
  auto best = free_.end();
  for(auto it = free_.begin(); it != free_.end(); ++it)
    if(it->second >= bytes && (best == free_.end() || it->second < best->second)) {
      best = it;
      if(it->second == bytes) break;
    }
  if(best == free_.end()) {
    // Grow geometrically so that a warm-up run settles quickly.
    size_t grow = std::max(bytes, capacity_ / 2);
    if(limit_ && capacity_ + grow > limit_) {
      ONYX_CHECK(capacity_ + bytes <= limit_, "memory limit: a tensor of ", bytes, " bytes does not fit in the limit of ",
                 limit_, " bytes (", inUse_, " in use, ", capacity_, " reserved; raise maxMemoryBytes / --max-memory)");
      grow = limit_ - capacity_;
    }
    addChunk(grow);
    return allocLocked(bytes);
  }
  uintptr_t addr = best->first;
  size_t size = best->second;
  free_.erase(best);
  if(size > bytes) free_[addr + bytes] = size - bytes;
  inUse_ += bytes;
  peak_ = std::max(peak_, inUse_);
  return reinterpret_cast<void*>(addr);
}

void Allocator::free(void* p, size_t bytes) {
  if(!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  bytes = alignedSize(bytes == 0 ? 1 : bytes);
  uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  ONYX_ASSERT(inUse_ >= bytes, "freeing ", bytes, " B with only ", inUse_, " B in use");
  inUse_ -= bytes;
  auto next = free_.lower_bound(addr);
  ONYX_ASSERT(next == free_.end() || next->first >= addr + bytes, "double free in workspace allocator");
  auto it = free_.emplace_hint(next, addr, bytes);
  // Merge with the following block when it is adjacent (and in the same chunk:
  // chunks come from separate system allocations, so adjacency across them is
  // a coincidence we must not rely on).
  auto sameChunk = [&](uintptr_t a, uintptr_t b) {
    for(auto& c : chunks_) {
      auto lo = reinterpret_cast<uintptr_t>(c.first), hi = lo + c.second;
      if(a >= lo && a < hi) return b >= lo && b < hi;
    }
    return false;
  };
  if(next != free_.end() && it->first + it->second == next->first && sameChunk(it->first, next->first)) {
    it->second += next->second;
    free_.erase(next);
  }
  if(it != free_.begin()) {
    auto prev = std::prev(it);
    if(prev->first + prev->second == it->first && sameChunk(prev->first, it->first)) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

}  // namespace onyx
