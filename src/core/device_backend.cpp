// Loading the GPU backend plugin (device_backend.h). libonyx links no CUDA
// library: the plugin is dlopen'ed on the first request for a GPU, from
// next to libonyx itself (found with dladdr) or from $ONYX_CUDA_PLUGIN.
#include <onyx/core/device_backend.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <exception>

#include <onyx/core/error.h>

namespace onyx {

namespace {

// The plugin's entry point: registers its kernels and returns the backend,
// or null when it was built for another kDeviceBackendAbi.
using PluginEntry = DeviceBackend* (*)(int abi);
constexpr const char* kEntry = "onyx_cuda_plugin";
constexpr const char* kPluginFile = "libonyx_cuda.so";

struct Loaded {
  DeviceBackend* backend = nullptr;
  std::string why;  // when backend is null
};

bool fileExists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// The folder libonyx was loaded from (the install's lib/, or the build tree).
std::string libonyxDir() {
  Dl_info info{};
  if(!::dladdr(reinterpret_cast<void*>(&libonyxDir), &info) || !info.dli_fname) return "";
  std::string self = info.dli_fname;
  size_t slash = self.find_last_of('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

Loaded load() {
  Loaded l;
  const char* env = std::getenv(kCudaPluginEnv);
  const bool named = env && *env;
#ifndef ONYX_CUDA_PLUGIN_BUILT
  if(!named) {
    l.why = "this build of Onyx has no CUDA backend (configure with -DONYX_CUDA=ON where the CUDA toolkit is)";
    return l;
  }
#endif
  const std::string path = named ? std::string(env) : libonyxDir() + "/" + kPluginFile;
  const std::string what = named ? str(kCudaPluginEnv, "=", path) : path;
  if(!fileExists(path)) {
    l.why = named ? str("no CUDA backend: ", what, " does not exist")
                  : str("no CUDA backend: ", what, " does not exist (set ", kCudaPluginEnv,
                        " to the plugin's path if it is elsewhere)");
    return l;
  }
  // RTLD_LOCAL: the plugin's own copies of the functor families stay
  // private to it; RTLD_NOW: a missing library is reported here, not at the
  // first kernel.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if(!h) {
    const char* e = ::dlerror();
    l.why = str("cannot load the CUDA backend ", what, ": ", e ? e : "dlopen failed");
    return l;
  }
  auto entry = reinterpret_cast<PluginEntry>(::dlsym(h, kEntry));
  if(!entry) {
    l.why = str("cannot load the CUDA backend ", what, ": it has no entry point ", kEntry);
    return l;
  }
  try {
    l.backend = entry(kDeviceBackendAbi);
  } catch(const std::exception& e) {
    l.why = str("cannot load the CUDA backend ", what, ": ", e.what());
    return l;
  }
  if(!l.backend) l.why = str("cannot load the CUDA backend ", what, ": it was built for another version of Onyx");
  // The handle is never closed: the registry now holds the plugin's kernels.
  return l;
}

std::atomic<bool> tried{false};

// Once per process; a function-local static is initialised thread-safely.
const Loaded& loaded() {
  static const Loaded l = (tried = true, load());
  return l;
}

}  // namespace

DeviceBackend& gpuBackend() {
  const Loaded& l = loaded();
  ONYX_CHECK(l.backend, l.why);
  return *l.backend;
}

std::string loadGpuBackend() { return loaded().why; }

bool gpuBackendTried() { return tried; }

std::string gpuUnavailable(size_t no) {
  std::string why = loadGpuBackend();
  return why.empty() ? gpuBackend().unavailable(no) : why;
}

int gpuDeviceCount() { return loadGpuBackend().empty() ? gpuBackend().deviceCount() : 0; }

}  // namespace onyx
