// Minimal logging in the seed's format: "[2021-02-16 15:10:51] message".
// Silent until createLoggers() is called (as in the seed API).
#pragma once
#include <string>

namespace onyx {

// Turns on logging to stderr. Safe to call more than once.
void createLoggers();

namespace logging {
bool enabled();
void info(const std::string& msg);
void warn(const std::string& msg);
void memory(const std::string& msg);  // "[memory] ..." lines
}  // namespace logging

}  // namespace onyx
