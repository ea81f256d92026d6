// Shared by the JSON readers (costs.json, profile.json, cluster.json, ...): parsing, refusing
// unknown keys, and reading strings, numbers, whole numbers and booleans with messages that name
// the file, the field and the value, and say what to give instead.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace pipeworks {

// Where a value sits, for messages: `prefix` names the file ("costs.json: "), `path` the object
// ("stages[2]", "layers[1] (\"head\")", "the top level"). A key's value is "<path>.<key>".
struct json_where {
  std::string prefix = {};
  std::string path = {};
};

// Whether a reader refuses an absent key ("... has no \"key\"; give ...") or leaves `out` as it is.
enum class presence { optional, required };

// A finite number, any, >= 0 or > 0. `unit` follows "number of" ("milliseconds"); `note` goes
// in brackets after the bound ("bytes per second", "1 is nominal"). Either may be empty.
struct number_range {
  enum bound_kind { any, non_negative, positive };
  bound_kind bound = any;
  std::string unit = {};
  std::string note = {};
  // Tighter bounds where a value beyond them is a mistake that would overflow later arithmetic
  // (a time of 1e308, a speed of 1e-308): "... in 1e-06..1e+06".
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
};

// A whole number in min..max. Messages write the bounds as 2^k or 2^k-1 where they are such
// powers (>= 2^16), else in decimal: "a whole number of bytes in 0..2^62 (0: unlimited)".
struct whole_range {
  std::int64_t min = 0;
  std::int64_t max = std::int64_t{1} << 62;
  std::string unit = {};  // what it counts: "bytes", "samples"; empty for a bare number
  std::string note = {};  // in brackets after the range: "0: unlimited"
};

// What a reader asks for, as its messages say it: "a number of milliseconds >= 0",
// "a whole number in 1..2^31-1".
std::string describe(const number_range& r);
std::string describe(const whole_range& r);

// Arrays and objects nested deeper than this are refused before anything parses them: the JSON
// library's dump, comparison and copies recurse once per level, and some 60,000 levels overflow
// the stack. The files pipeworks reads nest a few levels.
constexpr int max_json_depth = 128;

// An error "<what> nests arrays and objects deeper than 128 levels (at byte N) ..." when the text
// does, counting brackets outside strings; it does not check the syntax. `what` names the text
// ("costs.json", "model.safetensors: the header").
status check_json_depth(std::string_view text, const std::string& what);

// The document, or an error "<file> is not valid JSON: ..." (a syntax error, or a number out of
// range such as 1e999, so every number read from it is finite), or nested too deep
// (check_json_depth).
result<nlohmann::json> parse_json(std::string_view text, const std::string& file);

// Rejects a non-object, and keys outside `allowed`, naming the first one and the keys that would
// work. `file` is the message's prefix ("costs.json: "), `where` the object ("stages[2]").
status only_keys(const nlohmann::json& j, const std::string& file, const std::string& where,
                 std::initializer_list<const char*> allowed);
status only_keys(const nlohmann::json& j, const json_where& at,
                 std::initializer_list<const char*> allowed);

// Refuses an absent `key`: "<prefix><path> has no \"<key>\"; give <what>".
status need_key(const nlohmann::json& j, const json_where& at, const char* key,
                std::string_view what);

// Each reader sets `out` from j[key] and leaves it as it is on an error, or when the key is
// absent and optional. Refusals, each after `at.prefix`:
//   a string:       "<path>.<key> must be a string, not <value>"
//   a bool:         "<path>.<key> must be true or false, not <value>"
//   a number:       "<path>.<key> must be a number of <unit> >= 0 (<note>), not <value>" for a
//                   non-number, "<path>.<key> <value> must be a finite number of <unit> >= 0
//                   (<note>)" for one out of range;
//   a whole number: "<path>.<key> <value> must be a whole number of <unit> in <min>..<max>
//                   (<note>)", or "<path>.<key> <value> is too large (max <max>); give ..." above
//                   max. Unsigned, signed and float JSON numbers are all read (2.0 is 2); a
//                   fraction or a value outside int64 is refused.
status read_string(const nlohmann::json& j, const json_where& at, const char* key,
                   std::string& out, presence p = presence::optional);
status read_bool(const nlohmann::json& j, const json_where& at, const char* key, bool& out,
                 presence p = presence::optional);
status read_number(const nlohmann::json& j, const json_where& at, const char* key,
                   const number_range& r, double& out, presence p = presence::optional);
status read_whole(const nlohmann::json& j, const json_where& at, const char* key,
                  const whole_range& r, std::int64_t& out, presence p = presence::optional);
// The same into an int; a range wider than int's is narrowed to it.
status read_whole(const nlohmann::json& j, const json_where& at, const char* key,
                  const whole_range& r, int& out, presence p = presence::optional);

}  // namespace pipeworks

// In a function returning result<T>: return the error of a failed status.
#define PW_TRY(expr)                       \
  do {                                     \
    ::pipeworks::status st_ = (expr);      \
    if (!st_) return ::pipeworks::error{st_.message()}; \
  } while (0)
