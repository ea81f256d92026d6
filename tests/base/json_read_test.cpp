// Tests for the shared JSON readers: required and optional keys, every refusal's exact message,
// whole numbers at the 2^62 boundary in each JSON number form, and parse_json's own refusals.
#include "base/json_read.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>

using namespace pipeworks;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const json_where at{"plan.json: ", "stages[1]"};
const whole_range byte_count{.min = 0, .max = std::int64_t{1} << 62, .unit = "bytes"};
const number_range milliseconds{.bound = number_range::non_negative, .unit = "milliseconds"};

json doc(const std::string& text) { return json::parse(text); }

// The message of reading `text`'s "n" as a whole number in `r`, or "ok".
std::string whole_error(const std::string& text, const whole_range& r = byte_count) {
  std::int64_t out = -7;
  const status st = read_whole(doc(text), at, "n", r, out);
  if (st) return "ok";
  CHECK(out == -7);  // left as it was
  return st.message();
}

std::int64_t whole_value(const std::string& text, const whole_range& r = byte_count) {
  std::int64_t out = -7;
  const status st = read_whole(doc(text), at, "n", r, out);
  INFO(st.message());
  CHECK(st.ok());
  return out;
}

}  // namespace

TEST_CASE("json_read: describe says what a reader asks for", "[base]") {
  CHECK(describe(byte_count) == "a whole number of bytes in 0..2^62");
  CHECK(describe(whole_range{.min = 1, .max = 2147483647}) == "a whole number in 1..2^31-1");
  CHECK(describe(whole_range{.min = -5, .max = 1000, .unit = "steps", .note = "-1: all"}) ==
        "a whole number of steps in -5..1000 (-1: all)");
  CHECK(describe(whole_range{.min = -(std::int64_t{1} << 62)}) ==
        "a whole number in -2^62..2^62");
  CHECK(describe(milliseconds) == "a number of milliseconds >= 0");
  CHECK(describe(number_range{.bound = number_range::positive, .note = "seconds"}) ==
        "a number > 0 (seconds)");
  CHECK(describe(number_range{}) == "a number");
}

TEST_CASE("json_read: an absent optional key leaves the value and a required one is refused",
          "[base]") {
  const json j = doc("{}");
  std::string s = "kept";
  double x = 2.5;
  std::int64_t n = 9;
  int i = 3;
  bool b = true;
  CHECK(read_string(j, at, "name", s).ok());
  CHECK(read_number(j, at, "ms", milliseconds, x).ok());
  CHECK(read_whole(j, at, "n", byte_count, n).ok());
  CHECK(read_whole(j, at, "i", byte_count, i).ok());
  CHECK(read_bool(j, at, "on", b).ok());
  CHECK(s == "kept");
  CHECK(x == 2.5);
  CHECK(n == 9);
  CHECK(i == 3);
  CHECK(b);

  const presence req = presence::required;
  CHECK(read_string(j, at, "name", s, req).message() ==
        "plan.json: stages[1] has no \"name\"; give a string");
  CHECK(read_number(j, at, "ms", milliseconds, x, req).message() ==
        "plan.json: stages[1] has no \"ms\"; give a number of milliseconds >= 0");
  CHECK(read_whole(j, at, "n", byte_count, n, req).message() ==
        "plan.json: stages[1] has no \"n\"; give a whole number of bytes in 0..2^62");
  CHECK(read_bool(j, at, "on", b, req).message() ==
        "plan.json: stages[1] has no \"on\"; give true or false");
  CHECK(need_key(j, at, "layers", "a non-empty array").message() ==
        "plan.json: stages[1] has no \"layers\"; give a non-empty array");
  CHECK(need_key(doc(R"({"layers": 1})"), at, "layers", "a non-empty array").ok());
}

TEST_CASE("json_read: present values are read", "[base]") {
  const json j = doc(R"({"name": "head", "ms": 1.5, "n": 12, "on": false})");
  std::string s;
  double x = 0;
  std::int64_t n = 0;
  bool b = true;
  const presence req = presence::required;
  CHECK(read_string(j, at, "name", s, req).ok());
  CHECK(read_number(j, at, "ms", milliseconds, x, req).ok());
  CHECK(read_whole(j, at, "n", byte_count, n, req).ok());
  CHECK(read_bool(j, at, "on", b, req).ok());
  CHECK(s == "head");
  CHECK(x == 1.5);
  CHECK(n == 12);
  CHECK_FALSE(b);
}

TEST_CASE("json_read: strings and booleans of the wrong type are refused", "[base]") {
  const json j = doc(R"({"name": 3, "on": "yes"})");
  std::string s = "kept";
  bool b = true;
  CHECK(read_string(j, at, "name", s).message() ==
        "plan.json: stages[1].name must be a string, not 3");
  CHECK(read_bool(j, at, "on", b).message() ==
        "plan.json: stages[1].on must be true or false, not \"yes\"");
  CHECK(s == "kept");
  CHECK(b);
}

TEST_CASE("json_read: numbers outside their bound or of the wrong type are refused", "[base]") {
  double x = 4.0;
  CHECK(read_number(doc(R"({"ms": "1"})"), at, "ms", milliseconds, x).message() ==
        "plan.json: stages[1].ms must be a number of milliseconds >= 0, not \"1\"");
  CHECK(read_number(doc(R"({"ms": null})"), at, "ms", milliseconds, x).message() ==
        "plan.json: stages[1].ms must be a number of milliseconds >= 0, not null");
  CHECK(read_number(doc(R"({"ms": -0.5})"), at, "ms", milliseconds, x).message() ==
        "plan.json: stages[1].ms -0.5 must be a finite number of milliseconds >= 0");
  const number_range speed{.bound = number_range::positive, .note = "1 is nominal"};
  CHECK(read_number(doc(R"({"speed": 0})"), at, "speed", speed, x).message() ==
        "plan.json: stages[1].speed 0 must be a finite number > 0 (1 is nominal)");
  CHECK(x == 4.0);
  CHECK(read_number(doc(R"({"ms": 0})"), at, "ms", milliseconds, x).ok());
  CHECK(x == 0.0);
  CHECK(read_number(doc(R"({"t": -3})"), at, "t", number_range{}, x).ok());
  CHECK(x == -3.0);
  CHECK(read_number(doc(R"({"t": true})"), at, "t", number_range{}, x).message() ==
        "plan.json: stages[1].t must be a number, not true");
  // JSON has no infinity (nlohmann writes it as null); a document built in code may hold one.
  json inf = json::object();
  inf["t"] = std::numeric_limits<double>::infinity();
  CHECK(read_number(inf, at, "t", number_range{}, x).message() ==
        "plan.json: stages[1].t null must be a finite number");
}

TEST_CASE("json_read: whole numbers are read from unsigned signed and float JSON numbers",
          "[base]") {
  CHECK(whole_value(R"({"n": 7})") == 7);
  CHECK(whole_value(R"({"n": 7.0})") == 7);
  CHECK(whole_value(R"({"n": 1e3})") == 1000);
  const whole_range signed_range{.min = -10, .max = 10};
  CHECK(whole_value(R"({"n": -4})", signed_range) == -4);
  CHECK(whole_value(R"({"n": -4.0})", signed_range) == -4);
  CHECK(whole_error(R"({"n": -11})", signed_range) ==
        "plan.json: stages[1].n -11 must be a whole number in -10..10");
  CHECK(whole_error(R"({"n": 11})", signed_range) ==
        "plan.json: stages[1].n 11 is too large (max 10); give a whole number in -10..10");
}

TEST_CASE("json_read: whole numbers that are not whole or not numbers are refused", "[base]") {
  const std::string must = " must be a whole number of bytes in 0..2^62";
  CHECK(whole_error(R"({"n": 1.5})") == "plan.json: stages[1].n 1.5" + must);
  CHECK(whole_error(R"({"n": "8"})") == "plan.json: stages[1].n \"8\"" + must);
  CHECK(whole_error(R"({"n": null})") == "plan.json: stages[1].n null" + must);
  CHECK(whole_error(R"({"n": [1]})") == "plan.json: stages[1].n [1]" + must);
  CHECK(whole_error(R"({"n": -1})") == "plan.json: stages[1].n -1" + must);
  CHECK(whole_error(R"({"n": -1e30})") == "plan.json: stages[1].n -1e+30" + must);
  CHECK(whole_error(R"({"n": -9223372036854775808})") ==
        "plan.json: stages[1].n -9223372036854775808" + must);
  json inf = json::object();
  inf["n"] = -std::numeric_limits<double>::infinity();
  std::int64_t out = 0;
  CHECK(read_whole(inf, at, "n", byte_count, out).message() == "plan.json: stages[1].n null" + must);
  const whole_range noted{.min = 0, .max = 100, .unit = "bytes", .note = "0: unlimited"};
  CHECK(whole_error(R"({"n": 0.5})", noted) ==
        "plan.json: stages[1].n 0.5 must be a whole number of bytes in 0..100 (0: unlimited)");
}

TEST_CASE("json_read: 2^62 is the largest byte count in every number form", "[base]") {
  const std::int64_t max = std::int64_t{1} << 62;
  const std::string large = " is too large (max 2^62); give a whole number of bytes in 0..2^62";
  CHECK(whole_value(R"({"n": 4611686018427387904})") == max);
  CHECK(whole_value(R"({"n": 4.611686018427387904e18})") == max);
  CHECK(whole_error(R"({"n": 4611686018427387905})") ==
        "plan.json: stages[1].n 4611686018427387905" + large);
  // The next double above 2^62 is 2^62 + 1024.
  CHECK(whole_error(R"({"n": 4611686018427388928.0})") ==
        "plan.json: stages[1].n 4.611686018427389e+18" + large);
  CHECK(whole_error(R"({"n": 9223372036854775807})") ==
        "plan.json: stages[1].n 9223372036854775807" + large);
  CHECK(whole_error(R"({"n": 18446744073709551615})") ==
        "plan.json: stages[1].n 18446744073709551615" + large);
  CHECK(whole_error(R"({"n": 9.223372036854775808e18})") ==
        "plan.json: stages[1].n 9.223372036854776e+18" + large);
  CHECK(whole_error(R"({"n": 1e30})") == "plan.json: stages[1].n 1e+30" + large);
}

TEST_CASE("json_read: reading into an int narrows the range to int's", "[base]") {
  int i = 5;
  const whole_range wide{.min = 0, .max = std::int64_t{1} << 62};
  CHECK(read_whole(doc(R"({"n": 2147483647})"), at, "n", wide, i).ok());
  CHECK(i == 2147483647);
  CHECK(read_whole(doc(R"({"n": 2147483648})"), at, "n", wide, i).message() ==
        "plan.json: stages[1].n 2147483648 is too large (max 2^31-1); give a whole number in "
        "0..2^31-1");
  CHECK(i == 2147483647);
  CHECK(read_whole(doc(R"({"n": 0})"), at, "n", whole_range{.min = 1, .max = 8}, i).message() ==
        "plan.json: stages[1].n 0 must be a whole number in 1..8");
}

TEST_CASE("json_read: parse_json refuses bad syntax and numbers past a double", "[base]") {
  CHECK(parse_json(R"({"n": 1})", "plan.json").ok());
  auto huge = parse_json(R"({"n": 1e999})", "plan.json");
  REQUIRE_FALSE(huge.ok());
  CHECK_THAT(huge.message(), Contains("plan.json is not valid JSON") && Contains("1e999"));
  auto broken = parse_json("{", "plan.json");
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(broken.message(), Contains("plan.json is not valid JSON"));
}

TEST_CASE("json_read: only_keys names the unknown key and the known ones", "[base]") {
  CHECK(only_keys(doc(R"({"a": 1})"), at, {"a", "b"}).ok());
  CHECK(only_keys(doc(R"({"a": 1, "c": 2})"), at, {"a", "b"}).message() ==
        "plan.json: unknown key \"c\" in stages[1]; known keys: a, b");
  CHECK(only_keys(doc("[1]"), at, {"a"}).message() ==
        "plan.json: stages[1] must be an object, not [1]");
  // A non-object has no keys: a required one is missing, an optional one is absent.
  std::string s = "kept";
  CHECK(read_string(doc("3"), at, "name", s).ok());
  CHECK(read_string(doc("3"), at, "name", s, presence::required).message() ==
        "plan.json: stages[1] has no \"name\"; give a string");
}

TEST_CASE("json_read: JSON nested deeper than the bound is refused before it is parsed", "[base]") {
  auto nested = [](int levels, char open, char close) {
    return std::string(static_cast<std::size_t>(levels), open) +
           std::string(static_cast<std::size_t>(levels), close);
  };
  CHECK(check_json_depth(nested(max_json_depth, '[', ']'), "a.json").ok());
  CHECK(parse_json(nested(max_json_depth, '[', ']'), "a.json").ok());
  const status over = check_json_depth(nested(max_json_depth + 1, '[', ']'), "a.json");
  REQUIRE_FALSE(over.ok());
  CHECK_THAT(over.message(), Contains("a.json nests arrays and objects deeper than 128 levels") &&
                                 Contains("at byte 128"));
  // Some 60,000 levels once overflowed the stack; now they are an error like any other.
  const auto deep = parse_json(nested(60000, '[', ']'), "deep.json");
  REQUIRE_FALSE(deep.ok());
  CHECK_THAT(deep.message(), Contains("deep.json nests arrays and objects deeper than 128 levels"));
  std::string objects;
  for (int i = 0; i < 200; ++i) objects += "{\"k\":";
  objects += "1" + std::string(200, '}');
  CHECK_THAT(parse_json(objects, "o.json").message(), Contains("deeper than 128 levels"));
  // Brackets inside strings, escaped quotes among them, do not count.
  const std::string in_strings = "{\"a\": \"" + std::string(500, '[') + "\\\"" +
                                 std::string(500, '{') + "\", \"b\": [[1]]}";
  CHECK(check_json_depth(in_strings, "s.json").ok());
  CHECK(parse_json(in_strings, "s.json").ok());
}
