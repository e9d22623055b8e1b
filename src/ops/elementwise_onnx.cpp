// The element-wise families' typed ONNX export (elementwise_onnx.h).
#include <onyx/ops/elementwise_onnx.h>

#include <string>
#include <vector>

#include <onyx/graph/onnx_export.h>

namespace onyx {
namespace ops {

namespace {

// The element type that decides an element-wise node's ONNX types: its first
// input that is not bool (where's condition is), else bool.
Type decidingType(OnnxExportCtx& c) {
  for(size_t i = 0; i < c.numInputs(); ++i)
    if(c.inputType(i) != Type::boolean) return c.inputType(i);
  return Type::boolean;
}

bool isNarrowInt(Type t) { return t == Type::int8 || t == Type::uint8 || t == Type::int16 || t == Type::uint16; }
bool isSigned(Type t) { return t == Type::int8 || t == Type::int16 || t == Type::int32 || t == Type::int64; }

std::string emitCastTo(OnnxExportCtx& c, const std::string& v, Type to, const std::string& hint) {
  std::string y = c.fresh(hint);
  c.emit("Cast", {v}, {y}, {{"to", int64_t(to)}});
  return y;
}

// int64 value v wrapped into 8/16-bit type t as C++'s conversion does (two's
// complement): Python's mod by 2^bits, shifted for signed types, and cast.
void emitWrap(OnnxExportCtx& c, const std::string& v, Type t, const std::string& out) {
  int64_t m = int64_t(1) << typeBits(t), h = m / 2;
  std::string half = isSigned(t) ? c.scalarConst(double(h), Type::int64, "half_range") : "";
  std::string x = v;
  if(isSigned(t)) {
    x = c.fresh("shifted");
    c.emit("Add", {v, half}, {x});
  }
  std::string r = c.fresh("wrapped");
  c.emit("Mod", {x, c.scalarConst(double(m), Type::int64, "range")}, {r});
  if(isSigned(t)) {
    std::string u = c.fresh("unshifted");
    c.emit("Sub", {r, half}, {u});
    r = u;
  }
  c.emit("Cast", {r}, {out}, {{"to", int64_t(t)}});
}

// The default export as `opType`, except where ONNX's op takes the node's
// element type only from a later opset (rule): float16 and bfloat16 then go
// through float32 (the CPU kernels compute them in float32 and round once at
// the end, so the Cast-op-Cast form gives the same bits), integers as

}  // namespace

OnnxTypeRule floats(int bf16, int f16, int f64) {
  OnnxTypeRule r;
  r.bf16 = bf16;
  r.f16 = f16;
  r.f64 = f64;
  return r;
}

OnnxTypeRule ints(int bf16, int wide, int narrow, IntBridge bridge, int broadcast) {
  OnnxTypeRule r;
  r.bf16 = bf16;
  r.wideInts = wide;
  r.narrowInts = narrow;
  r.bridge = bridge;
  r.broadcast = broadcast;
  return r;
}

OnnxExportFn typedExport(const char* opType, OnnxTypeRule rule) {
  std::string op = opType;
  return [op, rule](OnnxExportCtx& c) {
    for(size_t i = 1; i < c.numInputs() && c.opset() < rule.broadcast; ++i)
      if(c.inputShape(i) != c.inputShape(0))
        c.requireOpset(rule.broadcast, str(op, " broadcasting ", c.inputShape(0), " with ", c.inputShape(i)));
    Type t = decidingType(c);
    int since = t == Type::bfloat16 ? rule.bf16 : t == Type::float16 ? rule.f16 : t == Type::float64 ? rule.f64
                : isNarrowInt(t) ? rule.narrowInts : isInt(t) ? rule.wideInts : 1;
    if(since > 0 && c.opset() >= since) {
      c.emitDefault(op);
      return;
    }
    std::string when = since > 0 ? str("from opset ", since) : std::string("at no opset");
    Type wide = Type::undefined;  // the type computed in
    bool wrap = false;
    if(t == Type::float16 || t == Type::bfloat16) {
      wide = Type::float32;
    } else if(isInt(t) && rule.bridge == IntBridge::viaFloat64 && typeBits(t) <= 32) {
      wide = Type::float64;
    } else if(isNarrowInt(t) && rule.bridge == IntBridge::wrap && c.opset() >= 10) {
      wide = Type::int64;
      wrap = true;
    }
    if(wide == Type::undefined) {
      c.check(since > 0, op, " takes ", t, " ", when);
      c.requireOpset(since, str(op, " on ", t));
    }
    c.check(c.opset() >= 6, op, " on ", t, " needs a Cast, which this exporter writes from opset 6 on");
    std::vector<std::string> ins;
    for(size_t i = 0; i < c.numInputs(); ++i)
      ins.push_back(c.inputType(i) == t ? emitCastTo(c, c.input(i), wide, "in" + std::to_string(i) + "_" + typeName(wide))
                                        : c.input(i));
    if(c.node().value_type() != t) {  // a test or comparison: bool out
      c.emit(op, ins, {c.output()}, c.nodeAttrs());
      return;
    }
    std::string y = c.fresh(std::string("y_") + typeName(wide));
    c.emit(op, ins, {y}, c.nodeAttrs());
    if(wrap) emitWrap(c, y, t, c.output());
    else c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
  };
}

}  // namespace ops
}  // namespace onyx
