// Shape: int64 dims, row-major, ONNX/numpy multidirectional broadcasting,
// negative axes counted from the end. Up to 6 dims are stored inline.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

#include <onyx/core/small_vector.h>

namespace onyx {

// The one axis rule: `axis` in [-rank, rank) counts from the end when
// negative and is returned in [0, rank); anything else throws onyx::Error
// "<what> <axis> is out of range for rank <rank> (valid: -rank..rank-1)".
// For ranks that are not a Shape's (an output's rank, rank + 1 for Unsqueeze).
int normalizeAxis(int64_t axis, int rank, const char* what = "axis");

class Shape {
public:
  using Dims = SmallVec<int64_t, 6>;

  Shape() = default;  // rank 0: a scalar with one element
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) { validate(); }
  explicit Shape(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) { validate(); }
  explicit Shape(const Dims& dims) : dims_(dims) { validate(); }

  size_t size() const { return dims_.size(); }  // rank, as in the seed API
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t elements() const;

  // Negative i counts from the end; out of range throws onyx::Error.
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(axis(i))]; }
  int64_t dim(int i) const { return (*this)[i]; }
  void set(int i, int64_t d);
  // Normalises an axis in [-rank, rank) to [0, rank); throws otherwise.
  int axis(int i) const { return axis(static_cast<int64_t>(i)); }
  int axis(int64_t i) const;

  const Dims& dims() const { return dims_; }
  std::vector<int64_t> vec() const { return {dims_.begin(), dims_.end()}; }
  Dims strides() const;  // row-major, in elements

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(dims_ == o.dims_); }

  std::string toString() const;  // "2x3", "scalar" for rank 0

  // Numpy/ONNX broadcast of all shapes; throws naming both shapes on mismatch.
  static Shape broadcast(std::initializer_list<Shape> shapes);
  static Shape broadcast(const Shape* shapes, size_t n);
  static bool broadcastable(const Shape& a, const Shape& b);

private:
  void validate() const;
  Dims dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace onyx
