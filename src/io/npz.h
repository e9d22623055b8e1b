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

// Raw zip members (name, bytes), stored; the native model adds a JSON member.
void saveZip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members);
std::vector<std::pair<std::string, std::string>> loadZip(const std::string& path);

// Single arrays. npyStorable: whether .npy has a dtype for the type (the
// float8/4-bit/2-bit/string/complex types have none).
bool npyStorable(Type t);
std::string npyBytes(const TensorBase& t);
Tensor parseNpy(const std::string& bytes, const std::string& where);

// Writes `data` to path atomically: a temp file in the same folder, fsync'ed,
// renamed into place, and the folder fsync'ed, so a crash leaves the old
// file or the new one, never a partial one.
// It first removes the temporaries an earlier, killed write of the same path
// left (removeStaleTemporaries).
void writeFileAtomic(const std::string& path, const std::string& data);
// Removes `<path>.tmp.<pid>` files whose process is gone (left by a write
// that was killed) and returns their paths; a live writer's are kept.
std::vector<std::string> removeStaleTemporaries(const std::string& path);

}  // namespace io
}  // namespace onyx
