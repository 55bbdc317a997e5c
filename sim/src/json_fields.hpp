// Helpers for reading JSON files field by field with errors that name the file, the entry and
// the field (topology and device files).
#pragma once

#include <nlohmann/json.hpp>
#include <initializer_list>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::sim::json_fields {

using Json = nlohmann::json;

/// Parses `text`; a syntax error names `origin` and the byte where parsing stopped.
inline Json parse(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw InvalidArgument(detail::cat("sim: ", origin, ": not valid JSON (", e.what(),
                                      "); fix the syntax at that byte"));
  }
}

/// Refuses fields of `obj` not in `allowed` (a misspelt field would otherwise be ignored).
inline void refuse_unknown(const Json& obj, std::initializer_list<const char*> allowed,
                           const std::string& where) {
  for (const auto& item : obj.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || item.key() == a;
    if (ok) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw InvalidArgument(detail::cat("sim: ", where, ": unknown field \"", item.key(),
                                      "\"; allowed: ", list));
  }
}

/// The object member `key`; throws naming the field when it is missing.
inline const Json& required(const Json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end())
    throw InvalidArgument(detail::cat("sim: ", where, ": missing field \"", key, "\""));
  return *it;
}

inline std::string string_field(const Json& v, const char* key, const std::string& where) {
  if (!v.is_string())
    throw InvalidArgument(detail::cat("sim: ", where, ": field \"", key,
                                      "\" must be a string, got ", v.dump()));
  return v.get<std::string>();
}

inline double number_field(const Json& v, const char* key, const std::string& where) {
  if (!v.is_number())
    throw InvalidArgument(detail::cat("sim: ", where, ": field \"", key,
                                      "\" must be a number, got ", v.dump()));
  return v.get<double>();
}

inline int int_field(const Json& v, const char* key, const std::string& where) {
  if (!v.is_number_integer())
    throw InvalidArgument(detail::cat("sim: ", where, ": field \"", key,
                                      "\" must be an integer, got ", v.dump()));
  return v.get<int>();
}

/// A number that must lie in [lo, hi]; `unit` and `hint` go into the message.
inline double number_in(const Json& obj, const char* key, double lo, double hi,
                        const std::string& where, const char* hint) {
  const double x = number_field(required(obj, key, where), key, where);
  if (!(x >= lo && x <= hi))
    throw InvalidArgument(detail::cat("sim: ", where, ": field \"", key, "\" is ", x,
                                      ", outside [", lo, ", ", hi, "]; ", hint));
  return x;
}

}  // namespace tessera::sim::json_fields
