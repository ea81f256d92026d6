// The JSON readers' shared pieces: parsing, unknown keys, and typed reads whose messages name the
// file, the field and the value.
#include "base/json_read.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace pipeworks {

namespace {

using json = nlohmann::json;

// 2^k or 2^k-1 for such powers from 2^16 on (2^62, 2^31-1), else decimal.
std::string bound_text(std::int64_t x) {
  if (x == std::numeric_limits<std::int64_t>::min()) return "-2^63";
  if (x < 0) return std::string(1, '-').append(bound_text(-x));
  const auto u = static_cast<std::uint64_t>(x);
  for (int k = 16; k < 64; ++k) {
    const std::uint64_t p = std::uint64_t{1} << k;
    if (u == p) return "2^" + std::to_string(k);
    if (u == p - 1) return "2^" + std::to_string(k) + "-1";
  }
  return std::to_string(x);
}

std::string number_text(const number_range& r, bool finite, bool limits = false) {
  std::string s = finite ? "a finite number" : "a number";
  if (!r.unit.empty()) s += " of " + r.unit;
  const auto g = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return std::string(buf);
  };
  const bool low = limits && std::isfinite(r.min), high = limits && std::isfinite(r.max);
  if (low && high) {
    s += " in " + g(r.min) + ".." + g(r.max);
  } else {
    if (low) s += " >= " + g(r.min);
    if (!low && r.bound == number_range::non_negative) s += " >= 0";
    if (!low && r.bound == number_range::positive) s += " > 0";
    if (high) s += " <= " + g(r.max);
  }
  if (!r.note.empty()) s += " (" + r.note + ")";
  return s;
}

std::string field(const json_where& at, const char* key) { return at.prefix + at.path + "." + key; }

// The value at `key`, or nullptr when it is absent (an error in `st` when it is required).
const json* find(const json& j, const json_where& at, const char* key, presence p,
                 const std::string& what, status& st) {
  if (j.is_object()) {
    auto it = j.find(key);
    if (it != j.end()) return &*it;
  }
  if (p == presence::required) st = need_key(j, at, key, what);
  return nullptr;
}

}  // namespace

std::string describe(const number_range& r) { return number_text(r, false, true); }

std::string describe(const whole_range& r) {
  std::string s = "a whole number";
  if (!r.unit.empty()) s += " of " + r.unit;
  s += " in " + bound_text(r.min) + ".." + bound_text(r.max);
  if (!r.note.empty()) s += " (" + r.note + ")";
  return s;
}

status check_json_depth(std::string_view text, const std::string& what) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_json_depth)
        return make_error(what + " nests arrays and objects deeper than " +
                          std::to_string(max_json_depth) + " levels (at byte " + std::to_string(i) +
                          "); the files pipeworks reads nest a few levels: check that this is "
                          "the right file");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return {};
}

result<json> parse_json(std::string_view text, const std::string& file) {
  if (status deep = check_json_depth(text, file); !deep) return make_error(deep.message());
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return make_error(file + " is not valid JSON: " + e.what());
  }
}

status only_keys(const json& j, const std::string& file, const std::string& where,
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

status only_keys(const json& j, const json_where& at, std::initializer_list<const char*> allowed) {
  return only_keys(j, at.prefix, at.path, allowed);
}

status need_key(const json& j, const json_where& at, const char* key, std::string_view what) {
  if (j.is_object() && j.contains(key)) return {};
  return make_error(at.prefix + at.path + " has no \"" + key + "\"; give " + std::string(what));
}

status read_string(const json& j, const json_where& at, const char* key, std::string& out,
                   presence p) {
  status st;
  const json* v = find(j, at, key, p, "a string", st);
  if (!v) return st;
  if (!v->is_string()) return make_error(field(at, key) + " must be a string, not " + v->dump());
  out = v->get<std::string>();
  return {};
}

status read_bool(const json& j, const json_where& at, const char* key, bool& out, presence p) {
  status st;
  const json* v = find(j, at, key, p, "true or false", st);
  if (!v) return st;
  if (!v->is_boolean()) {
    return make_error(field(at, key) + " must be true or false, not " + v->dump());
  }
  out = v->get<bool>();
  return {};
}

status read_number(const json& j, const json_where& at, const char* key, const number_range& r,
                   double& out, presence p) {
  status st;
  const json* v = find(j, at, key, p, describe(r), st);
  if (!v) return st;
  if (!v->is_number()) {
    return make_error(field(at, key) + " must be " + describe(r) + ", not " + v->dump());
  }
  const double x = v->get<double>();
  const bool in_range = r.bound == number_range::positive       ? x > 0.0
                        : r.bound == number_range::non_negative ? x >= 0.0
                                                                : true;
  if (!std::isfinite(x) || !in_range)
    return make_error(field(at, key) + " " + v->dump() + " must be " + number_text(r, true));
  if (x < r.min || x > r.max)
    return make_error(field(at, key) + " " + v->dump() + " must be " + number_text(r, true, true));
  out = x;
  return {};
}

status read_whole(const json& j, const json_where& at, const char* key, const whole_range& r,
                  std::int64_t& out, presence p) {
  status st;
  const json* v = find(j, at, key, p, describe(r), st);
  if (!v) return st;
  const std::string name = field(at, key) + " " + v->dump();
  const error bad = make_error(name + " must be " + describe(r));
  const error too_large =
      make_error(name + " is too large (max " + bound_text(r.max) + "); give " + describe(r));
  std::int64_t x = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return too_large;
    x = static_cast<std::int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    // Doubles in [-2^63, 2^63) convert exactly when whole; the rest are out of any range.
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) return bad;
    if (d >= 0x1p63) return too_large;
    if (d < -0x1p63) return bad;
    x = static_cast<std::int64_t>(d);
  } else {
    return bad;
  }
  if (x > r.max) return too_large;
  if (x < r.min) return bad;
  out = x;
  return {};
}

status read_whole(const json& j, const json_where& at, const char* key, const whole_range& r,
                  int& out, presence p) {
  whole_range in_int = r;  // a range wider than int's reads as int's
  in_int.min = std::max<std::int64_t>(r.min, std::numeric_limits<int>::min());
  in_int.max = std::min<std::int64_t>(r.max, std::numeric_limits<int>::max());
  std::int64_t x = out;
  if (status st = read_whole(j, at, key, in_int, x, p); !st) return st;
  out = static_cast<int>(x);
  return {};
}

}  // namespace pipeworks
