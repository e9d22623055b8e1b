// The ONNX versions this build reads and writes: IR versions and opsets of
// the default domain (ai.onnx).
#pragma once
#include <cstdint>

namespace onyx {

constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;
constexpr int kMinOpset = 1;
constexpr int kMaxOpset = 27;
// What the exporter targets unless a node needs more or the caller asks.
constexpr int kDefaultExportOpset = 17;

// The newest opset the importer and exporter handle.
inline int onnxMaxOpset() { return kMaxOpset; }

// The IR version a model of this default-domain opset declares: the lowest
// that knows the opset, so that older runtimes load it.
inline int64_t irVersionForOpset(int opset) {
  if(opset <= 18) return 8;
  if(opset <= 20) return 9;
  if(opset <= 22) return 10;
  if(opset == 23) return 11;
  if(opset == 24) return 12;
  return 13;
}

}  // namespace onyx
