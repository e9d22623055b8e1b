// A vector with inline storage for the first N elements: shapes, axes and
// per-node child lists fit inline, so building a graph node allocates nothing.
#pragma once
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>

namespace onyx {

template <class T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable<T>::value || std::is_move_constructible<T>::value, "");

public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  explicit SmallVec(size_t n, const T& v = T()) { resize(n, v); }
  template <class It, class = decltype(*std::declval<It>())>
  SmallVec(It b, It e) { assign(b, e); }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { moveFrom(std::move(o)); }
  SmallVec& operator=(const SmallVec& o) {
    if(this != &o) { clear(); assign(o.begin(), o.end()); }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if(this != &o) { destroy(); moveFrom(std::move(o)); }
    return *this;
  }
  ~SmallVec() { destroy(); }

  template <class It>
  void assign(It b, It e) {
    clear();
    reserve(static_cast<size_t>(std::distance(b, e)));
    for(; b != e; ++b) push_back(*b);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return ptr(); }
  const T* data() const { return ptr(); }
  T& operator[](size_t i) { return ptr()[i]; }
  const T& operator[](size_t i) const { return ptr()[i]; }
  T* begin() { return ptr(); }
  T* end() { return ptr() + size_; }
  const T* begin() const { return ptr(); }
  const T* end() const { return ptr() + size_; }
  T& back() { return ptr()[size_ - 1]; }
  const T& back() const { return ptr()[size_ - 1]; }
  T& front() { return ptr()[0]; }
  const T& front() const { return ptr()[0]; }

  void reserve(size_t n) {
    if(n <= cap_) return;
    T* mem = static_cast<T*>(::operator new(n * sizeof(T)));
    for(size_t i = 0; i < size_; ++i) {
      new(mem + i) T(std::move(ptr()[i]));
      ptr()[i].~T();
    }
    if(heap_) ::operator delete(heap_);
    heap_ = mem;
    cap_ = n;
  }
  void push_back(const T& v) {
    if(size_ == cap_) { T tmp(v); reserve(cap_ * 2); new(ptr() + size_) T(std::move(tmp)); }
    else new(ptr() + size_) T(v);
    ++size_;
  }
  void push_back(T&& v) {
    if(size_ == cap_) reserve(cap_ * 2);
    new(ptr() + size_) T(std::move(v));
    ++size_;
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    if(size_ == cap_) reserve(cap_ * 2);
    new(ptr() + size_) T(std::forward<A>(a)...);
    return ptr()[size_++];
  }
  void pop_back() { ptr()[--size_].~T(); }
  void resize(size_t n, const T& v = T()) {
    if(n < size_) { while(size_ > n) pop_back(); return; }
    reserve(n);
    while(size_ < n) new(ptr() + size_++) T(v);
  }
  void clear() { while(size_) pop_back(); }
  T* insert(T* pos, const T& v) {
    size_t i = static_cast<size_t>(pos - begin());
    push_back(v);
    std::rotate(begin() + i, end() - 1, end());
    return begin() + i;
  }
  T* erase(T* pos) {
    std::move(pos + 1, end(), pos);
    pop_back();
    return pos;
  }

  bool operator==(const SmallVec& o) const { return size_ == o.size_ && std::equal(begin(), end(), o.begin()); }
  bool operator!=(const SmallVec& o) const { return !(*this == o); }

private:
  T* ptr() { return heap_ ? heap_ : reinterpret_cast<T*>(inline_); }
  const T* ptr() const { return heap_ ? heap_ : reinterpret_cast<const T*>(inline_); }
  void destroy() {
    clear();
    if(heap_) ::operator delete(heap_);
    heap_ = nullptr;
    cap_ = N;
  }
  void moveFrom(SmallVec&& o) {
    if(o.heap_) {
      heap_ = o.heap_; cap_ = o.cap_; size_ = o.size_;
      o.heap_ = nullptr; o.cap_ = N; o.size_ = 0;
    } else {
      heap_ = nullptr; cap_ = N; size_ = 0;
      for(auto& v : o) new(ptr() + size_++) T(std::move(v));
      o.clear();
    }
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* heap_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = N;
};

}  // namespace onyx
