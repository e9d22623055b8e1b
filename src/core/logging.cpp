#include <onyx/core/logging.h>

#include <atomic>
#include <cstdio>
#include <ctime>

namespace onyx {

namespace {
std::atomic<bool> gEnabled{false};

void emit(const std::string& msg) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  std::fprintf(stderr, "[%s] %s\n", buf, msg.c_str());
}
}  // namespace

void createLoggers() { gEnabled = true; }

namespace logging {
bool enabled() { return gEnabled; }
void info(const std::string& msg) { if(gEnabled) emit(msg); }
void warn(const std::string& msg) { emit("Warning: " + msg); }
void memory(const std::string& msg) { if(gEnabled) emit("[memory] " + msg); }
}  // namespace logging

}  // namespace onyx
