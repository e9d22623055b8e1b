// Tensor: a typed, row-major buffer with a shape on a device.
// `Tensor` is a shared handle (the seed's `node->val()->get(v)` style); the
// memory comes from a workspace Allocator (graph values) or is owned by the
// tensor itself (params, user tensors). Views share their base's memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <onyx/core/allocator.h>
#include <onyx/core/error.h>
#include <onyx/core/ptr.h>
#include <onyx/core/shape.h>
#include <onyx/core/types.h>

namespace onyx {

class TensorBase;
using Tensor = Ptr<TensorBase>;

class TensorBase : public std::enable_shared_from_this<TensorBase> {
public:
  // A tensor that owns fresh (uninitialised) memory on `device`.
  static Tensor create(const Shape& shape, Type type, DeviceId device = {});
  // A tensor whose memory comes from `alloc` and returns there on destruction.
  static Tensor create(const Shape& shape, Type type, const Ptr<Allocator>& alloc);
  // A tensor over memory that someone else owns (a numpy array, a DLPack
  // tensor): no copy. `owner` stays alive as long as this tensor and its
  // views do; the memory must hold shape.elements() elements of `type` on
  // `device`, aligned for the type. Not for string tensors.
  static Tensor wrap(void* data, const Shape& shape, Type type, std::shared_ptr<const void> owner,
                     DeviceId device = {});
  template <class T>
  static Tensor fromVector(const Shape& shape, const std::vector<T>& v) {
    auto t = create(shape, TypeOf<T>::value);
    t->set(v);
    return t;
  }

  ~TensorBase();
  TensorBase(const TensorBase&) = delete;
  TensorBase& operator=(const TensorBase&) = delete;

  const Shape& shape() const { return shape_; }
  Type type() const { return type_; }
  DeviceId getDeviceId() const { return device_; }
  int64_t size() const { return shape_.elements(); }
  size_t bytes() const { return typeBytes(type_, static_cast<size_t>(size())); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T>
  T* data() {
    checkType<T>();
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    checkType<T>();
    return static_cast<const T*>(data_);
  }

  bool onHost() const { return device_.type == DeviceType::cpu; }
  // A copy of this tensor in host memory.
  Tensor hostCopy() const;

  // Copies out, converting from the tensor's element type to T (through the
  // host for device tensors).
  template <class T>
  void get(std::vector<T>& out) const;
  template <class T>
  std::vector<T> toVector() const {
    std::vector<T> v;
    get(v);
    return v;
  }
  // Copies in, converting from T; the vector must have size() elements.
  template <class T>
  void set(const std::vector<T>& in);
  // Fills every element with v (converted).
  void set(double v);
  // Element 0, converted, on any device (a GPU tensor's is read back, as
  // PyTorch's item() does).
  template <class T>
  T scalar() const {
    ONYX_CHECK(size() >= 1, "scalar() on an empty tensor of shape ", shape_);
    if(!onHost()) return hostCopy()->get<T>(0);
    return get<T>(0);
  }
  // Element i (flat, row-major), converted: host tensors only.
  template <class T>
  T get(int64_t i) const { return static_cast<T>(getAsDouble(i)); }
  double getAsDouble(int64_t i) const;
  void setFromDouble(int64_t i, double v);

  // Strings (Type::string tensors only).
  std::vector<std::string>& strings();

  // A tensor sharing this one's memory with a new shape of the same size.
  Tensor reshaped(const Shape& shape);
  // Copies values (same shape, any compute types) from `src`.
  void copyFrom(const TensorBase& src);

  // "shape=1x1 size=1 type=float32 device=cpu0 ptr=... bytes=256" plus
  // min/max/l2-norm and the values, as in the seed's debug output.
  std::string debug(int precision = 8, int maxItems = 5) const;

private:
  TensorBase(const Shape& shape, Type type, DeviceId device) : shape_(shape), type_(type), device_(device) {}
  template <class T>
  void checkType() const {
    ONYX_CHECK(TypeOf<T>::value == type_, "tensor of type ", type_, " accessed as ", TypeOf<T>::value);
  }

  Shape shape_;
  Type type_;
  DeviceId device_;
  void* data_ = nullptr;
  size_t allocBytes_ = 0;
  Ptr<Allocator> alloc_;          // memory returns here when set
  bool ownsMemory_ = false;       // memory came from deviceMalloc
  Tensor base_;                   // for views: keeps the owner alive
  std::shared_ptr<const void> external_;  // wrap(): the memory's owner
  std::vector<std::string> strings_;
};

template <class T>
void TensorBase::get(std::vector<T>& out) const {
  if(!onHost()) return hostCopy()->get(out);
  int64_t n = size();
  out.resize(static_cast<size_t>(n));
  if(TypeOf<T>::value == type_) {
    if(n) std::memcpy(out.data(), data_, static_cast<size_t>(n) * sizeof(T));  // memcpy of null is undefined
    return;
  }
  for(int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<T>(getAsDouble(i));
}

template <class T>
void TensorBase::set(const std::vector<T>& in) {
  ONYX_CHECK(static_cast<int64_t>(in.size()) == size(), "cannot set a tensor of shape ", shape_, " (", size(),
             " elements) from a vector of ", in.size(), " elements");
  if(!onHost()) {
    Tensor h = create(shape_, type_);
    h->set(in);
    copyFrom(*h);
    return;
  }
  if(TypeOf<T>::value == type_) {
    if(!in.empty()) std::memcpy(data_, in.data(), in.size() * sizeof(T));
    return;
  }
  for(size_t i = 0; i < in.size(); ++i) setFromDouble(static_cast<int64_t>(i), static_cast<double>(in[i]));
}

// vector<bool> is packed: specialise the copy.
template <>
void TensorBase::get<bool>(std::vector<bool>& out) const;
template <>
void TensorBase::set<bool>(const std::vector<bool>& in);

}  // namespace onyx
