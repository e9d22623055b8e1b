#pragma once
#include <cstddef>
#include <string>

namespace onyx {

enum class DeviceType { cpu = 0, gpu = 1 };

struct DeviceId {
  size_t no{0};
  DeviceType type{DeviceType::cpu};
  DeviceId() = default;
  DeviceId(size_t n, DeviceType t) : no(n), type(t) {}
  bool operator==(const DeviceId& o) const { return no == o.no && type == o.type; }
  bool operator!=(const DeviceId& o) const { return !(*this == o); }
  std::string toString() const { return (type == DeviceType::cpu ? "cpu" : "gpu") + std::to_string(no); }
};

inline DeviceId cpu(size_t n = 0) { return {n, DeviceType::cpu}; }
inline DeviceId gpu(size_t n = 0) { return {n, DeviceType::gpu}; }

// Parses "cpu", "cpu0", "gpu0"; throws onyx::Error otherwise.
DeviceId parseDevice(const std::string& s);

}  // namespace onyx
