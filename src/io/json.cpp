#include <onyx/io/json.h>

#include <cerrno>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <onyx/core/error.h>

namespace onyx {
namespace json {

Value Value::boolean(bool b) { Value v; v.kind_ = Kind::Bool; v.b_ = b; return v; }
Value Value::number(int64_t n) { Value v; v.kind_ = Kind::Number; v.text_ = std::to_string(n); return v; }
Value Value::number(double d) {
  ONYX_ASSERT(std::isfinite(d), "json::Value::number(", d, "): JSON has no inf/nan");
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  Value v; v.kind_ = Kind::Number; v.text_ = buf;
  // Keep a float looking like one so a reader does not take it for an int.
  if(v.text_.find_first_of(".eEn") == std::string::npos) v.text_ += ".0";
  return v;
}
Value Value::numberText(std::string t) { Value v; v.kind_ = Kind::Number; v.text_ = std::move(t); return v; }
Value Value::string(std::string s) { Value v; v.kind_ = Kind::String; v.text_ = std::move(s); return v; }
Value Value::array(std::vector<Value> items) { Value v; v.kind_ = Kind::Array; v.items_ = std::move(items); return v; }
Value Value::object() { Value v; v.kind_ = Kind::Object; return v; }

namespace {
const char* kindName(Value::Kind k) {
  switch(k) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return "a boolean";
    case Value::Kind::Number: return "a number";
    case Value::Kind::String: return "a string";
    case Value::Kind::Array: return "an array";
    case Value::Kind::Object: return "an object";
  }
  return "?";
}
}  // namespace

bool Value::asBool(const std::string& where) const {
  if(kind_ != Kind::Bool) fail(where, ": expected a boolean, got ", kindName(kind_));
  return b_;
}
int64_t Value::asInt(const std::string& where) const {
  if(kind_ != Kind::Number) fail(where, ": expected an integer, got ", kindName(kind_));
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text_.c_str(), &end, 10);
  if(errno || *end) fail(where, ": expected an integer, got ", text_);
  return static_cast<int64_t>(v);
}
double Value::asDouble(const std::string& where) const {
  if(kind_ == Kind::String) {  // the spellings numbers have not
    if(text_ == "inf") return INFINITY;
    if(text_ == "-inf") return -INFINITY;
    if(text_ == "nan") return NAN;
  }
  if(kind_ != Kind::Number) fail(where, ": expected a number, got ", kindName(kind_));
  return std::strtod(text_.c_str(), nullptr);
}
const std::string& Value::asString(const std::string& where) const {
  if(kind_ != Kind::String) fail(where, ": expected a string, got ", kindName(kind_));
  return text_;
}
const std::vector<Value>& Value::asArray(const std::string& where) const {
  if(kind_ != Kind::Array) fail(where, ": expected an array, got ", kindName(kind_));
  return items_;
}

Value& Value::set(const std::string& key, Value v) {
  ONYX_ASSERT(kind_ == Kind::Object, "json set on ", kindName(kind_));
  for(auto& m : members_)
    if(m.first == key) return m.second = std::move(v);
  members_.emplace_back(key, std::move(v));
  return members_.back().second;
}
const Value* Value::find(const std::string& key) const {
  if(kind_ != Kind::Object) return nullptr;
  for(auto& m : members_)
    if(m.first == key) return &m.second;
  return nullptr;
}
const Value& Value::at(const std::string& key, const std::string& where) const {
  if(kind_ != Kind::Object) fail(where, ": expected an object, got ", kindName(kind_));
  const Value* v = find(key);
  if(!v) fail(where, ": missing key \"", key, "\"");
  return *v;
}
Value& Value::push(Value v) {
  ONYX_ASSERT(kind_ == Kind::Array, "json push on ", kindName(kind_));
  items_.push_back(std::move(v));
  return items_.back();
}

namespace {
void writeString(std::string& out, const std::string& s) {
  out += '"';
  for(unsigned char c : s) {
    switch(c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if(c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through
        }
    }
  }
  out += '"';
}
}  // namespace

void Value::write(std::string& out, int indent, int depth) const {
  std::string pad(static_cast<size_t>(indent * (depth + 1)), ' ');
  std::string padEnd(static_cast<size_t>(indent * depth), ' ');
  switch(kind_) {
    case Kind::Null: out += "null"; break;
    case Kind::Bool: out += b_ ? "true" : "false"; break;
    case Kind::Number: out += text_; break;
    case Kind::String: writeString(out, text_); break;
    case Kind::Array: {
      bool flat = true;
      for(auto& v : items_) flat = flat && v.kind_ != Kind::Array && v.kind_ != Kind::Object;
      if(flat || items_.empty()) {
        out += '[';
        for(size_t i = 0; i < items_.size(); ++i) {
          if(i) out += ", ";
          items_[i].write(out, indent, depth + 1);
        }
        out += ']';
      } else {
        out += "[\n";
        for(size_t i = 0; i < items_.size(); ++i) {
          out += pad;
          items_[i].write(out, indent, depth + 1);
          out += i + 1 < items_.size() ? ",\n" : "\n";
        }
        out += padEnd + "]";
      }
      break;
    }
    case Kind::Object: {
      if(members_.empty()) { out += "{}"; break; }
      out += "{\n";
      for(size_t i = 0; i < members_.size(); ++i) {
        out += pad;
        writeString(out, members_[i].first);
        out += ": ";
        members_[i].second.write(out, indent, depth + 1);
        out += i + 1 < members_.size() ? ",\n" : "\n";
      }
      out += padEnd + "}";
      break;
    }
  }
}

std::string quote(const std::string& s) {
  std::string out;
  writeString(out, s);
  return out;
}

std::string Value::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  out += '\n';
  return out;
}

namespace {

struct Parser {
  const std::string& s;
  const std::string& where;
  size_t p = 0;
  int depth = 0;

  [[noreturn]] void error(const std::string& what) const {
    size_t line = 1, col = 1;
    for(size_t i = 0; i < p && i < s.size(); ++i) {
      if(s[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    fail(where, ": invalid JSON at line ", line, " column ", col, ": ", what);
  }
  void ws() {
    while(p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) ++p;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if(s.compare(p, n, w) == 0) { p += n; return true; }
    return false;
  }
  Value value() {
    ws();
    if(p >= s.size()) error("unexpected end of text");
    if(++depth > 200) error("nesting deeper than 200");
    Value v;
    char c = s[p];
    if(c == '{') {
      ++p;
      v = Value::object();
      ws();
      if(p < s.size() && s[p] == '}') { ++p; --depth; return v; }
      for(;;) {
        ws();
        if(p >= s.size() || s[p] != '"') error("expected a string key");
        std::string k = str();
        ws();
        if(p >= s.size() || s[p] != ':') error("expected ':'");
        ++p;
        if(v.find(k)) error("duplicate key \"" + k + "\"");
        v.set(k, value());
        ws();
        if(p < s.size() && s[p] == ',') { ++p; continue; }
        if(p < s.size() && s[p] == '}') { ++p; break; }
        error("expected ',' or '}'");
      }
    } else if(c == '[') {
      ++p;
      v = Value::array();
      ws();
      if(p < s.size() && s[p] == ']') { ++p; --depth; return v; }
      for(;;) {
        v.push(value());
        ws();
        if(p < s.size() && s[p] == ',') { ++p; continue; }
        if(p < s.size() && s[p] == ']') { ++p; break; }
        error("expected ',' or ']'");
      }
    } else if(c == '"') {
      v = Value::string(str());
    } else if(lit("true")) {
      v = Value::boolean(true);
    } else if(lit("false")) {
      v = Value::boolean(false);
    } else if(lit("null")) {
      v = Value::null();
    } else if(c == '-' || (c >= '0' && c <= '9')) {
      size_t b = p;
      if(s[p] == '-') ++p;
      while(p < s.size() && (std::isdigit(static_cast<unsigned char>(s[p])) || s[p] == '.' || s[p] == 'e' || s[p] == 'E' ||
                             s[p] == '+' || s[p] == '-'))
        ++p;
      std::string t = s.substr(b, p - b);
      char* end = nullptr;
      std::strtod(t.c_str(), &end);
      if(t.empty() || *end) { p = b; error("malformed number"); }
      v = Value::numberText(t);
    } else {
      error(std::string("unexpected character '") + c + "'");
    }
    --depth;
    return v;
  }
  std::string str() {
    ++p;  // opening quote
    std::string out;
    for(;;) {
      if(p >= s.size()) error("unterminated string");
      char c = s[p++];
      if(c == '"') break;
      if(static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if(c != '\\') { out += c; continue; }
      if(p >= s.size()) error("unterminated string");
      char e = s[p++];
      switch(e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if(p + 4 > s.size()) error("short \\u escape");
          unsigned cp = static_cast<unsigned>(std::strtoul(s.substr(p, 4).c_str(), nullptr, 16));
          p += 4;
          if(cp < 0x80) {
            out += static_cast<char>(cp);
          } else if(cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
          }
          break;
        }
        default: error(std::string("bad escape '\\") + e + "'");
      }
    }
    return out;
  }
};

}  // namespace

Value parse(const std::string& text, const std::string& where) {
  Parser ps{text, where};
  Value v = ps.value();
  ps.ws();
  if(ps.p != text.size()) ps.error("trailing characters after the document");
  return v;
}

}  // namespace json
}  // namespace onyx
