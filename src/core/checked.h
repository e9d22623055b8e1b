// Checked arithmetic for every number a file or an input controls (element
// counts, byte sizes, offsets, strides, pads, output extents). Each helper
// throws onyx::Error naming `what` instead of wrapping around: a wrapped
// size is how a 0-byte buffer ends up behind a shape of 2^61 elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

#include <onyx/core/error.h>

namespace onyx {

// The most elements a tensor may have: 2^56 (far beyond any memory, small
// enough that elements x bytes-per-element never overflows 64 bits).
constexpr int64_t kMaxTensorElements = int64_t(1) << 56;

inline int64_t mulChecked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if(__builtin_mul_overflow(a, b, &r)) fail(what, ": ", a, " * ", b, " overflows 64-bit integers");
  return r;
}
inline int64_t addChecked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if(__builtin_add_overflow(a, b, &r)) fail(what, ": ", a, " + ", b, " overflows 64-bit integers");
  return r;
}
inline int64_t subChecked(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if(__builtin_sub_overflow(a, b, &r)) fail(what, ": ", a, " - ", b, " overflows 64-bit integers");
  return r;
}
// A file-controlled int64 that must fit an int (a rank, an axis count, a
// blocksize used in int arithmetic).
inline int toIntChecked(int64_t v, const char* what) {
  if(v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail(what, " ", v, " is out of range (must fit a 32-bit integer)");
  return static_cast<int>(v);
}
// |v| for a file-controlled value (abs(INT64_MIN) is undefined).
inline int64_t absChecked(int64_t v, const char* what) {
  if(v == std::numeric_limits<int64_t>::min()) fail(what, " ", v, " has no 64-bit absolute value");
  return v < 0 ? -v : v;
}

}  // namespace onyx
