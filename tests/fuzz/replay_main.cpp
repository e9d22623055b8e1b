// The fuzz target (fuzz_model.cpp) without libFuzzer: runs it on the files
// named, or on every file in the folders named, one after the other, so that
// any build (g++ included) can replay what the fuzzer found. A finding aborts
// (ctest fuzz_model_regressions: tests/regress/libfuzzer).
//   onyx_fuzz_replay FILE|DIR ...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// The mutator's call into libFuzzer; replaying never mutates.
extern "C" size_t LLVMFuzzerMutate(uint8_t*, size_t size, size_t) { return size; }

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for(int i = 1; i < argc; ++i) {
    if(fs::is_directory(argv[i])) {
      for(const auto& e : fs::directory_iterator(argv[i]))
        if(e.is_regular_file()) files.push_back(e.path().string());
    } else {
      files.push_back(argv[i]);
    }
  }
  if(files.empty()) {
    std::fprintf(stderr, "onyx_fuzz_replay: no inputs (name files or folders holding them)\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  LLVMFuzzerInitialize(&argc, &argv);
  for(const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("%s (%zu bytes)\n", f.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu inputs ran without a finding\n", files.size());
  return 0;
}
