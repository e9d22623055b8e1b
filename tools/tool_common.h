// Shared by the onnx-* tools: reading inputs (.npy, TensorProto .pb,
// SequenceProto/OptionalProto .pb), ONNX test_data_set folders, and
// comparing outputs with tolerances.
#pragma once
#include <string>
#include <vector>

#include <onyx/runtime/session.h>

namespace CLI {
class App;
}

namespace onyx {
namespace tools {

// "4096", "512K", "64M", "2G" (powers of 1024) as bytes; anything else, or
// a size beyond 2^62, is an onyx::Error naming `flag`.
size_t parseByteSize(const std::string& text, const char* flag);
// --opt-level none|basic|all, parsed into `level` (SessionOptions::optimization).
void addOptLevelOption(CLI::App& app, OptLevel& level);
// --precision float32|bf16 (ComputePrecision), checked when the tool runs
// (parseComputePrecision) so a bad name is the tools' one-line error.
void addPrecisionOption(CLI::App& app, std::string& name);

// A value file for `info`: .npy, or a serialized TensorProto / SequenceProto /
// OptionalProto (.pb) chosen by the kind the model declares.
HostValue readValueFile(const std::string& path, const ValueInfo* info);

struct TestDataSet {
  std::string dir;
  HostValues inputs;
  std::vector<std::pair<std::string, HostValue>> expected;  // in model output order
};
// Reads input_N.pb / output_N.pb of a test_data_set_N folder for `model`.
TestDataSet readTestDataSet(const std::string& dir, const Model& model);
std::vector<std::string> testDataSets(const std::string& caseDir);  // sorted test_data_set_* folders

// "" when `got` matches `want` (type, shape, values within atol + rtol*|want|;
// NaN matches NaN), else the reason, naming the first mismatch.
std::string compareValues(const HostValue& want, const HostValue& got, double rtol, double atol);
// Runs one test_data_set; returns "" or the failure reason.
std::string checkTestDataSet(Session& session, const TestDataSet& set, double rtol, double atol);

void writeNpyAtomic(const std::string& path, const TensorBase& t);
// The file name (no folder) an output named `name` is written to, with
// `suffix` (".npy", "_3.npy"): path separators and control characters
// replaced by '_', so a model's output names cannot write outside the
// folder; "", "." and ".." are an error naming the output.
std::string outputFileName(const std::string& name, const std::string& suffix);

}  // namespace tools
}  // namespace onyx
