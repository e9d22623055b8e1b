// A small JSON value with a strict parser and a deterministic printer, for the
// native model's graph entry. Objects keep their key order (the printer writes
// what was built, so equal graphs give byte-equal files). Numbers keep their
// text, so int64 values and doubles printed with 17 digits round-trip exactly.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace onyx {
namespace json {

class Value {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  static Value null() { return Value(); }
  static Value boolean(bool b);
  static Value number(int64_t v);
  static Value number(double v);  // 17 significant digits; inf/nan are refused (callers write strings)
  static Value numberText(std::string text);  // a number as written (the parser's form)
  static Value string(std::string s);
  static Value array(std::vector<Value> items = {});
  static Value object();

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  // Accessors throw onyx::Error "<where>: expected <kind>" on a mismatch;
  // `where` names the place in the document for the message.
  bool asBool(const std::string& where) const;
  int64_t asInt(const std::string& where) const;
  double asDouble(const std::string& where) const;
  const std::string& asString(const std::string& where) const;
  const std::vector<Value>& asArray(const std::string& where) const;

  // Objects.
  Value& set(const std::string& key, Value v);  // appends (or replaces) key
  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key, const std::string& where) const;  // throws if absent
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }
  // Arrays.
  Value& push(Value v);
  size_t size() const { return kind_ == Kind::Array ? items_.size() : members_.size(); }

  // Pretty printing: objects one key per line, arrays of scalars on one line.
  std::string dump(int indent = 2) const;

private:
  void write(std::string& out, int indent, int depth) const;
  Kind kind_ = Kind::Null;
  bool b_ = false;
  std::string text_;  // number text or string value
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// `s` as a JSON string literal, quoted and escaped (for writers that stream
// JSON of their own, e.g. a trace).
std::string quote(const std::string& s);

// Parses a document; errors name `where` with line and column.
Value parse(const std::string& text, const std::string& where);

}  // namespace json
}  // namespace onyx
