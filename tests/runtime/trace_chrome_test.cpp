// Tests for the Chrome trace writer: the JSON parses back with named processes and threads, one
// complete event per action with its args, and a flow pair per matched SEND/RECV.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/trace_chrome.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using nlohmann::json;

namespace {

timeline_event ev(int rank, stream_kind s, action a, double start, double end, int version = -1,
                  std::int64_t flow = -1) {
  return timeline_event{rank, s, a, start, end, version, flow};
}

// Two stages, one microbatch: F on 0, activation to 1, F and B on 1, gradient back, B on 0.
// Flow 9 has a SEND but no RECV, so it must not be drawn.
timeline two_stage_timeline() {
  using k = action_kind;
  timeline t;
  t.title = "hand-built p=2 m=1";
  t.ranks = 2;
  t.devices_per_replica = 2;
  t.events = {
      ev(0, stream_kind::compute, {0, k::forward, 0}, 0.0, 1.0, 0),
      ev(0, stream_kind::send, {0, k::send_f, 0}, 1.0, 1.5, -1, 7),
      ev(1, stream_kind::recv, {1, k::recv_f, 0}, 1.0, 1.5, -1, 7),
      ev(1, stream_kind::compute, {1, k::forward, 0}, 1.5, 2.5, 0),
      ev(1, stream_kind::compute, {1, k::backward, 0}, 2.5, 4.5, 0),
      ev(1, stream_kind::send, {1, k::send_b, 0}, 4.5, 5.0, -1, 8),
      ev(0, stream_kind::recv, {0, k::recv_b, 0}, 4.5, 5.0, -1, 8),
      ev(0, stream_kind::compute, {0, k::backward, 0}, 5.0, 7.0, 0),
      ev(0, stream_kind::send, {0, k::send_f, 1}, 7.0, 7.5, -1, 9),
      ev(0, stream_kind::compute, {0, k::step, -1}, 7.0, 7.25),
  };
  return t;
}

}  // namespace

TEST_CASE("chrome trace names a process per rank and a thread per stream", "[runtime]") {
  const json doc = json::parse(to_chrome_trace(two_stage_timeline()));
  REQUIRE(doc.contains("traceEvents"));
  CHECK(doc["otherData"]["title"] == "hand-built p=2 m=1");
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  CHECK(processes == std::map<int, std::string>{{0, "rank 0 (replica 0, device 0)"},
                                                {1, "rank 1 (replica 0, device 1)"}});
  for (int r = 0; r < 2; ++r) {
    CHECK(threads[{r, 0}] == "compute");
    CHECK(threads[{r, 1}] == "send");
    CHECK(threads[{r, 2}] == "recv");
  }
}

TEST_CASE("chrome trace has one complete event per action with its args", "[runtime]") {
  const timeline t = two_stage_timeline();
  const json doc = json::parse(to_chrome_trace(t));
  std::map<int, int> per_rank;
  json forward_on_1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    per_rank[e["pid"]]++;
    REQUIRE(e["args"].contains("microbatch"));
    REQUIRE(e["args"].contains("stage"));
    REQUIRE(e["args"].contains("version"));
    REQUIRE(e["args"].contains("kind"));
    if (e["name"] == "1F0") forward_on_1 = e;
  }
  CHECK(per_rank[0] == 6);
  CHECK(per_rank[1] == 4);
  REQUIRE(forward_on_1.is_object());
  CHECK(forward_on_1["tid"] == 0);
  CHECK(forward_on_1["ts"].get<double>() == Approx(1.5e6));
  CHECK(forward_on_1["dur"].get<double>() == Approx(1.0e6));
  CHECK(forward_on_1["args"]["microbatch"] == 0);
  CHECK(forward_on_1["args"]["stage"] == 1);
  CHECK(forward_on_1["args"]["version"] == 0);
  CHECK(forward_on_1["args"]["kind"] == "F");
}

TEST_CASE("chrome trace joins each SEND to its RECV with a flow", "[runtime]") {
  const json doc = json::parse(to_chrome_trace(two_stage_timeline()));
  std::map<std::int64_t, json> starts, finishes;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"]] = e;
    if (e["ph"] == "f") finishes[e["id"]] = e;
  }
  CHECK(starts.size() == 2);
  CHECK(finishes.size() == 2);
  CHECK(starts.count(9) == 0);  // a SEND without a RECV draws no arrow
  // Activation: from rank 0's send stream to rank 1's recv stream.
  CHECK(starts[7]["pid"] == 0);
  CHECK(starts[7]["tid"] == 1);
  CHECK(finishes[7]["pid"] == 1);
  CHECK(finishes[7]["tid"] == 2);
  CHECK(finishes[7]["bp"] == "e");
  CHECK(starts[7]["name"] == finishes[7]["name"]);
  CHECK(starts[7]["cat"] == finishes[7]["cat"]);
  // Gradient: back from rank 1 to rank 0.
  CHECK(starts[8]["pid"] == 1);
  CHECK(finishes[8]["pid"] == 0);
}

TEST_CASE("write_chrome_trace writes the file whole, or says why not", "[runtime]") {
  const timeline t = two_stage_timeline();
  const test::scratch_dir scratch("pipeworks-trace-chrome-test");
  const std::filesystem::path& dir = scratch.path();
  const std::string path = (dir / "trace.json").string();
  REQUIRE(write_chrome_trace(t, path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == to_chrome_trace(t) + "\n");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);

  const status bad = write_chrome_trace(t, (dir / "no" / "such" / "dir" / "t.json").string());
  CHECK_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("t.json"));
}

TEST_CASE("chrome trace spreads overlapping sends over extra threads", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 2;
  t.devices_per_replica = 2;
  t.events = {
      ev(0, stream_kind::send, {0, k::send_f, 0}, 0.0, 2.0, -1, 1),
      ev(0, stream_kind::send, {0, k::send_f, 1}, 1.0, 3.0, -1, 2),  // overlaps the first
      ev(0, stream_kind::send, {0, k::send_f, 2}, 3.0, 4.0, -1, 3),  // first lane is free again
      ev(1, stream_kind::recv, {1, k::recv_f, 0}, 0.0, 2.0, -1, 1),
      ev(1, stream_kind::recv, {1, k::recv_f, 1}, 1.0, 3.0, -1, 2),
      ev(1, stream_kind::recv, {1, k::recv_f, 2}, 3.0, 4.0, -1, 3),
  };
  const json doc = json::parse(to_chrome_trace(t));
  std::map<std::string, int> tid_of;
  std::map<std::int64_t, int> flow_start_tid;
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") tid_of[e["name"]] = e["tid"];
    if (e["ph"] == "s") flow_start_tid[e["id"]] = e["tid"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  CHECK(tid_of["0SEND_F0"] == 1);
  CHECK(tid_of["0SEND_F1"] == 4);
  CHECK(tid_of["0SEND_F2"] == 1);
  CHECK(tid_of["1RECV_F1"] == 5);
  CHECK(flow_start_tid[2] == 4);
  CHECK(threads[{0, 4}] == "send (2)");
  CHECK(threads[{1, 5}] == "recv (2)");
  CHECK(threads.count({0, 5}) == 0);  // no second recv lane where nothing overlaps
}

TEST_CASE("chrome trace ignores rounding noise when it looks for overlaps", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 1;
  t.events = {ev(0, stream_kind::compute, {0, k::backward, 0}, 30.0, 32.0, 0),
              ev(0, stream_kind::compute, {0, k::reduce, -1}, 31.999999999999996, 32.3)};
  const json doc = json::parse(to_chrome_trace(t));
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") CHECK(e["tid"] == 0);
}
