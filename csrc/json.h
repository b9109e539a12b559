// The one JSON writer of records. Every record kind is a JsonObject whose
// members are written in order: names and strings escaped (any bytes a
// kernel name may hold), numbers that survive a round trip, non-finite
// floats as null. Nothing else in the library writes JSON by hand.
#pragma once

#include "output.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace aoti_debug_printer {

// A JSON string literal, quotes included.
inline std::string json_string(const std::string& s) {
  return "\"" + escaped(s, Escape::Json) + "\"";
}

// printf's %.<digits>g, written by std::to_chars, which the standard
// defines as printf's conversion (checked equal on 18 million doubles,
// NaN and infinities included) at a fifth of glibc's cost: glibc formats
// every double with multi-precision arithmetic, and a record of a small
// tensor prints up to max_values of them.
inline std::string general_number(double v, int digits) {
  char buf[40];
#if defined(__cpp_lib_to_chars)
  const auto written = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
  return std::string(buf, written.ptr);
#else  // a standard library without floating-point to_chars (GCC 10 and older)
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
#endif
}

// %.6g for people, non-finite values spelled nan, inf and -inf.
inline std::string text_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return general_number(v, 6);
}

// A double that reads back bit for bit; null where JSON has no literal.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return general_number(v, 17);
}

// Values of an array or members of an object, each already JSON, joined.
class JsonList {
 public:
  JsonList& text(const std::string& v) { return json(json_string(v)); }
  JsonList& integer(int64_t v) { return json(std::to_string(v)); }
  JsonList& json(const std::string& v) {
    out_ += (out_.empty() ? "" : ", ") + v;
    return *this;
  }
  std::string array() const { return "[" + out_ + "]"; }

 protected:
  std::string out_;
};

class JsonObject : private JsonList {
 public:
  JsonObject& text(const char* key, const std::string& v) { return json(key, json_string(v)); }
  JsonObject& integer(const char* key, int64_t v) { return json(key, std::to_string(v)); }
  JsonObject& number(const char* key, double v) { return json(key, json_number(v)); }
  JsonObject& boolean(const char* key, bool v) { return json(key, v ? "true" : "false"); }
  JsonObject& null(const char* key) { return json(key, "null"); }
  // A member whose value is already JSON (an object, an array, a literal).
  JsonObject& json(const char* key, const std::string& v) {
    JsonList::json(json_string(key) + ": " + v);
    return *this;
  }
  std::string object() const { return "{" + out_ + "}"; }
  // One line of a JSON-lines file.
  std::string line() const { return object() + "\n"; }
};

template <typename List>
std::string json_integers(const List& xs) {
  JsonList list;
  for (const auto& x : xs) list.integer(static_cast<int64_t>(x));
  return list.array();
}

inline std::string json_texts(const std::vector<std::string>& xs) {
  JsonList list;
  for (const std::string& x : xs) list.text(x);
  return list.array();
}

}  // namespace aoti_debug_printer
