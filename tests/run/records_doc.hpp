// The field tables of docs/records.md, read by the schema tests: a section's `| field | type |
// unit | meaning |` rows as names ("configurations[].mesh") with their JSON type, and a JSON
// record flattened to the same names, so that a test can check "exactly these fields, these
// types" against the page a reader sees.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::test {

/// One documented field: its JSON type (string, integer, number, boolean, array, object) and
/// whether it may be absent ("object, optional").
struct DocField {
  std::string type;
  bool optional = false;
};

/// docs/records.md, found from the tests' data folder (tests/data, two levels below the root).
inline std::string records_doc_text() {
  const std::string path = std::string(TESSERA_TEST_DATA_DIR) + "/../../docs/records.md";
  std::ifstream f(path);
  if (!f) throw std::runtime_error("records_doc: cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A markdown table row's cells, trimmed ("| a | b |" gives {"a", "b"}).
inline std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line.substr(1));
  for (std::string c; std::getline(ss, c, '|');) {
    const auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
    cells.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
  }
  return cells;
}

/// The fields of the table under "## `section`" (up to the next "## "): rows whose first cell is
/// a `backquoted` name. Throws when the section or its table is missing.
inline std::map<std::string, DocField> doc_fields(const std::string& markdown,
                                                  const std::string& section) {
  std::map<std::string, DocField> out;
  std::stringstream ss(markdown);
  bool in = false, found = false;
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("## ", 0) == 0) {
      in = line == "## " + section;
      found = found || in;
      continue;
    }
    if (!in || line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> c = table_cells(line);
    if (c.size() < 4)
      throw std::runtime_error("records_doc: a row of '" + section + "' has " +
                               std::to_string(c.size()) + " cells: " + line);
    const std::string name = c[0].substr(1, c[0].size() - 2);  // without the backquotes
    const std::string type = c[1].substr(0, c[1].find(','));
    out[name] = DocField{type, c[1].find("optional") != std::string::npos};
  }
  if (!found || out.empty())
    throw std::runtime_error("records_doc: no field table under '## " + section + "'");
  return out;
}

/// The JSON type name of `v`, as the tables write it (a whole number is "integer", a double
/// "number": nlohmann keeps the two apart, and a dumped double always has a '.' or an 'e').
inline std::string json_type(const nlohmann::ordered_json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

/// Every field of `record` under the tables' names: "a", "a.b" for an object's field, "a[].b" for
/// a field of an array's objects; each with the types it was seen with.
inline void flatten(const nlohmann::ordered_json& record, const std::string& prefix,
                    std::map<std::string, std::set<std::string>>& out) {
  for (auto it = record.begin(); it != record.end(); ++it) {
    const std::string name = prefix + it.key();
    out[name].insert(json_type(it.value()));
    if (it.value().is_object()) flatten(it.value(), name + ".", out);
    if (it.value().is_array())
      for (const auto& e : it.value())
        if (e.is_object()) flatten(e, name + "[].", out);
  }
}

/// What keeps `record` from having exactly the fields of `doc` with their types, one line each
/// (empty: it has). A documented field is required unless marked optional, once its parent ("a"
/// of "a.b" and of "a[].b") is present; give records whose arrays are not empty.
inline std::vector<std::string> record_mismatches(const nlohmann::ordered_json& record,
                                                  const std::map<std::string, DocField>& doc) {
  std::map<std::string, std::set<std::string>> seen;
  flatten(record, "", seen);
  std::vector<std::string> out;
  for (const auto& [name, types] : seen) {
    const auto d = doc.find(name);
    if (d == doc.end())
      out.push_back("'" + name + "' is in the record but not in docs/records.md");
    else if (types != std::set<std::string>{d->second.type})
      out.push_back("'" + name + "' is " + *types.begin() + " in the record, " + d->second.type +
                    " in docs/records.md");
  }
  for (const auto& [name, field] : doc) {
    std::string parent = name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'));
    if (parent.size() >= 2 && parent.compare(parent.size() - 2, 2, "[]") == 0)
      parent.resize(parent.size() - 2);
    const bool expected = !field.optional && (parent.empty() || seen.count(parent));
    if (expected && !seen.count(name))
      out.push_back("'" + name + "' is in docs/records.md but not in the record");
  }
  return out;
}

}  // namespace tessera::test
