// Typed op attributes. Each op declares its attributes with defaults in its
// registry entry; a node stores values in that order. Hashing, equality,
// graphviz, the native format and ONNX attribute conversion all loop over
// them, so no hand-written hash can forget a field.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <onyx/core/small_vector.h>

namespace onyx {

using IntList = SmallVec<int64_t, 6>;
using FloatList = std::vector<double>;
using AttrValue = std::variant<int64_t, double, std::string, IntList, FloatList>;

enum class AttrKind { Int = 0, Float = 1, String = 2, Ints = 3, Floats = 4 };

struct AttrSpec {
  std::string name;
  AttrValue defaultValue;
  AttrKind kind() const { return static_cast<AttrKind>(defaultValue.index()); }
};

// Helpers for building attribute values from natural C++ types.
inline AttrValue attr(int v) { return int64_t(v); }
inline AttrValue attr(int64_t v) { return v; }
inline AttrValue attr(bool v) { return int64_t(v); }
inline AttrValue attr(float v) { return double(v); }
inline AttrValue attr(double v) { return v; }
inline AttrValue attr(const char* v) { return std::string(v); }
inline AttrValue attr(const std::string& v) { return v; }
inline AttrValue attr(const IntList& v) { return v; }
inline AttrValue attr(const std::vector<int64_t>& v) { return IntList(v.begin(), v.end()); }
inline AttrValue attr(const std::vector<int>& v) { return IntList(v.begin(), v.end()); }
inline AttrValue attr(const FloatList& v) { return v; }

std::string attrToString(const AttrValue& v);
size_t attrHash(const AttrValue& v);

}  // namespace onyx
