// The ONNX export the element-wise families share (arithmetic.cpp, math.cpp,
// activations.cpp, logic.cpp): which element types an ONNX op takes from
// which opset, and how a node whose type the target opset's op lacks still
// exports (through Cast to a wider type and back). Defined in
// elementwise_onnx.cpp. Only src/ops/*.cpp include this.
#pragma once
#include <onyx/graph/onnx_rule.h>

namespace onyx {
namespace ops {

// How the integer types that an ONNX op takes only from a later opset are
// bridged below it: not at all (the export fails naming the opset), through
// float64 (8- to 32-bit integers, for selections and comparisons, which
// float64 holds exactly), or through int64 with the result wrapped back into
// the 8/16-bit type by Mod (arithmetic, which wraps in Onyx; needs Mod,
// opset 10).
enum class IntBridge { none, viaFloat64, wrap };

// From which opset an ONNX op takes each kind of element type (0: never).
struct OnnxTypeRule {
  int bf16 = 1, f16 = 1, f64 = 1;
  int wideInts = 1;    // int32, int64, uint32, uint64
  int narrowInts = 1;  // int8, int16, uint8, uint16
  IntBridge bridge = IntBridge::none;
  int broadcast = 0;   // numpy broadcasting of the inputs
};

// bfloat16 from opset bf16, float16 and float64 from f16 and f64, and
// every integer type (where the op's inference lets any through) always.
OnnxTypeRule floats(int bf16, int f16 = 1, int f64 = 1);
// An op that takes 32/64-bit integers from opset `wide`, 8/16-bit ones from
// `narrow`, bridged below that as `bridge` says.
OnnxTypeRule ints(int bf16, int wide, int narrow, IntBridge bridge, int broadcast = 0);

// The default export as `opType`, except where ONNX's op takes the node's
// element type only from a later opset (rule): float16 and bfloat16 then go
// through float32 (the CPU kernels compute them in float32 and round once at
// the end, so the Cast-op-Cast form gives the same bits), integers as
// rule.bridge says; float64 and 64-bit integers have no such form. The
// deciding type is the first input that is not bool (where's condition is);
// a node of another output type (a test or comparison: bool) is not cast
// back.
OnnxExportFn typedExport(const char* opType, OnnxTypeRule rule);

}  // namespace ops
}  // namespace onyx
