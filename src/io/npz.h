// .npz read/write (a zip of .npy files), readable and writable by numpy.
// Writes go to a temporary file that is renamed into place, so an existing
// file is never left half-written.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <onyx/core/tensor.h>

namespace onyx {
namespace io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Stores each tensor as "<name>.npy" (uncompressed, like numpy.savez).
void saveNpz(const std::string& path, const NamedTensors& items);
// Reads stored or deflated members; names come back without ".npy".
// Throws onyx::Error naming the file and member on anything malformed.
NamedTensors loadNpz(const std::string& path);

// Single arrays.
std::string npyBytes(const TensorBase& t);
Tensor parseNpy(const std::string& bytes, const std::string& where);

// Writes `data` to path atomically (temp file in the same folder + rename).
void writeFileAtomic(const std::string& path, const std::string& data);

}  // namespace io
}  // namespace onyx
