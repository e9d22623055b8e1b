#include <onyx/train/dataset.h>

#include <algorithm>
#include <cstring>

#include <onyx/core/error.h>
#include <onyx/io/npz.h>

namespace onyx {

namespace {

std::string holding(const std::map<std::string, Tensor>& arrays) {
  std::string have;
  for(auto& kv : arrays) have += (have.empty() ? "" : ", ") + kv.first;
  return have;
}

}  // namespace

Dataset::Dataset(std::map<std::string, Tensor> arrays, std::string name) : name_(std::move(name)) {
  const std::string where = name_.empty() ? "dataset" : name_;
  for(auto& [key, t] : arrays) {
    ONYX_CHECK(t, where, ": array '", key, "' is null");
    if(t->shape().rank() == 0) throw Error(str(where, ": array '", key, "' is a scalar; samples go along axis 0"));
    int64_t n = t->shape().dims()[0];
    if(n_ && n != n_) throw Error(str(where, ": array '", key, "' has ", n, " samples, others ", n_));
    n_ = n;
    // Batches are gathered with memcpy on the host.
    arrays_[key] = t->onHost() ? t : t->hostCopy();
  }
  if(!arrays_.empty() && n_ == 0) throw Error(str(where, ": no samples"));
}

Dataset Dataset::loadNpz(const std::string& path, const std::vector<std::string>& keys) {
  std::map<std::string, Tensor> all;
  for(auto& kv : io::loadNpz(path)) all[kv.first] = kv.second;
  if(keys.empty()) {
    if(all.empty()) throw Error(str(path, ": no samples"));
    return Dataset(std::move(all), path);
  }
  // Checked key by key in the order asked, so the first missing key is named.
  std::map<std::string, Tensor> picked;
  int64_t n = 0;
  for(const auto& k : keys) {
    auto it = all.find(k);
    if(it == all.end()) throw Error(str(path, ": no array '", k, "' (it holds: ", holding(all), ")"));
    const Tensor& t = it->second;
    if(t->shape().rank() == 0) throw Error(str(path, ": array '", k, "' is a scalar; samples go along axis 0"));
    int64_t m = t->shape().dims()[0];
    if(n && m != n) throw Error(str(path, ": array '", k, "' has ", m, " samples, others ", n));
    n = m;
    picked[k] = t;
  }
  if(n == 0) throw Error(str(path, ": no samples"));
  return Dataset(std::move(picked), path);
}

const Tensor& Dataset::array(const std::string& key) const {
  auto it = arrays_.find(key);
  if(it == arrays_.end())
    throw Error(str(name_.empty() ? "dataset" : name_, ": no array '", key, "' (it holds: ", holding(arrays_), ")"));
  return it->second;
}

void Dataset::setArray(const std::string& key, Tensor t) {
  ONYX_CHECK(t && t->shape().rank() > 0 && (arrays_.empty() || t->shape().dims()[0] == n_),
             name_.empty() ? "dataset" : name_, ": array '", key, "' must have ", n_, " samples along axis 0");
  if(arrays_.empty()) n_ = t->shape().dims()[0];
  arrays_[key] = t->onHost() ? t : t->hostCopy();
}

Batch Dataset::rows(const std::vector<int64_t>& idx, const std::vector<std::string>& keys) const {
  Batch b;
  if(keys.empty()) {
    for(auto& [key, t] : arrays_) b[key] = takeRows(*t, idx);
  } else {
    for(const auto& key : keys)
      if(!b.count(key)) b[key] = takeRows(*array(key), idx);
  }
  return b;
}

Batch Dataset::range(int64_t begin, int64_t end, const std::vector<std::string>& keys) const {
  std::vector<int64_t> idx;
  for(int64_t i = begin; i < std::min(end, n_); ++i) idx.push_back(i);
  return rows(idx, keys);
}

Tensor takeRows(const TensorBase& t, const std::vector<int64_t>& idx) {
  ONYX_ASSERT(t.onHost() && t.shape().rank() > 0, "takeRows needs a host tensor with a sample axis");
  std::vector<int64_t> dims = t.shape().vec();
  const int64_t n = dims[0];
  size_t rowBytes = n ? t.bytes() / static_cast<size_t>(n) : 0;
  dims[0] = static_cast<int64_t>(idx.size());
  Tensor r = TensorBase::create(Shape(dims), t.type());
  for(size_t i = 0; i < idx.size(); ++i) {
    ONYX_CHECK(idx[i] >= 0 && idx[i] < n, "row ", idx[i], " of an array of ", n, " samples");
    std::memcpy(static_cast<char*>(r->raw()) + i * rowBytes,
                static_cast<const char*>(t.raw()) + static_cast<size_t>(idx[i]) * rowBytes, rowBytes);
  }
  return r;
}

Tensor convertType(const TensorBase& t, Type to) {
  std::vector<double> v;
  t.get(v);
  Tensor r = TensorBase::create(t.shape(), to);
  for(size_t i = 0; i < v.size(); ++i) storeFromDouble(r->raw(), to, i, v[i]);
  return r;
}

int64_t batchSamples(const Batch& b) {
  for(auto& kv : b)
    if(kv.second && kv.second->shape().rank() > 0) return kv.second->shape().dims()[0];
  return 0;
}

}  // namespace onyx
