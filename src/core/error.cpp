#include <onyx/core/error.h>

namespace onyx {

std::string oneLine(const std::string& msg) {
  size_t i = 0;
  while(i < msg.size() && static_cast<unsigned char>(msg[i]) >= 0x20 && msg[i] != 0x7f) ++i;
  if(i == msg.size()) return msg;  // the usual case: nothing to escape
  static const char hex[] = "0123456789abcdef";
  std::string out = msg.substr(0, i);
  for(; i < msg.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(msg[i]);
    if(c >= 0x20 && c != 0x7f) out += msg[i];
    else if(c == '\n') out += "\\n";
    else if(c == '\t') out += "\\t";
    else if(c == '\r') out += "\\r";
    else out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

}  // namespace onyx
