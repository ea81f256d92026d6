// read_chrome_trace and parse_chrome_trace (runtime/trace_chrome_read.hpp): a trace that
// to_chrome_trace wrote reads back as its timeline; other JSON, cut or huge files are refused.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

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

TEST_CASE("parse_chrome_trace refuses another tool's trace, a cut one and broken events",
          "[runtime][trace]") {
  CHECK(refused(R"({"traceEvents":[{"ph":"X","name":"matmul","pid":0,"tid":0,"ts":0,"dur":1}]})")
            .find("t.json is not a pipeworks trace") != std::string::npos);
  CHECK(refused(R"([1, 2])").find("is not a Chrome trace") != std::string::npos);
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
