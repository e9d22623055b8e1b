// The element movers and helpers of movers.h. Kernels that only move
// elements work on bytes, so one instantiation per element size serves every
// type.
#include <onyx/ops/movers.h>

#include <cstring>

#include <onyx/backend/cpu/strided.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/onnx_export.h>

namespace onyx {

size_t ops::elementBytes(Type t, const char* op) {
  int bits = typeBits(t);
  ONYX_CHECK(bits > 0 && bits % 8 == 0, op, ": element type ", t,
             " is not supported (this op needs a type with whole bytes per element)");
  return static_cast<size_t>(bits / 8);
}

void ops::zeroFill(TensorBase& t) {
  if(t.bytes() == 0) return;
  if(t.onHost()) std::memset(t.raw(), 0, t.bytes());
  else gpuBackend().fillZero(t.getDeviceId().no, t.raw(), t.bytes());
}

void ops::copyStrided(DeviceId dev, void* dst, const int64_t* ds, const void* src, const int64_t* ss,
                      const int64_t* dims, int rank, size_t esize) {
  if(dev.type == DeviceType::cpu) host::copyStrided(dst, ds, src, ss, dims, rank, esize);
  else gpuBackend().copyStrided(dev.no, dst, ds, src, ss, dims, rank, esize);
}

int64_t ops::prodDims(const Shape::Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for(size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

namespace {

template <class I>
void checkIndicesOf(const I* idx, int64_t m, int64_t n, int axis, const Node& node) {
  for(int64_t j = 0; j < m; ++j) {
    int64_t i = static_cast<int64_t>(idx[j]);
    ONYX_CHECK(i >= -n && i < n, node.type(), " (node ", node.getId(), "): index ", i, " at position ", j,
               " of the indices is out of range for axis ", axis, " of size ", n, " (valid: ", -n, "..", n - 1, ")");
  }
}

}  // namespace

void ops::checkIndices(const TensorBase& idx, int64_t n, int axis, const Node& node) {
  ONYX_ASSERT(idx.onHost(), "index check of a device tensor");
  dispatchIndex(idx.type(), node.type().c_str(), [&](auto tag) {
    checkIndicesOf(idx.data<typename decltype(tag)::type>(), idx.size(), n, axis, node);
  });
}

// ---------------------------------------------------------------- ONNX export

// Flatten's axis, a split point in [-rank, rank], is written the same way.
int64_t ops::exportAxis(OnnxExportCtx& c, int64_t axis, int rank) {
  return c.opset() < 11 && axis < 0 ? axis + rank : axis;
}

void ops::requireType(OnnxExportCtx& c, Type t, const char* opType, bool everyType) {
  int need = 0;
  switch(t) {
    case Type::bfloat16: need = 13; break;
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz: need = 19; break;
    case Type::int4: case Type::uint4: need = 21; break;
    case Type::float4e2m1: need = 23; break;
    case Type::float8e8m0: need = 24; break;
    case Type::int2: case Type::uint2: need = 25; break;
    default: return;
  }
  c.check(everyType || need == 13, "ONNX ", opType, " takes no element type ", t, " at any opset");
  c.requireOpset(need, str("element type ", t));
}

namespace {

// Types that float64 holds exactly (a Cast there and back is the identity).
bool exactInFloat64(Type t) {
  switch(t) {
    case Type::boolean: case Type::int8: case Type::int16: case Type::int32:
    case Type::uint8: case Type::uint16: case Type::uint32: return true;
    default: return false;
  }
}

}  // namespace

void ops::emitOnFloat64(OnnxExportCtx& c, bool native, int nativeFrom, const char* opType, const EmitOnFn& emitOp) {
  Type t = c.inputType(0);
  if(native) return emitOp(c.inputs(), c.output(), "");
  if(!exactInFloat64(t) || c.opset() < 6) {
    c.requireOpset(nativeFrom, str("element type ", t, " in ", opType));
    c.fail("element type ", t, " needs opset ", nativeFrom);  // not reached: requireOpset throws
  }
  std::vector<std::string> ins;
  for(size_t i = 0; i < c.numInputs(); ++i)
    ins.push_back(c.emitCast(c.input(i), Type::float64, "f64_in" + std::to_string(i)));
  std::string y = c.fresh("f64");
  emitOp(ins, y, "f64/");
  c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(t)}});
}

}  // namespace onyx
