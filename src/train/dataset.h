// Training data as the Trainer (train/trainer.h) reads it: named arrays with
// the samples along axis 0, all with the same number of samples, held on the
// host. A batch is some rows of every array, under the same names.
//
//   auto train = Dataset::loadNpz("train.npz", {"x", "y"});
//   Batch b = train.rows({0, 5, 7});        // b["x"], b["y"]: 3 samples each
//
// The Trainer draws its batches from a Dataset, so the data order (and with
// it a resumed run) is the library's, not the caller's.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <onyx/core/tensor.h>

namespace onyx {

// Named arrays, samples along axis 0 (model inputs and the target).
using Batch = std::map<std::string, Tensor>;

class Dataset {
public:
  Dataset() = default;
  // `name` says where the data came from in error messages (a file path).
  // Every array must have rank >= 1 and the same number of samples; an
  // empty map gives an empty dataset.
  explicit Dataset(std::map<std::string, Tensor> arrays, std::string name = "");

  // The arrays `keys` of an .npz (all of them when `keys` is empty). A
  // missing key, a scalar, unequal sample counts or no samples at all is an
  // onyx::Error naming the file.
  static Dataset loadNpz(const std::string& path, const std::vector<std::string>& keys = {});

  int64_t size() const { return n_; }  // samples
  bool empty() const { return n_ == 0; }
  const std::string& name() const { return name_; }
  const std::map<std::string, Tensor>& arrays() const { return arrays_; }
  // The array `key`; an onyx::Error naming the dataset and what it holds
  // when there is none.
  const Tensor& array(const std::string& key) const;
  // Replaces an array by another with the same number of samples.
  void setArray(const std::string& key, Tensor t);

  // Rows `idx` of the arrays `keys` (all arrays when empty), in that order.
  Batch rows(const std::vector<int64_t>& idx, const std::vector<std::string>& keys = {}) const;
  // Rows [begin, min(end, size())) of the arrays `keys`.
  Batch range(int64_t begin, int64_t end, const std::vector<std::string>& keys = {}) const;

private:
  std::map<std::string, Tensor> arrays_;
  int64_t n_ = 0;
  std::string name_;
};

// Rows `idx` of t (samples along axis 0), a new host tensor.
Tensor takeRows(const TensorBase& t, const std::vector<int64_t>& idx);
// t converted element by element to type `to` (through double).
Tensor convertType(const TensorBase& t, Type to);
// The number of samples of a batch (axis 0 of its arrays; 0 when empty).
int64_t batchSamples(const Batch& b);

}  // namespace onyx
