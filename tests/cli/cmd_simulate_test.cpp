// End-to-end tests of `pipeworks simulate` (cli/cmd_simulate.cpp): JSON against the closed forms,
// the Chrome trace, SVG and text timelines it writes, and its errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// Equal within 1e-9 absolute, with no relative slack (Approx alone allows ~1.2e-5 relative).
Approx exactly(double x) { return Approx(x).epsilon(0).margin(1e-9); }

// Runs simulate with --json and returns the parsed object; fails the test if it does not run or
// parse.
json simulate_json(const std::vector<std::string>& args) {
  auto with_json = args;
  with_json.push_back("--json");
  const cli_result r = run_cli(with_json);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

}  // namespace

TEST_CASE("simulate --json has makespan, bubble_fraction and one entry per stage with its keys",
          "[cli]") {
  const json j = simulate_json(simulate_args("1f1b", 3, 5));
  REQUIRE(j.is_object());
  CHECK(j.at("makespan").is_number());
  CHECK(j.at("bubble_fraction").is_number());
  REQUIRE(j.at("stages").is_array());
  CHECK(j["stages"].size() == 3);
  for (const auto& s : j["stages"])
    for (const char* key : {"busy", "peak_inflight", "peak_versions", "peak_activation_bytes"}) {
      INFO(key);
      CHECK(s.at(key).is_number());
    }
}

TEST_CASE("simulate --json reproduces the GPipe and 1F1B closed form (m + p - 1)(F + B)", "[cli]") {
  for (const std::string kind : {"gpipe", "1f1b"}) {
    for (auto [p, m] : {std::pair{4, 8}, {2, 3}, {1, 5}, {5, 2}}) {
      const double f = 1.0, b = 2.0;
      const json j = simulate_json(simulate_args(kind, p, m, {"--fwd", "1", "--bwd", "2"}));
      INFO(kind << " p=" << p << " m=" << m);
      const double makespan = (m + p - 1) * (f + b);
      CHECK(j["makespan"].get<double>() == exactly(makespan));
      CHECK(j["bubble_fraction"].get<double>() == exactly(1.0 - m * (f + b) / makespan));
      REQUIRE(j["stages"].size() == static_cast<std::size_t>(p));
      for (int s = 0; s < p; ++s) {
        INFO("stage " << s);
        CHECK(j["stages"][s]["busy"].get<double>() == exactly(m * (f + b)));
        CHECK(j["stages"][s]["peak_inflight"].get<int>() ==
              (kind == "gpipe" ? m : std::min(p - s, m)));
        CHECK(j["stages"][s]["peak_versions"].get<int>() == 1);
      }
    }
  }
}

TEST_CASE("simulate --json reproduces the interleaved closed form", "[cli]") {
  // --fwd/--bwd are per virtual stage, so a device's F and B are v times those; the closed form
  // m(F + B) + (p - 1)(F + B)/v is in device times.
  const int p = 4, m = 8, v = 2;
  const double f = v * 1.0, b = v * 2.0;
  const json j = simulate_json(
      simulate_args("interleaved", p, m, {"--chunks", "2", "--fwd", "1", "--bwd", "2"}));
  CHECK(j["makespan"].get<double>() == exactly(m * (f + b) + (p - 1) * (f + b) / v));
  CHECK(j["stages"].size() == static_cast<std::size_t>(p));
}

TEST_CASE("simulate --wgrad sets W and I = B - W: ZB-H1 bubble is (p - 1)(F + I - W)", "[cli]") {
  const int p = 4, m = 8;
  const double f = 1, b = 3, w = 1, i = b - w;
  const json j =
      simulate_json(simulate_args("zb-h1", p, m, {"--fwd", "1", "--bwd", "3", "--wgrad", "1"}));
  CHECK(j["makespan"].get<double>() == exactly(m * (f + b) + (p - 1) * (f + i - w)));
}

TEST_CASE("simulate --trace writes Chrome trace-event JSON with compute events and send/recv flows",
          "[cli]") {
  scratch_dir dir;
  const std::string trace = dir / "out.json";
  const cli_result r = run_cli(simulate_args("1f1b", 2, 3, {"--trace", trace}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(read_file(trace), nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  const json& events = j.is_array() ? j : j.at("traceEvents");
  REQUIRE(events.is_array());
  int complete = 0, flow_start = 0, flow_end = 0;
  std::set<int> pids;
  for (const auto& e : events) {
    REQUIRE(e.contains("ph"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      CHECK(e.at("ts").is_number());
      CHECK(e.at("dur").is_number());
      pids.insert(e.at("pid").get<int>());
      CHECK(e.at("args").contains("microbatch"));
    }
    flow_start += ph == "s";
    flow_end += ph == "f";
  }
  CHECK(complete >=
        2 * 2 * 3);  // an F and a B per microbatch on each stage, besides sends, receives, steps
  CHECK(pids == std::set<int>{0, 1});
  CHECK(flow_start > 0);
  CHECK(flow_start == flow_end);
}

TEST_CASE("simulate --svg writes an SVG document", "[cli]") {
  scratch_dir dir;
  const std::string svg = dir / "out.svg";
  const cli_result r = run_cli(simulate_args("gpipe", 2, 2, {"--svg", svg}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string text = read_file(svg);
  CHECK(contains(text, "<svg"));
  CHECK(contains(text, "</svg>"));
  CHECK(contains(text, "<rect"));
}

TEST_CASE("simulate --svg into a missing folder fails and names the path", "[cli]") {
  const cli_result r =
      run_cli(simulate_args("gpipe", 2, 2, {"--svg", "/nonexistent-pipeworks-dir/out.svg"}));
  CHECK(r.exit_code != 0);
  CHECK(contains(r.err, "/nonexistent-pipeworks-dir/out.svg"));
}

TEST_CASE(
    "simulate --text prints one timeline row per stage; with --json it keeps stdout pure JSON",
    "[cli]") {
  const cli_result r = run_cli(simulate_args("1f1b", 2, 2, {"--text"}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  int rows = 0;
  for (const auto& line : nonempty_lines(r.out))
    rows += line.rfind("rank ", 0) == 0 && contains(line, "|");
  CHECK(rows == 2);

  const cli_result both = run_cli(simulate_args("1f1b", 2, 2, {"--text", "--json"}));
  REQUIRE(both.exit_code == 0);
  CHECK_FALSE(json::parse(both.out, nullptr, false).is_discarded());
}

TEST_CASE("simulate: bad values exit 2 with a message naming the flag", "[cli]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {simulate_args("1f1b", 0, 2), "--stages"},
      {simulate_args("1f1b", 2, 0), "--microbatches"},
      {simulate_args("1f1b", 2, 2, {"--fwd", "abc"}), "--fwd"},
      {simulate_args("1f1b", 2, 2, {"--fwd", "-1"}), "--fwd"},
      {simulate_args("zb-h1", 2, 2, {"--bwd", "2", "--wgrad", "3"}), "--wgrad"},
      {simulate_args("nope", 2, 2), "--schedule"},
  };
  for (const auto& [args, flag] : cases) {
    const cli_result r = run_cli(args);
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag));
  }
}

TEST_CASE("simulate: an impossible schedule says what would work", "[cli]") {
  const cli_result interleaved = run_cli(simulate_args("interleaved", 4, 6, {"--chunks", "2"}));
  INFO(interleaved.err);
  CHECK(interleaved.exit_code != 0);
  CHECK(contains(interleaved.err, "m = 4"));
  CHECK(contains(interleaved.err, "m = 8"));

  const cli_result two_bw = run_cli(simulate_args("2bw", 4, 2));
  INFO(two_bw.err);
  CHECK(two_bw.exit_code != 0);
  CHECK(contains(two_bw.err, "m >= 4"));
}

TEST_CASE("simulate --costs with a missing file names the path", "[cli]") {
  const cli_result r =
      run_cli(simulate_args("1f1b", 2, 2, {"--costs", "/nonexistent-pipeworks-costs.json"}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "/nonexistent-pipeworks-costs.json"));
}

TEST_CASE("simulate --costs reads per-stage times and activation bytes", "[cli]") {
  // GPipe p=2 m=4, stage 0 F=1 B=2, stage 1 F=2 B=4: stage 1's forwards end at 9, its four
  // backwards at 25, and stage 0's last backward at 27. GPipe stashes all 4 microbatches.
  scratch_dir dir;
  write_file(dir / "costs.json",
             R"({"stages": [{"forward": 1, "backward": 2, "activation_bytes": 100},
                            {"forward": 2, "backward": 4, "activation_bytes": 50}]})");
  const json j = simulate_json(simulate_args("gpipe", 2, 4, {"--costs", dir / "costs.json"}));
  CHECK(j["makespan"].get<double>() == exactly(27));
  CHECK(j["stages"][0]["busy"].get<double>() == exactly(12));
  CHECK(j["stages"][1]["busy"].get<double>() == exactly(24));
  CHECK(j["stages"][0]["peak_activation_bytes"].get<double>() == 400);
  CHECK(j["stages"][1]["peak_activation_bytes"].get<double>() == 200);
}

TEST_CASE("simulate: running out of device memory fails and names the stage", "[cli]") {
  scratch_dir dir;
  write_file(dir / "costs.json",
             R"({"stages": [{"forward": 1, "backward": 2, "activation_bytes": 100}],
                 "devices": [{"speed": 1, "memory": 250}, {"speed": 1, "memory": 1e9}]})");
  const cli_result gpipe =
      run_cli(simulate_args("gpipe", 2, 4, {"--costs", dir / "costs.json", "--json"}));
  INFO(gpipe.err);
  CHECK(gpipe.exit_code != 0);
  CHECK(contains(gpipe.err, "stage 0"));
  CHECK(contains(gpipe.err, "memory"));
  // 1F1B keeps at most p - s = 2 microbatches on stage 0: 200 B fits.
  const cli_result one_f_one_b =
      run_cli(simulate_args("1f1b", 2, 4, {"--costs", dir / "costs.json"}));
  CHECK(one_f_one_b.exit_code == 0);
}

TEST_CASE("simulate --costs: invalid JSON or a wrong stage count exits 2 naming --costs", "[cli]") {
  scratch_dir dir;
  write_file(dir / "bad.json", R"({"stages": [)");
  write_file(dir / "two.json",
             R"({"stages": [{"forward": 1, "backward": 2}, {"forward": 1, "backward": 2}]})");
  for (const std::string file : {"bad.json", "two.json"}) {
    const cli_result r = run_cli(simulate_args("gpipe", 3, 4, {"--costs", dir / file}));
    INFO(file << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--costs"));
  }
}
