// The explorer's data (runtime/explorer.hpp) against the simulator: actions per rank, versions,
// peak stashed microbatches and live versions per rank, bubble; waits name their senders; the page
// embeds the JSON so that it reads back; a measured timeline gives the same state.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/explorer.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"

using namespace pipeworks;
using nlohmann::json;

namespace {

schedule lowered_schedule(schedule_kind kind, schedule_params params) {
  params.chunks = default_chunks(kind);
  auto made = make_schedule(kind, params);
  INFO((made.ok() ? std::string() : made.message()));
  REQUIRE(made.ok());
  schedule s = lower_communication(std::move(*made));
  REQUIRE(validate(s).ok());
  return s;
}

json page_data(const schedule& s, const cost_model& costs, const simulation& sim) {
  auto text = explorer_json(s, costs, sim);
  INFO((text.ok() ? std::string() : text.message()));
  REQUIRE(text.ok());
  return json::parse(*text);
}

// Every check a page's numbers must pass against its simulation.
void check_against_simulator(const schedule& s, const simulation& sim, const json& d) {
  CHECK(d["format"] == "pipeworks-explorer");
  CHECK(d["source"] == "simulated");
  CHECK(d["bubble_fraction"].get<double>() == sim.bubble_fraction);
  CHECK(d["makespan"].get<double>() == sim.makespan);
  CHECK(d["version_rule"] == s.version_rule);
  REQUIRE(d["ranks"].size() == static_cast<std::size_t>(s.ranks()));
  REQUIRE(d["actions"].size() == sim.trace.events.size());
  for (int r = 0; r < s.ranks(); ++r) {
    INFO("rank " << r);
    const json& x = d["ranks"][r];
    std::size_t runs = 0;  // OVERLAP_F_B marks a pair; it is not an action of its own
    for (const action& a : s.programs[r]) runs += a.kind != action_kind::overlap_f_b;
    CHECK(x["actions"].get<std::size_t>() == runs);
    CHECK(x["peak_stashed"].get<int>() == sim.ranks[r].peak_inflight);
    CHECK(x["peak_live_versions"].get<int>() == sim.ranks[r].peak_versions);
    CHECK(x["peak_bytes"].get<std::int64_t>() == sim.ranks[r].peak_memory_bytes);
  }
  for (const json& a : d["actions"]) {
    const int v = a["version"];
    if (v < 0) continue;
    const version_use& use = s.versions[a["stage"].get<int>()][a["microbatch"].get<int>()];
    const std::string kind = a["kind"];
    INFO(a["text"] << " on rank " << a["rank"]);
    CHECK(v == (kind == "F" ? use.forward : use.backward));
    CHECK(a["rule"].get<std::string>().find(s.version_rule) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("explorer data agrees with the simulator for every schedule at p 4 m 8 over 2 steps",
          "[runtime][explorer]") {
  for (schedule_kind kind : every_schedule_kind()) {
    INFO(schedule_name(kind));
    const schedule s = lowered_schedule(kind, {4, 8, 1, 1, 2});
    const cost_model costs;
    auto sim = simulate(s, costs);
    REQUIRE(sim.ok());
    check_against_simulator(s, *sim, page_data(s, costs, *sim));
  }
}

TEST_CASE("explorer data agrees with the simulator with replicas and bytes held", "[runtime][explorer]") {
  for (schedule_kind kind : {schedule_kind::one_f_one_b, schedule_kind::pipedream,
                             schedule_kind::two_bw, schedule_kind::zb_h1}) {
    INFO(schedule_name(kind));
    const schedule s = lowered_schedule(kind, {3, 6, 1, 2, 2});
    cost_model costs;
    costs.stages[0].activation_bytes = 1000;
    costs.stages[0].param_bytes = 7;
    costs.link.latency = 0.25;
    auto sim = simulate(s, costs);
    REQUIRE(sim.ok());
    check_against_simulator(s, *sim, page_data(s, costs, *sim));
  }
}

TEST_CASE("explorer says what each RECV and each forward waited for and what each SEND sent",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {4, 8, 1, 1, 1});
  const cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  const json d = page_data(s, costs, *sim);
  int recvs = 0, sends = 0;
  for (const json& a : d["actions"]) {
    INFO(a["text"] << " on rank " << a["rank"]);
    const std::string kind = a["kind"];
    if (kind == "RECV_F" || kind == "RECV_B") {
      ++recvs;
      const int from = a["waited"]["action"];
      REQUIRE(from >= 0);
      const json& send = d["actions"][from];
      CHECK(send["kind"] == (kind == "RECV_F" ? "SEND_F" : "SEND_B"));
      CHECK(send["microbatch"] == a["microbatch"]);
      CHECK(a["waited"]["rank"] == send["rank"]);
      CHECK(send["end"].get<double>() <= a["end"].get<double>());
    }
    if (kind == "SEND_F" || kind == "SEND_B") {
      ++sends;
      REQUIRE(a["sent"].is_object());
      const int to = a["sent"]["action"];
      CHECK(d["actions"][to]["waited"]["action"] == a["id"]);
    }
    if (kind == "F" && a["stage"] == 0) CHECK(a["waited"]["text"] == "the driver's input for microbatch " + std::to_string(a["microbatch"].get<int>()));
    if (kind == "F" && a["stage"] != 0) CHECK(d["actions"][a["waited"]["action"].get<int>()]["kind"] == "RECV_F");
  }
  CHECK(recvs == 2 * 3 * 8);
  CHECK(sends == recvs);
}

TEST_CASE("explorer state steps through time: stashed microbatches rise and fall to none",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::gpipe, {2, 3, 1, 1, 1});
  const cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  const json d = page_data(s, costs, *sim);
  const json& states = d["states"];
  REQUIRE(states.size() >= 2);
  double last = -1;
  for (const json& st : states) {
    CHECK(st["time"].get<double>() > last);
    last = st["time"];
  }
  // Each state is what holds after the changes at its time: at 0, stage 0's F0 has begun.
  CHECK(states.front()["time"].get<double>() == 0.0);
  CHECK(states.front()["ranks"][0]["stashed"].size() == 1);
  CHECK(states.front()["ranks"][1]["stashed"].empty());
  CHECK(states.back()["ranks"][0]["stashed"].empty());
  CHECK(states.back()["ranks"][1]["stashed"].empty());
  // GPipe holds every microbatch on stage 0 once its forwards are done: at time 3 (F = 1).
  bool all_three = false;
  for (const json& st : states) all_three = all_three || st["ranks"][0]["stashed"].size() == 3;
  CHECK(all_three);
}

TEST_CASE("explorer page embeds its data so that it reads back, a closing script tag escaped",
          "[runtime][explorer]") {
  const std::string data = R"({"title":"a </script><script>alert(1)</script> b","n":[1,2]})";
  const std::string page = explorer_html(data);
  CHECK(page.find("</script><script>alert") == std::string::npos);
  CHECK(page.find("__PIPEWORKS_EXPLORER_DATA__") == std::string::npos);
  auto back = explorer_data_of(page);
  REQUIRE(back.ok());
  CHECK(json::parse(*back) == json::parse(data));
  // Offline: no external script, style sheet or image.
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("<link") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK_FALSE(explorer_data_of("<html></html>").ok());
}

TEST_CASE("explorer data of a measured timeline finds the same stashes and waits",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {4, 8, 1, 1, 1});
  const cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  auto text = explorer_json(sim->trace);
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  CHECK(d["source"] == "measured");
  CHECK(d["bubble_fraction"].get<double>() == Approx(sim->bubble_fraction));
  REQUIRE(d["ranks"].size() == 4);
  for (int r = 0; r < 4; ++r) CHECK(d["ranks"][r]["peak_stashed"] == sim->ranks[r].peak_inflight);
  for (const json& a : d["actions"])
    if (a["kind"] == "RECV_F") CHECK(a["waited"]["rank"] == a["rank"].get<int>() - 1);
}

TEST_CASE("explorer refuses a schedule with more actions than a page holds", "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {4, 1024, 1, 1, 1});
  cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  REQUIRE(static_cast<std::int64_t>(sim->trace.events.size()) > max_explorer_actions);
  auto text = explorer_json(s, costs, *sim);
  REQUIRE_FALSE(text.ok());
  CHECK(text.message().find("more than one page shows") != std::string::npos);
}

TEST_CASE("explorer critical path runs from time 0 to the makespan with no gap for every schedule",
          "[runtime][explorer]") {
  // With free communication every action starts when what it followed ends, so the path is
  // contiguous: each action starts as the one before it on the path ends, or is a RECV that
  // waited and ends as its SEND does.
  for (schedule_kind kind : every_schedule_kind()) {
    INFO(schedule_name(kind));
    const schedule s = lowered_schedule(kind, {4, 8, 1, 1, 2});
    const cost_model costs;
    auto sim = simulate(s, costs);
    REQUIRE(sim.ok());
    const json d = page_data(s, costs, *sim);
    const json& path = d["critical_path"];
    REQUIRE(path.size() >= 2);
    const json& actions = d["actions"];
    CHECK(actions[path.front().get<int>()]["start"].get<double>() == Approx(0.0).margin(1e-9));
    CHECK(actions[path.back().get<int>()]["end"].get<double>() == Approx(sim->makespan).margin(1e-9));
    for (std::size_t i = 1; i < path.size(); ++i) {
      const json& before = actions[path[i - 1].get<int>()];
      const json& after = actions[path[i].get<int>()];
      INFO(before["text"] << " then " << after["text"]);
      const bool waited = after["stream"] == "recv" && after["end"] > after["start"];
      if (waited) CHECK(after["waited"]["action"] == path[i - 1]);
      CHECK(after[waited ? "end" : "start"].get<double>() ==
            Approx(before["end"].get<double>()).margin(1e-9));
    }
  }
}

TEST_CASE("explorer compare data holds both schedules, each as the simulator gives it",
          "[runtime][explorer]") {
  const schedule a = lowered_schedule(schedule_kind::one_f_one_b, {4, 8, 1, 1, 2});
  const schedule b = lowered_schedule(schedule_kind::two_bw, {4, 8, 1, 1, 2});
  const cost_model costs;
  auto sim_a = simulate(a, costs);
  auto sim_b = simulate(b, costs);
  REQUIRE(sim_a.ok());
  REQUIRE(sim_b.ok());
  auto both = explorer_compare_json(explorer_json(a, costs, *sim_a).value(),
                                    explorer_json(b, costs, *sim_b).value());
  REQUIRE(both.ok());
  const json d = json::parse(*both);
  check_against_simulator(a, *sim_a, d);
  REQUIRE(d.contains("compare"));
  check_against_simulator(b, *sim_b, d["compare"]);
  CHECK_FALSE(explorer_compare_json("{", "{}").ok());
}

TEST_CASE("explorer refuses a schedule of many ranks whose states would pass the cell limit and cuts such a trace",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {300, 1, 1, 1, 1});
  const cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  const auto n = static_cast<std::int64_t>(sim->trace.events.size());
  REQUIRE(n <= max_explorer_actions);
  REQUIRE(n * s.ranks() > max_explorer_cells);
  auto page = explorer_json(s, costs, *sim);
  REQUIRE_FALSE(page.ok());
  CHECK(page.message().find("on 300 ranks") != std::string::npos);
  auto trace = explorer_json(sim->trace);
  REQUIRE(trace.ok());
  const json d = json::parse(*trace);
  CHECK(d["actions"].size() == static_cast<std::size_t>(max_explorer_cells / 300));
  CHECK(d["note"].get<std::string>().find("this page shows the first 833") != std::string::npos);
}
