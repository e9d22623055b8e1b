#include <onyx/core/tensor.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>

namespace onyx {

Tensor TensorBase::create(const Shape& shape, Type type, DeviceId device) {
  Tensor t(new TensorBase(shape, type, device));
  if(type == Type::string) {
    t->strings_.resize(static_cast<size_t>(shape.elements()));
    return t;
  }
  t->allocBytes_ = std::max<size_t>(t->bytes(), 1);
  t->data_ = deviceMalloc(device, t->allocBytes_);
  t->ownsMemory_ = true;
  return t;
}

Tensor TensorBase::create(const Shape& shape, Type type, const Ptr<Allocator>& alloc) {
  ONYX_ASSERT(alloc, "null allocator");
  ONYX_CHECK(type != Type::string, "string tensors cannot live in a workspace");
  Tensor t(new TensorBase(shape, type, alloc->device()));
  t->allocBytes_ = t->bytes();
  t->data_ = alloc->alloc(t->allocBytes_);
  t->alloc_ = alloc;
  return t;
}

Tensor TensorBase::wrap(void* data, const Shape& shape, Type type, std::shared_ptr<const void> owner,
                        DeviceId device) {
  ONYX_CHECK(type != Type::string, "string tensors cannot wrap foreign memory");
  Tensor t(new TensorBase(shape, type, device));
  ONYX_CHECK(data != nullptr || t->bytes() == 0, "wrap: null memory for a tensor of shape ", shape, " ", type);
  t->data_ = data;
  t->external_ = std::move(owner);
  return t;
}

TensorBase::~TensorBase() {
  if(alloc_) alloc_->free(data_, allocBytes_);
  else if(ownsMemory_) deviceFree(device_, data_);
}

std::vector<std::string>& TensorBase::strings() {
  ONYX_CHECK(type_ == Type::string, "strings() on a tensor of type ", type_);
  return strings_;
}

double TensorBase::getAsDouble(int64_t i) const {
  ONYX_ASSERT(i >= 0 && i < size(), "index ", i, " out of range for ", shape_);
  ONYX_ASSERT(onHost(), "element access on a tensor in ", device_.toString(), ": use get(vector) or hostCopy()");
  double r = 0;
  dispatchAll(type_, "get", [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = static_cast<double>(static_cast<const T*>(data_)[i]);
  });
  return r;
}

void TensorBase::setFromDouble(int64_t i, double v) {
  ONYX_ASSERT(i >= 0 && i < size(), "index ", i, " out of range for ", shape_);
  ONYX_ASSERT(onHost(), "element access on a tensor in ", device_.toString(), ": use set(vector) or copyFrom()");
  dispatchAll(type_, "set", [&](auto tag) {
    using T = typename decltype(tag)::type;
    static_cast<T*>(data_)[i] = castFromDouble<T>(v);
  });
}

void TensorBase::set(double v) {
  if(!onHost()) {
    Tensor h = create(shape_, type_);
    h->set(v);
    return copyFrom(*h);
  }
  dispatchAll(type_, "set", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x = castFromDouble<T>(v);
    T* p = static_cast<T*>(data_);
    std::fill(p, p + size(), x);
  });
}

template <>
void TensorBase::get<bool>(std::vector<bool>& out) const {
  out.resize(static_cast<size_t>(size()));
  for(int64_t i = 0; i < size(); ++i) out[static_cast<size_t>(i)] = getAsDouble(i) != 0;
}

template <>
void TensorBase::set<bool>(const std::vector<bool>& in) {
  ONYX_CHECK(static_cast<int64_t>(in.size()) == size(), "cannot set a tensor of shape ", shape_, " from a vector of ",
             in.size(), " elements");
  for(size_t i = 0; i < in.size(); ++i) setFromDouble(static_cast<int64_t>(i), in[i] ? 1 : 0);
}

Tensor TensorBase::reshaped(const Shape& shape) {
  ONYX_CHECK(shape.elements() == size(), "cannot view a tensor of shape ", shape_, " as ", shape,
             ": element counts differ");
  Tensor t(new TensorBase(shape, type_, device_));
  t->data_ = data_;
  t->base_ = shared_from_this();
  return t;
}

Tensor TensorBase::hostCopy() const {
  Tensor h = create(shape_, type_);
  h->copyFrom(*this);
  return h;
}

void TensorBase::copyFrom(const TensorBase& src) {
  ONYX_CHECK(src.size() == size(), "copy from shape ", src.shape_, " into shape ", shape_, ": sizes differ");
  if(!onHost() || !src.onHost()) {
    ONYX_CHECK(type_ != Type::string && src.type_ != Type::string, "string tensors live on the host only");
    if(src.type_ == type_) return gpuBackend().copy(data_, device_, src.data_, src.device_, bytes());
    // Conversion on the host.
    Tensor from = src.onHost() ? nullptr : src.hostCopy();
    Tensor to = create(shape_, type_);
    to->copyFrom(from ? *from : src);
    return copyFrom(*to);
  }
  if(src.type_ == type_) {
    if(type_ == Type::string) strings_ = src.strings_;
    else std::memcpy(data_, src.data_, bytes());
    return;
  }
  for(int64_t i = 0; i < size(); ++i) setFromDouble(i, src.getAsDouble(i));
}

std::string TensorBase::debug(int precision, int maxItems) const {
  std::ostringstream os;
  os << "shape=" << shape_ << " size=" << size() << " type=" << type_ << " device=" << device_.toString()
     << " ptr=" << reinterpret_cast<uintptr_t>(data_) << " bytes=" << (alloc_ ? alloc_->alignedSize(allocBytes_) : allocBytes_)
     << "\n";
  if(type_ == Type::string || !isComputeType(type_)) return os.str();
  double mn = std::numeric_limits<double>::infinity(), mx = -mn, l2 = 0;
  for(int64_t i = 0; i < size(); ++i) {
    double v = getAsDouble(i);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    l2 += v * v;
  }
  os << std::fixed << std::setprecision(precision);
  os << "min: " << mn << " max: " << mx << " l2-norm: " << std::sqrt(l2) << "\n";
  // Nested brackets per dimension, eliding the middle of long dimensions.
  const auto& d = shape_.dims();
  auto strides = shape_.strides();
  std::function<void(size_t, int64_t)> rec = [&](size_t dim, int64_t off) {
    if(d.empty()) { os << getAsDouble(0); return; }
    os << "[";
    int64_t n = d[dim];
    for(int64_t i = 0; i < n; ++i) {
      if(n > 2 * maxItems && i == maxItems) {
        os << (dim + 1 == d.size() ? " ... " : "\n ...\n");
        i = n - maxItems;
      }
      if(dim + 1 == d.size()) os << " " << getAsDouble(off + i) << " ";
      else {
        if(i) os << "\n" << std::string(dim + 1, ' ');
        rec(dim + 1, off + i * strides[dim]);
      }
    }
    os << "]";
  };
  rec(0, 0);
  os << "\n";
  return os.str();
}

}  // namespace onyx
