// onnx-test: runs ONNX backend test folders (model.onnx + test_data_set_*)
// and compares every output with the reference outputs.
//
//   onnx-test /usr/include/onnx/backend/test/data/node --known-failures tests/conformance/node.txt
//
// Each case runs in a child process with a time limit, so a crash or a hang
// in one case is reported as that case's failure and the run goes on.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <cstring>

#include <CLI/CLI.hpp>

#include <onyx/converters/native_model.h>
#include <onyx/core/device_backend.h>
#include <onyx/io/npz.h>
#include <onyx/onnx/checker.h>

#include "tool_common.h"

using namespace onyx;
namespace fs = std::filesystem;

namespace {

struct Options {
  double rtol = 1e-3, atol = 1e-5;
  std::string device = "cpu";
  double timeout = 120;
  bool fork = true;
  int threads = 0;
  bool roundTrip = false;
  std::string exportDir;
  int opset = 0;
  OptLevel optLevel = OptLevel::all;
};

void findCases(const fs::path& dir, std::vector<fs::path>& out) {
  std::error_code ec;
  if(fs::exists(dir / "model.onnx", ec)) {
    out.push_back(dir);
    return;
  }
  std::vector<fs::path> subs;
  for(const auto& e : fs::directory_iterator(dir, ec))
    if(e.is_directory()) subs.push_back(e.path());
  std::sort(subs.begin(), subs.end());
  for(const auto& s : subs) findCases(s, out);
}

// ONNX -> graph -> native .npz -> graph -> ONNX bytes.
std::string viaNative(const Model& model, const HostValues& inputs, const fs::path& npz, const Options& o) {
  std::string model_bytes;
  {
    ExpressionGraph g;
    auto imported = importGraph(model, g, inputs);
    saveNative(npz.string(), imported.spec);
  }
  ExpressionGraph g;
  GraphSpec spec = loadNative(npz.string(), g);
  ExportOptions eo;
  eo.opset = o.opset;
  return exportOnnx(spec, eo).model;
}

// "" when every output of `want` has the same type, shape and bytes in `got`.
std::string bitIdentical(const HostValues& want, const HostValues& got) {
  for(const auto& kv : want) {
    auto it = got.find(kv.first);
    if(it == got.end()) return str("output '", kv.first, "' is missing after the round trip");
    if(kv.second.kind != it->second.kind) return str("output '", kv.first, "' changed kind in the round trip");
    std::vector<Tensor> as = kv.second.sequence, bs = it->second.sequence;
    if(kv.second.kind == OnnxValue::Kind::Tensor) {
      as = {kv.second.tensor};
      bs = {it->second.tensor};
    }
    if(as.size() != bs.size()) return str("output '", kv.first, "': ", as.size(), " items became ", bs.size());
    for(size_t i = 0; i < as.size(); ++i) {
      const Tensor& a = as[i];
      const Tensor& b = bs[i];
      if(a->type() != b->type() || a->shape() != b->shape())
        return str("output '", kv.first, "': ", a->shape(), " ", typeName(a->type()), " became ", b->shape(), " ",
                   typeName(b->type()));
      if(a->type() == Type::string) {
        if(a->strings() != b->strings()) return str("output '", kv.first, "': strings differ");
      } else if(a->bytes() && std::memcmp(a->raw(), b->raw(), a->bytes()) != 0) {
        return str("output '", kv.first, "' is not bit-identical after the round trip");
      }
    }
  }
  return "";
}

// The export round trip of one case: the original in Onyx, then ONNX ->
// native -> ONNX (checked by the ONNX checker) in Onyx must give bit-identical
// outputs, and a second round trip must give a byte-identical file.
std::string roundTripCase(const fs::path& dir, const Options& o) {
  auto model = Model::load((dir / "model.onnx").string());
  auto sets = tools::testDataSets(dir.string());
  if(sets.empty()) return "no test_data_set_* folder";
  auto set = tools::readTestDataSet(sets[0], *model);
  SessionOptions so;
  so.device = parseDevice(o.device);
  so.threads = o.threads;
  so.optimization = o.optLevel;
  HostValues want = Session(model, so).runValues(set.inputs);
  char tmpl[] = "/tmp/onnx-test-rt-XXXXXX";
  if(!mkdtemp(tmpl)) return "cannot create a temporary folder";
  fs::path tmp(tmpl);
  struct Cleanup {
    fs::path p;
    ~Cleanup() { std::error_code ec; fs::remove_all(p, ec); }
  } cleanup{tmp};
  std::string name = dir.filename().string();
  std::string b1 = viaNative(*model, set.inputs, tmp / "first.npz", o);
  checkOnnxModel(b1, name + " (exported)");
  io::writeFileAtomic((tmp / "first.onnx").string(), b1);
  if(!o.exportDir.empty()) io::writeFileAtomic((fs::path(o.exportDir) / (name + ".onnx")).string(), b1);
  auto m1 = Model::load((tmp / "first.onnx").string());
  // Sequence and optional inputs are constants of the native graph: the
  // exported model takes the tensor inputs only.
  HostValues tensorInputs;
  for(const auto& i : m1->inputs())
    if(set.inputs.count(i.name)) tensorInputs[i.name] = set.inputs.at(i.name);
  HostValues got = Session(m1, so).runValues(tensorInputs);
  std::string r = bitIdentical(want, got);
  if(!r.empty()) return r;
  std::string b2 = viaNative(*m1, tensorInputs, tmp / "second.npz", o);
  if(b1 != b2) {
    size_t k = 0;
    while(k < b1.size() && k < b2.size() && b1[k] == b2[k]) ++k;
    return str("the second round trip gives a different file (", b1.size(), " vs ", b2.size(),
               " bytes, first difference at byte ", k, ")");
  }
  return "";
}

// "" on success, else the reason (one line).
std::string runCase(const fs::path& dir, const Options& o) {
  try {
    if(o.roundTrip) return roundTripCase(dir, o);
    auto model = Model::load((dir / "model.onnx").string());
    SessionOptions so;
    so.device = parseDevice(o.device);
    so.threads = o.threads;
    so.optimization = o.optLevel;
    Session session(model, so);
    auto sets = tools::testDataSets(dir.string());
    if(sets.empty()) return "no test_data_set_* folder";
    for(const auto& s : sets) {
      std::string r = tools::checkTestDataSet(session, tools::readTestDataSet(s, *model), o.rtol, o.atol);
      if(!r.empty()) return r;
    }
    return "";
  } catch(const Error& e) {
    return e.what();
  } catch(const InternalError& e) {
    return e.what();
  } catch(const std::exception& e) {
    return str("exception: ", e.what());
  }
}

std::string shortLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if(s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

std::string runForked(const fs::path& dir, const Options& o) {
  int fds[2];
  if(pipe(fds) != 0) return runCase(dir, o);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if(pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return runCase(dir, o);
  }
  if(pid == 0) {
    close(fds[0]);
    std::string r = runCase(dir, o);
    r = r.empty() ? "OK" : "FAIL" + shortLine(r);
    ssize_t w = write(fds[1], r.data(), r.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  auto start = std::chrono::steady_clock::now();
  bool timedOut = false;
  char buf[4096];
  for(;;) {
    double left = o.timeout - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if(left <= 0) {
      timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if(pr > 0) {
      ssize_t n = read(fds[0], buf, sizeof buf);
      if(n <= 0) break;
      msg.append(buf, static_cast<size_t>(n));
    }
  }
  close(fds[0]);
  if(timedOut) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if(timedOut) return str("timed out after ", o.timeout, " s");
  if(WIFSIGNALED(status)) return str("crashed (signal ", WTERMSIG(status), ")");
  if(msg == "OK") return "";
  if(msg.rfind("FAIL", 0) == 0) return msg.substr(4);
  return str("child exited with status ", WEXITSTATUS(status), " and no result");
}

std::map<std::string, std::string> readKnown(const std::string& path) {
  std::map<std::string, std::string> known;
  if(path.empty()) return known;
  std::ifstream f(path);
  if(!f) throw Error(str(path, ": cannot open the known-failures file"));
  std::string line;
  int no = 0;
  while(std::getline(f, line)) {
    ++no;
    size_t a = line.find_first_not_of(" \t");
    if(a == std::string::npos || line[a] == '#') continue;
    size_t b = line.find_first_of(" \t", a);
    std::string name = line.substr(a, b == std::string::npos ? std::string::npos : b - a);
    std::string reason = b == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", b));
    if(reason.empty()) throw Error(str(path, ":", no, ": '", name, "' has no reason"));
    known[name] = reason;
  }
  return known;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs ONNX backend test folders (model.onnx + test_data_set_*) and compares outputs.\n\n"
               "Examples:\n"
               "  onnx-test /usr/include/onnx/backend/test/data/node\n"
               "  onnx-test /usr/include/onnx/backend/test/data/node/test_abs --rtol 1e-3 --atol 1e-5\n"
               "  onnx-test DATA/node --known-failures tests/conformance/node.txt\n"
               "  onnx-test DATA/node --round-trip --known-failures tests/conformance/roundtrip_node.txt\n"};
  std::vector<std::string> dirs;
  std::vector<std::string> knownFiles;
  std::string filter;
  Options o;
  bool verbose = false, list = false, skipWithoutDevice = false;
  app.add_option("dirs", dirs, "folders holding test cases (searched recursively)")->required()->check(CLI::ExistingDirectory);
  app.add_option("--known-failures", knownFiles,
                 "file of 'test_name reason' lines; those may fail (repeatable: the lists add up)");
  app.add_option("--rtol", o.rtol, "relative tolerance")->capture_default_str();
  app.add_option("--atol", o.atol, "absolute tolerance")->capture_default_str();
  app.add_option("--device", o.device, "cpu or gpu0")->capture_default_str();
  app.add_option("--threads", o.threads, "threads per case (0: default)");
  tools::addOptLevelOption(app, o.optLevel);
  app.add_option("--timeout", o.timeout, "seconds per case")->capture_default_str();
  app.add_option("--filter", filter, "only cases whose name matches this regex");
  app.add_flag("--no-fork", [&](int64_t) { o.fork = false; },
               "run cases in this process (for a debugger; always so on a GPU)");
  app.add_flag("-v,--verbose", verbose, "also print passes and expected failures");
  app.add_flag("--list", list, "list the cases found and exit");
  app.add_flag("--skip-without-device", skipWithoutDevice,
               "exit with 77 (ctest's skip) and the reason when --device names a GPU this machine cannot use");
  app.add_flag("--round-trip", o.roundTrip,
               "instead of the reference check: ONNX -> native -> ONNX must pass the ONNX checker and give "
               "bit-identical outputs in Onyx, and a second round trip a byte-identical file");
  app.add_option("--export-dir", o.exportDir, "with --round-trip: also write each exported model to DIR/<case>.onnx");
  app.add_option("--opset", o.opset, "with --round-trip: target opset of the export (0: automatic)");
  CLI11_PARSE(app, argc, argv);

  try {
    DeviceId dev = parseDevice(o.device);
    // CUDA cannot be used in a child forked after the parent started it
    // (the probe below does), and starting it in every child costs a
    // fraction of a second per case: GPU cases run in this process, without
    // the per-case timeout and crash isolation of the CPU runs.
    if(dev.type == DeviceType::gpu) o.fork = false;
    if(skipWithoutDevice && dev.type == DeviceType::gpu) {
      std::string why = gpuUnavailable(dev.no);
      if(!why.empty()) {
        std::cout << "SKIPPED: " << o.device << ": " << why << "\n";
        return 77;
      }
    }
    std::map<std::string, std::string> known, where;  // name -> reason, name -> its list
    for(const auto& f : knownFiles)
      for(auto& kv : readKnown(f)) {
        if(where.count(kv.first)) throw Error(str(f, ": '", kv.first, "' is listed in ", where[kv.first], " too"));
        where[kv.first] = f;
        known.insert(kv);
      }
    std::vector<fs::path> cases;
    for(const auto& d : dirs) findCases(d, cases);
    std::regex re(filter.empty() ? ".*" : filter);
    int passed = 0, failed = 0, skipped = 0;
    std::set<std::string> seen;
    for(const auto& c : cases) {
      std::string name = c.filename().string();
      if(!std::regex_search(name, re)) continue;
      seen.insert(name);
      if(list) {
        std::cout << name << "\n";
        continue;
      }
      std::string r = o.fork ? runForked(c, o) : runCase(c, o);
      auto k = known.find(name);
      if(r.empty() && k == known.end()) {
        ++passed;
        if(verbose) std::cout << "ok    " << name << "\n";
      } else if(r.empty()) {
        ++failed;
        std::cout << "FIXED " << name << ": passes but is listed in " << where[name] << " (remove it)\n";
      } else if(k != known.end()) {
        ++skipped;
        if(verbose) std::cout << "known " << name << ": " << shortLine(r) << "\n";
      } else {
        ++failed;
        std::cout << "FAIL  " << name << ": " << shortLine(r) << "\n";
      }
      std::cout.flush();
    }
    if(list) return 0;
    for(const auto& kv : known)
      if(!seen.count(kv.first) && filter.empty()) {
        ++failed;
        std::cout << "STALE " << kv.first << ": listed in " << where[kv.first] << " but no such case\n";
      }
    std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
    return failed ? 1 : 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-test: " << e.what() << "\n";
    return 2;
  }
}
