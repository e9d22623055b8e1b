// Workspace allocator: an arena of large chunks with a coalescing free list.
// reserveWorkspaceMB() sizes the first chunk; forward/backward values and
// gradients come from here, so a graph rebuilt every batch does not touch the
// system allocator once the arena is warm. If a run needs more than reserved,
// the arena grows by another chunk (logged), rather than failing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include <onyx/core/device.h>

namespace onyx {

class Allocator {
public:
  explicit Allocator(DeviceId device, size_t alignment = 256);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  void reserve(size_t bytes);  // grow total capacity to at least `bytes`
  // The most this arena may hold in all (0: no limit). Growing past it is an
  // onyx::Error naming the request, not an out-of-memory kill.
  void setLimit(size_t bytes) { limit_ = bytes; }
  size_t limit() const { return limit_; }
  void* alloc(size_t bytes);   // aligned; never returns null
  void free(void* p, size_t bytes);

  size_t alignedSize(size_t bytes) const;
  size_t capacity() const { return capacity_; }
  size_t bytesInUse() const { return inUse_; }
  size_t peakBytes() const { return peak_; }
  void resetPeak() { peak_ = inUse_; }
  DeviceId device() const { return device_; }

private:
  void addChunk(size_t bytes);
  void* allocLocked(size_t alignedBytes);

  DeviceId device_;
  size_t align_;
  std::vector<std::pair<uint8_t*, size_t>> chunks_;
  std::map<uintptr_t, size_t> free_;  // address -> size, adjacent blocks merged
  size_t capacity_ = 0, inUse_ = 0, peak_ = 0, limit_ = 0;
  std::mutex mutex_;
};

// Raw device memory; the CUDA backend overrides these when built.
void* deviceMalloc(DeviceId d, size_t bytes);
void deviceFree(DeviceId d, void* p);

}  // namespace onyx
