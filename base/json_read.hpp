// Shared by the JSON readers (costs.json, profile.json, cluster.json): parsing with a message
// that names the file, refusing unknown keys with a message that lists the known ones, and
// returning a failed status from a result.
#pragma once
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace pipeworks {

// The document, or an error "<file> is not valid JSON: ..." (a syntax error, or a number out of
// range such as 1e999).
inline result<nlohmann::json> parse_json(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return make_error(file + " is not valid JSON: " + e.what());
  }
}

// Rejects keys outside `allowed`, naming the first one and the keys that would work. `file` is
// the message's prefix ("costs.json: "), `where` the object ("stages[2]").
inline status only_keys(const nlohmann::json& j, const std::string& file, const std::string& where,
                        std::initializer_list<const char*> allowed) {
  if (!j.is_object()) return make_error(file + where + " must be an object, not " + j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : allowed) known = known || it.key() == k;
    if (known) continue;
    std::string list;
    for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
    return make_error(file + "unknown key \"" + it.key() + "\" in " + where + "; known keys: " +
                      list);
  }
  return {};
}

}  // namespace pipeworks

// In a function returning result<T>: return the error of a failed status.
#define PW_TRY(expr)                       \
  do {                                     \
    ::pipeworks::status st_ = (expr);      \
    if (!st_) return ::pipeworks::error{st_.message()}; \
  } while (0)
