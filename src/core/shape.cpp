#include <onyx/core/shape.h>

#include <ostream>

#include <onyx/core/checked.h>
#include <onyx/core/error.h>

namespace onyx {

// The one place a shape is checked: no negative dimension, and the product
// of its nonzero dims (computed without wrapping) at most kMaxTensorElements,
// so that elements(), strides() and every byte size derived from them are
// exact in any order of multiplication, for empty shapes too (13 x 2^61 x 0
// overflowed before it reached the 0).
void Shape::validate() const {
  int64_t n = 1;
  bool huge = false;
  for(auto d : dims_) {
    ONYX_CHECK(d >= 0, "shape ", toString(), " has a negative dimension");
    if(d != 0 && (huge || __builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements)) huge = true;
  }
  ONYX_CHECK(!huge, "shape ", toString(), " has more than 2^56 elements, zero dims aside (the most a tensor may have)");
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for(auto d : dims_) n *= d;  // cannot overflow: validate() bounds the product
  return n;
}

int normalizeAxis(int64_t axis, int rank, const char* what) {
  ONYX_CHECK(axis >= -rank && axis < rank, what, " ", axis, " is out of range for rank ", rank, " (valid: ", -rank,
             "..", rank - 1, ")");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

int Shape::axis(int64_t i) const {
  int r = rank();
  ONYX_CHECK(i >= -r && i < r, "axis ", i, " is out of range for shape ", toString(), " of rank ", r,
             " (valid axes are ", -r, "..", r - 1, ")");
  return static_cast<int>(i < 0 ? i + r : i);
}

void Shape::set(int i, int64_t d) {
  ONYX_CHECK(d >= 0, "cannot set dimension ", i, " of shape ", toString(), " to negative ", d);
  auto& slot = dims_[static_cast<size_t>(axis(i))];
  int64_t old = slot;
  slot = d;
  try {
    validate();
  } catch(...) {
    slot = old;
    throw;
  }
}

Shape::Dims Shape::strides() const {
  Dims s(dims_.size(), 1);
  for(int i = rank() - 2; i >= 0; --i) s[i] = s[i + 1] * dims_[i + 1];
  return s;
}

std::string Shape::toString() const {
  if(dims_.empty()) return "scalar";
  std::string s;
  for(size_t i = 0; i < dims_.size(); ++i) {
    if(i) s += 'x';
    s += std::to_string(dims_[i]);
  }
  return s;
}

Shape Shape::broadcast(std::initializer_list<Shape> shapes) {
  return broadcast(shapes.begin(), shapes.size());
}

Shape Shape::broadcast(const Shape* shapes, size_t n) {
  size_t rank = 0;
  for(size_t k = 0; k < n; ++k) rank = std::max(rank, shapes[k].size());
  Dims out(rank, 1);
  for(size_t k = 0; k < n; ++k) {
    const auto& d = shapes[k].dims_;
    size_t off = rank - d.size();
    for(size_t i = 0; i < d.size(); ++i) {
      int64_t& o = out[off + i];
      if(d[i] == o || d[i] == 1) continue;
      if(o == 1) { o = d[i]; continue; }
      std::string all;
      for(size_t j = 0; j < n; ++j) all += (j ? " and " : "") + shapes[j].toString();
      fail("shapes ", all, " cannot be broadcast: dimension ", static_cast<int64_t>(i + off) - static_cast<int64_t>(rank),
           " is ", o, " vs ", d[i], " (each dimension must match or be 1)");
    }
  }
  Shape s;
  s.dims_ = std::move(out);
  return s;
}

bool Shape::broadcastable(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  for(size_t i = 0; i < r; ++i) {
    int64_t x = i < a.size() ? a.dims_[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b.dims_[b.size() - 1 - i] : 1;
    if(x != y && x != 1 && y != 1) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.toString(); }

}  // namespace onyx
