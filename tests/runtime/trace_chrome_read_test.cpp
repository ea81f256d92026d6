// read_chrome_trace and parse_chrome_trace (runtime/trace_chrome_read.hpp): a trace that
// to_chrome_trace wrote reads back as its timeline; other JSON, cut or huge files are refused, and
// thousands of mutations of a valid trace (fixed seed) are each read or refused, never thrown.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/explorer.hpp"
#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"
#include "runtime/trace_chrome.hpp"
#include "runtime/trace_chrome_read.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;

namespace {

timeline simulated(schedule_kind kind, int p, int m) {
  auto made = make_schedule(kind, {p, m, 1, 1, 1});
  REQUIRE(made.ok());
  auto sim = simulate(lower_communication(std::move(*made)), cost_model{});
  REQUIRE(sim.ok());
  return sim->trace;
}

std::string refused(std::string_view text) {
  auto t = parse_chrome_trace(text, "t.json");
  REQUIRE_FALSE(t.ok());
  return t.message();
}

}  // namespace

TEST_CASE("parse_chrome_trace reads back every event of a trace that to_chrome_trace wrote",
          "[runtime][trace]") {
  const timeline t = simulated(schedule_kind::zb_h1, 3, 5);
  auto back = parse_chrome_trace(to_chrome_trace(t), "t.json");
  REQUIRE(back.ok());
  CHECK(back->title == t.title);
  CHECK(back->ranks == t.ranks);
  CHECK(back->devices_per_replica == t.devices_per_replica);
  REQUIRE(back->events.size() == t.events.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const timeline_event& a = t.events[i];
    const timeline_event& b = back->events[i];
    INFO("event " << i << " " << to_string(a.act));
    CHECK(b.rank == a.rank);
    CHECK(b.stream == a.stream);
    CHECK(b.act == a.act);
    CHECK(b.version == a.version);
    CHECK(b.flow_id == a.flow_id);
    CHECK(b.start == Approx(a.start).margin(1e-12));
    CHECK(b.end == Approx(a.end).margin(1e-12));
  }
}

// A real run's events carry bytes (timeline_event::bytes): they read back exactly, past 2^31 too;
// a trace without them reads with bytes -1, and negative bytes are refused by name.
TEST_CASE("parse_chrome_trace reads back recorded bytes and reads traces without them",
          "[runtime][trace]") {
  timeline t = simulated(schedule_kind::one_f_one_b, 2, 3);
  auto plain = parse_chrome_trace(to_chrome_trace(t), "t.json");
  REQUIRE(plain.ok());
  for (const timeline_event& e : plain->events) CHECK(e.bytes == -1);
  for (timeline_event& e : t.events) {
    if (e.act.kind == action_kind::forward || e.act.kind == action_kind::backward)
      e.bytes = 1000 + e.act.microbatch;
    if (e.act.kind == action_kind::step) e.bytes = (std::int64_t{1} << 40) + e.act.stage;
  }
  const std::string text = to_chrome_trace(t);
  auto back = parse_chrome_trace(text, "t.json");
  REQUIRE(back.ok());
  REQUIRE(back->events.size() == t.events.size());
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    INFO("event " << i << " " << to_string(t.events[i].act));
    CHECK(back->events[i].bytes == t.events[i].bytes);
  }
  std::string negative = text;
  const std::string first = "\"bytes\":1000";
  const auto at = negative.find(first);
  REQUIRE(at != std::string::npos);
  negative.replace(at, first.size(), "\"bytes\":-1000");
  CHECK(refused(negative).find("has an args.bytes that is not a whole number >= 0") !=
        std::string::npos);
}

TEST_CASE("parse_chrome_trace refuses another tool's trace, a cut one and broken events",
          "[runtime][trace]") {
  CHECK(refused(R"({"traceEvents":[{"ph":"X","name":"matmul","pid":0,"tid":0,"ts":0,"dur":1}]})")
            .find("t.json is not a pipeworks trace") != std::string::npos);
  CHECK(refused(R"([1, 2])").find("is not a Chrome trace") != std::string::npos);
  // A text file is no trace at all, not a truncated one.
  CHECK(refused("Once upon a time\n").find("is not a trace: a trace is a JSON object, and this "
                                           "file does not start with '{'") != std::string::npos);
  CHECK(refused("  \n").find("is not a trace: a trace is a JSON object, and this file is empty") !=
        std::string::npos);
  const std::string whole = to_chrome_trace(simulated(schedule_kind::one_f_one_b, 2, 2));
  CHECK(refused(whole.substr(0, whole.size() / 2)).find("ends before its JSON does") !=
        std::string::npos);
  CHECK(refused(R"({"otherData":{"ranks":1,"devices_per_replica":1},"traceEvents":[)"
                R"({"ph":"X","name":"0F0","pid":0,"tid":0,"ts":0,"dur":1,"args":{}}]})")
            .find("traceEvents[0] has no whole args.version") != std::string::npos);
  CHECK(refused(R"({"otherData":{"ranks":1,"devices_per_replica":1},"traceEvents":[)"
                R"({"ph":"X","name":"lunch","pid":0,"tid":0,"ts":0,"dur":1,"args":{"version":0}}]})")
            .find("is named \"lunch\", not an action") != std::string::npos);
  CHECK(refused(R"({"otherData":{"ranks":1,"devices_per_replica":1},"traceEvents":[)"
                R"({"ph":"X","name":"0F0","pid":3,"tid":0,"ts":0,"dur":1,"args":{"version":0}}]})")
            .find("has no \"pid\" in 0..0") != std::string::npos);
}

TEST_CASE("read_chrome_trace refuses a file over its limit by its size before reading it",
          "[runtime][trace]") {
  pipeworks::test::scratch_dir dir("trace_read");
  const std::string big = dir / "big.json";
  { std::ofstream(big) << "{"; }
  std::filesystem::resize_file(big, std::uintmax_t{1} << 30);  // sparse: no disk is used
  auto t = read_chrome_trace(big);
  REQUIRE_FALSE(t.ok());
  CHECK(t.message().find("is 1073741824 bytes, more than the " +
                         std::to_string(max_trace_read_bytes)) != std::string::npos);
}

namespace {

// A fixed-seed generator whose numbers do not depend on the standard library's distributions.
struct fuzz_rng {
  std::mt19937_64 engine{20261128};
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(engine() % n); }
};

// What parse_chrome_trace made of one input: it read it (its timeline holds together, and the
// explorer makes a page of it or refuses it) or refused it with a message. Anything thrown fails
// the test, naming the input.
enum class outcome { read, refused };
outcome read_or_refuse(const std::string& text, const std::string& what) {
  INFO(what << "\n" << text.substr(0, 2000));
  try {
    auto t = parse_chrome_trace(text, "t.json");
    if (!t) {
      CHECK_FALSE(t.message().empty());
      return outcome::refused;
    }
    CHECK(t->devices_per_replica >= 1);
    for (const timeline_event& e : t->events) {
      CHECK(e.rank >= 0);
      CHECK(e.rank < t->ranks);
      CHECK(static_cast<int>(e.stream) <= 2);
      CHECK(e.version >= -1);
      CHECK(e.flow_id >= -1);
      CHECK(std::isfinite(e.start));
      CHECK(std::isfinite(e.end));
      CHECK(e.start <= e.end);
      CHECK(e.act.stage >= 0);
      CHECK(e.act.stage <= max_action_stage);
    }
    auto page = explorer_json(*t);
    CHECK((page.ok() || !page.message().empty()));
    return outcome::read;
  } catch (const std::exception& e) {
    FAIL_CHECK("threw " << e.what());
  } catch (...) {
    FAIL_CHECK("threw something not a std::exception");
  }
  return outcome::refused;
}

// The JSON values a field is given in place of its own: wrong types, huge, tiny and negative
// numbers, as text (some are numbers JSON allows but no double holds).
const std::vector<std::string> hostile_values{
    "null", "true", "\"0\"", "\"\"", "[]", "[0]", "{}", "0.5", "-1", "-2147483649", "2147483648",
    "9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e308", "-1e308",
    "1e400", "-1e400", "1e-400", "-0", "0e0", "123456789012345678901234567890"};

}  // namespace

TEST_CASE("parse_chrome_trace reads or refuses every mutation of a valid trace and throws nothing",
          "[runtime][trace]") {
  // Fuzzing without a fuzzer: a valid trace (sends, receives, flows, versions, two steps) cut at
  // many offsets, its bytes flipped, its fields removed or given wrong types, huge or negative
  // numbers, each input either read (and its timeline sane) or refused, with a fixed seed.
  auto made = make_schedule(schedule_kind::two_bw, {3, 3, 1, 1, 2});
  REQUIRE(made.ok());
  auto sim = simulate(lower_communication(std::move(*made)), cost_model{});
  REQUIRE(sim.ok());
  const std::string valid = to_chrome_trace(sim->trace);
  REQUIRE(read_or_refuse(valid, "the valid trace") == outcome::read);
  const nlohmann::json doc = nlohmann::json::parse(valid);
  fuzz_rng rng;
  std::map<std::string, std::array<int, 2>> tally;  // mutation -> {read, refused}
  const auto run = [&](const std::string& kind, const std::string& text, const std::string& what) {
    ++tally[kind][read_or_refuse(text, kind + ": " + what) == outcome::read ? 0 : 1];
  };

  // Truncations: every offset near either end, and about 400 between. A proper prefix of the
  // trace's one object is never whole JSON, so each is refused.
  const auto last = valid.find_last_of('}');
  for (std::size_t cut = 0; cut <= last; ++cut) {
    if (cut > 64 && cut + 64 < last && cut % std::max<std::size_t>(1, last / 400) != 0) continue;
    INFO("cut at " << cut);
    CHECK(read_or_refuse(valid.substr(0, cut), "cut at " + std::to_string(cut)) == outcome::refused);
    ++tally["truncated"][1];
  }
  // Bytes flipped: 1 to 8 bytes each, to any byte value, JSON's own punctuation more often.
  const std::string punctuation = "{}[]\":,-.0123456789eE \\\n";
  for (int i = 0; i < 1500; ++i) {
    std::string text = valid;
    const std::size_t flips = 1 + rng.below(8);
    for (std::size_t f = 0; f < flips; ++f) {
      const std::size_t at = rng.below(text.size());
      text[at] = rng.below(2) ? punctuation[rng.below(punctuation.size())]
                              : static_cast<char>(rng.below(256));
    }
    run("bytes flipped", text, std::to_string(flips) + " flips, input " + std::to_string(i));
  }
  // Fields: a field of an event, of its args or of otherData removed or given a hostile value.
  for (int i = 0; i < 1500; ++i) {
    nlohmann::json d = doc;
    const std::size_t where = rng.below(3);
    nlohmann::json* target = &d["otherData"];
    if (where > 0) {
      nlohmann::json& e = d["traceEvents"][rng.below(d["traceEvents"].size())];
      target = where == 2 && e.contains("args") ? &e["args"] : &e;
    }
    if (!target->is_object() || target->empty()) continue;
    auto it = target->begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng.below(target->size())));
    const std::string key = it.key();
    if (rng.below(4) == 0) {
      target->erase(key);
      run("field removed", d.dump(), key);
    } else {
      // Given as text so that numbers past a double's range reach the reader as written.
      const std::string marker = "\"__pipeworks_fuzz__\"";
      (*target)[key] = "__pipeworks_fuzz__";
      std::string text = d.dump();
      const std::string& value = hostile_values[rng.below(hostile_values.size())];
      text.replace(text.find(marker), marker.size(), value);
      run(key == "name" || key == "ph" || key == "title" ? "wrong type" : "hostile number", text,
          key + " = " + value);
    }
  }
  // Negative ids: every pid, tid, flow_id, version and ranks at once, each -1 or a large negative.
  for (const std::string negative : {"-1", "-7", "-2147483648", "-1e9"}) {
    nlohmann::json d = doc;
    for (auto& e : d["traceEvents"]) {
      for (const char* key : {"pid", "tid"})
        if (e.contains(key)) e[key] = "__n__";
      if (e.contains("args") && e["args"].is_object())
        for (const char* key : {"flow_id", "version"})
          if (e["args"].contains(key)) e["args"][key] = "__n__";
    }
    std::string text = d.dump();
    for (auto at = text.find("\"__n__\""); at != std::string::npos; at = text.find("\"__n__\"", at))
      text.replace(at, 7, negative);
    run("negative ids", text, negative);
  }
  for (const auto& [kind, counts] : tally) {
    INFO(kind << ": " << counts[0] << " read, " << counts[1] << " refused");
    CHECK(counts[0] + counts[1] > 0);
  }
  // Each kind of damage is met: flipped bytes and hostile values are refused by the reader at
  // least sometimes; some harmless ones (a flipped digit of a time) still read.
  CHECK(tally["bytes flipped"][0] > 0);
  CHECK(tally["bytes flipped"][1] > 0);
  CHECK(tally["hostile number"][1] > 0);
  CHECK(tally["field removed"][1] > 0);
  CHECK(tally["negative ids"][1] == 4);
}
