// Errors say who is at fault:
//  - onyx::Error (thrown with ONYX_CHECK / onyx::fail): the caller gave bad input
//    (a shape mismatch, an unknown axis, a bad file). The message names the op,
//    the shapes and what to do. Nothing aborts the process.
//  - ONYX_ASSERT: a broken internal invariant (a bug in Onyx). It also throws
//    (as onyx::InternalError) so a long-running host is never killed, but the
//    message says "internal error" and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace onyx {

// `msg` with its control characters escaped (a newline as \n, others as
// \xNN): an error is one line even when it quotes a name or a string from
// a file (a model may name a node "a\nb").
std::string oneLine(const std::string& msg);

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& msg) : std::runtime_error(oneLine(msg)) {}
};

class InternalError : public std::logic_error {
public:
  explicit InternalError(const std::string& msg) : std::logic_error(oneLine(msg)) {}
};

namespace detail {
inline void streamAll(std::ostringstream&) {}
template <class T, class... R>
void streamAll(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  streamAll(os, rest...);
}
}  // namespace detail

template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  detail::streamAll(os, a...);
  return os.str();
}

template <class... A>
[[noreturn]] void fail(const A&... a) {
  throw Error(str(a...));
}

}  // namespace onyx

#define ONYX_CHECK(cond, ...)                   \
  do {                                          \
    if(!(cond)) ::onyx::fail(__VA_ARGS__);      \
  } while(0)

#define ONYX_ASSERT(cond, ...)                                                  \
  do {                                                                          \
    if(!(cond))                                                                 \
      throw ::onyx::InternalError(::onyx::str("internal error at ", __FILE__,  \
                                              ":", __LINE__, ": ", #cond, ": ", \
                                              ##__VA_ARGS__));                  \
  } while(0)
