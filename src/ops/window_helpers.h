// What the sliding-window families share (convolution.cpp, pooling.cpp):
// their attributes read and checked in inference, and their ONNX export
// helpers. The geometry itself is backend/cpu/conv_geom.h's. Only src/ops/*.cpp
// include this.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <onyx/backend/cpu/conv_geom.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/op_def.h>

namespace onyx {
namespace ops {

using AttrList = std::vector<std::pair<std::string, AttrValue>>;

inline std::vector<int64_t> listOr(const IntList& v, size_t n, int64_t def) {
  if(v.empty()) return std::vector<int64_t>(n, def);
  return std::vector<int64_t>(v.begin(), v.end());
}

// A node's strides, dilations and pads for nd spatial dims, defaults filled in.
inline host::Spatial spatialOf(const Attrs& a, int nd) {
  host::Spatial s;
  s.nd = nd;
  s.strides = listOr(a.ints("strides"), size_t(nd), 1);
  s.dilations = listOr(a.ints("dilations"), size_t(nd), 1);
  s.pads = listOr(a.ints("pads"), size_t(2 * nd), 0);
  return s;
}

// ---- inference

// Validates the lists of a node (sizes, strides and dilations >= 1).
inline host::Spatial checkedSpatial(InferCtx& c, int nd, bool padsNonNegative) {
  auto check = [&](const char* name, size_t n) {
    const IntList& v = c.attrs.ints(name);
    c.check(v.empty() || v.size() == n, name, " ", attrToString(v), " must have ", n, " entries (",
            n == size_t(nd) ? "one per spatial dim" : "begin and end per spatial dim", "), got ", v.size());
  };
  check("strides", size_t(nd));
  check("dilations", size_t(nd));
  check("pads", size_t(2 * nd));
  host::Spatial s = spatialOf(c.attrs, nd);
  // Bounded so that window arithmetic over any valid shape stays exact
  // (a stride of 2^61 wrapped ConvTranspose's output size).
  const int64_t kMax = int64_t(1) << 32;
  for(int i = 0; i < nd; ++i) {
    c.check(s.strides[i] >= 1 && s.strides[i] <= kMax, "strides must be in 1..2^32, got ",
            attrToString(c.attrs.ints("strides")));
    c.check(s.dilations[i] >= 1 && s.dilations[i] <= kMax, "dilations must be in 1..2^32, got ",
            attrToString(c.attrs.ints("dilations")));
  }
  for(auto p : s.pads) c.check(p >= -kMax && p <= kMax, "pads must be within +-2^32, got ", attrToString(c.attrs.ints("pads")));
  if(padsNonNegative)
    for(auto p : s.pads) c.check(p >= 0, "pads must be >= 0, got ", attrToString(c.attrs.ints("pads")));
  return s;
}

inline int checkedSpatialRank(InferCtx& c, const Shape& x, const char* what) {
  c.check(x.rank() >= 3 && x.rank() <= 5, what, " must be [N, C, spatial..] with 1 to 3 spatial dims, got shape ", x);
  return x.rank() - 2;
}

inline void requireNumeric(InferCtx& c) {
  Type t = c.commonType();
  c.check(isFloat(t) || isInt(t), "element type ", t, " is not supported (float and integer types)");
  c.type = t;
}

// The named attributes of a, for a node of another window op.
inline AttrList pick(const Attrs& a, std::initializer_list<const char*> names) {
  AttrList l;
  for(const char* n : names) l.emplace_back(n, a[n]);
  return l;
}

// ---- ONNX export

inline bool allEqual(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
}

// A list attribute, left out when it holds ONNX's default (every entry `def`),
// which the importer fills back in.
inline void addList(OnnxAttrs& a, const char* name, const std::vector<int64_t>& v, int64_t def) {
  if(!allEqual(v, def)) a.emplace_back(name, attr(v));
}

// Emits opType on `inputs`, computed in type `via` unless that is undefined:
// every input Cast to it, the result Cast back to the node's type. With
// `indices` the node is the second output (MaxPool's Indices, never cast)
// and the first gets a fresh, unused name.
inline void emitVia(OnnxExportCtx& c, const std::string& opType, std::vector<std::string> inputs, Type via,
                    const OnnxAttrs& attrs, bool indices = false) {
  const std::string suffix = via == Type::undefined ? "" : std::string("_") + typeName(via);
  if(via != Type::undefined) {
    const int need = c.inputType(0) == Type::bfloat16 ? 13 : 6;  // Cast-6, bfloat16 in Cast-13
    c.requireOpset(need, str(opType, " on ", c.inputType(0), " (run in ", via, " through Cast)"));
  }
  for(size_t i = 0; via != Type::undefined && i < inputs.size(); ++i)
    inputs[i] = c.emitCast(inputs[i], via, "in" + std::to_string(i) + suffix);
  if(indices) {
    c.emit(opType, inputs, {c.fresh("values"), c.output()}, attrs);
  } else if(via == Type::undefined) {
    c.emit(opType, inputs, {c.output()}, attrs);
  } else {
    std::string y = c.fresh("out" + suffix);
    c.emit(opType, inputs, {y}, attrs);
    c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(c.node().value_type())}});
  }
}

}  // namespace ops
}  // namespace onyx
