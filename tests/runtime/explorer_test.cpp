// The explorer's data (runtime/explorer.hpp) against the simulator: actions per rank, versions,
// peak stashed microbatches and live versions per rank, bubble; waits name their senders; the page
// embeds the JSON so that it reads back; a measured timeline gives the same state, and a window of
// its steps the same state as the whole trace at the window's first moment.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/explorer.hpp"
#include "runtime/trace_chrome_read.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"
#include "tests/explorer_states.hpp"

using namespace pipeworks;
using nlohmann::json;
using pipeworks::test::full_states;

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
    CHECK(x["peak_stash_bytes"].get<std::int64_t>() == sim.ranks[r].peak_activation_bytes);
  }
  CHECK(d["bytes"] == "from the cost model");
  // The states as the page rebuilds them from their deltas hold the simulator's peaks, and
  // every later state stores only ranks that changed.
  const json states = full_states(d);
  for (int r = 0; r < s.ranks(); ++r) {
    INFO("rank " << r << " in the rebuilt states");
    std::size_t stashed = 0, versions = 1;
    for (const json& st : states) {
      stashed = std::max(stashed, st["ranks"][r]["stashed"].size());
      for (const auto& [stage, vs] : st["ranks"][r]["versions"].items()) versions = std::max(versions, vs.size());
    }
    CHECK(static_cast<int>(stashed) == sim.ranks[r].peak_inflight);
    CHECK(static_cast<int>(versions) == sim.ranks[r].peak_versions);
  }
  for (std::size_t k = 1; k < d["states"].size(); ++k)
    for (const auto& [r, state] : d["states"][k]["changed"].items())
      CHECK(state != states[k - 1]["ranks"][std::stoi(r)]);
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

// Cyclic's p2p reduce: a REDUCE waits for the previous replica's partial sum (replica 0's for
// nothing), and a STEP of a replica but the last for the last one's new version.
TEST_CASE("explorer says what the p2p reduce's REDUCEs and STEPs waited for", "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::cyclic, {2, 4, 1, 3, 2, reduce_mode::p2p});
  const cost_model costs;
  auto sim = simulate(s, costs);
  REQUIRE(sim.ok());
  check_against_simulator(s, *sim, page_data(s, costs, *sim));
  const json d = page_data(s, costs, *sim);
  int reduces = 0, steps = 0;
  for (const json& a : d["actions"]) {
    INFO(a["text"] << " on rank " << a["rank"]);
    const int replica = a["rank"].get<int>() / 2;
    const std::string text = a["waited"]["text"];
    if (a["kind"] == "REDUCE") {
      ++reduces;
      if (replica == 0) CHECK(text.find("starts the chain") != std::string::npos);
      else CHECK(text.find("partial sum of replica " + std::to_string(replica - 1)) != std::string::npos);
    }
    if (a["kind"] == "STEP" && replica < 2) {
      ++steps;
      CHECK(text.find("from the last replica's STEP") != std::string::npos);
    }
  }
  CHECK(reduces == 3 * 2 * 2);  // replicas x devices x steps
  CHECK(steps == 2 * 2 * 2);
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
  const json states = full_states(d);
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

// A measured timeline whose run recorded bytes (as train --trace's does): each F the bytes it
// stashed, each B or I its stash's while it ran, each W what its I left, each STEP its version's.
// At every moment a rank's stashed bytes are its stashed microbatches' (the W's once their I has
// ended), and its bytes add each live version at its stage's size.
TEST_CASE("explorer data of a measured timeline holds the bytes its run recorded",
          "[runtime][explorer]") {
  for (schedule_kind kind : {schedule_kind::one_f_one_b, schedule_kind::pipedream,
                             schedule_kind::zb_h1}) {
    INFO(schedule_name(kind));
    const schedule s = lowered_schedule(kind, {3, 4, 1, 1, 2});
    auto sim = simulate(s, cost_model{});
    REQUIRE(sim.ok());
    timeline t = sim->trace;
    const auto f_bytes = [](const action& a) { return 1000 * (a.stage + 1) + a.microbatch; };
    const auto w_bytes = [](const action& a) { return 10 * (a.stage + 1) + a.microbatch; };
    std::map<std::tuple<int, int, int>, double> i_end;  // (rank, stage, mb) -> its I's end
    for (timeline_event& e : t.events) {
      const action_kind k = e.act.kind;
      if (k == action_kind::forward || k == action_kind::backward || k == action_kind::input_grad)
        e.bytes = f_bytes(e.act);
      if (k == action_kind::weight_grad) e.bytes = w_bytes(e.act);
      if (k == action_kind::step) e.bytes = 7 * (e.act.stage + 1);
      if (k == action_kind::input_grad) i_end[{e.rank, int{e.act.stage}, e.act.microbatch}] = e.end;
    }
    if (kind == schedule_kind::zb_h1) REQUIRE_FALSE(i_end.empty());
    const json d = json::parse(explorer_json(t).value());
    CHECK(d["bytes"] == "as the run recorded them");
    std::vector<std::int64_t> peak(3, 0);
    for (const json& st : full_states(d)) {
      for (int r = 0; r < 3; ++r) {
        INFO("rank " << r << " at t = " << st["time"]);
        const json& x = st["ranks"][r];
        std::int64_t stashed = 0, versions = 0;
        for (const json& h : x["stashed"]) {
          const action a{h["stage"].get<int>(), action_kind::forward, h["microbatch"].get<int>()};
          const auto it = i_end.find({r, a.stage, a.microbatch});
          const bool halved = it != i_end.end() && it->second <= st["time"].get<double>();
          stashed += halved ? w_bytes(a) : f_bytes(a);
        }
        for (const auto& [stage, live] : x["versions"].items())
          versions += 7 * (std::stoi(stage) + 1) * static_cast<std::int64_t>(live.size());
        CHECK(x["stash_bytes"].get<std::int64_t>() == stashed);
        CHECK(x["bytes"].get<std::int64_t>() == stashed + versions);
        peak[r] = std::max(peak[r], stashed);
      }
    }
    for (int r = 0; r < 3; ++r) CHECK(d["ranks"][r]["peak_stash_bytes"] == peak[r]);
  }
}

// A trace without bytes (an older one, or a simulated one read back) says they are unknown; one
// whose Fs recorded their stashes but no STEP its version knows the stashes only.
TEST_CASE("explorer data of a measured timeline without bytes says they are unknown",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {2, 3, 1, 1, 1});
  auto sim = simulate(s, cost_model{});
  REQUIRE(sim.ok());
  const json none = json::parse(explorer_json(sim->trace).value());
  CHECK(none["bytes"] == "unknown: the trace records no sizes");
  for (const json& st : full_states(none))
    for (const json& x : st["ranks"]) {
      CHECK(x["bytes"].is_null());
      CHECK(x["stash_bytes"].is_null());
    }
  for (const json& x : none["ranks"]) CHECK(x["peak_bytes"].is_null());
  timeline t = sim->trace;
  for (timeline_event& e : t.events)
    if (e.act.kind == action_kind::forward) e.bytes = 5;
  const json stashes = json::parse(explorer_json(t).value());
  CHECK(stashes["bytes"] == "stashes as the run recorded them; versions unknown");
  CHECK(stashes["ranks"][0]["peak_stash_bytes"] == 10);  // 1F1B at p = 2: two on stage 0
  CHECK(stashes["ranks"][0]["peak_bytes"].is_null());
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

namespace {

// A page's state of every rank at one moment, each waiting RECV named by its text and rank (its
// id is the page's own).
json comparable_state(const json& page, const json& state) {
  json ranks = state["ranks"];
  for (json& r : ranks) {
    json named = json::array();
    for (const json& id : r["waiting"]) {
      const json& a = page["actions"][id.get<int>()];
      named.push_back(a["text"].get<std::string>() + " on rank " + std::to_string(a["rank"].get<int>()));
    }
    r["waiting"] = std::move(named);
  }
  return ranks;
}

// The step of each of a page's actions (by id), counted here from its STEPs: on each rank, a
// stage's actions belong to the step that its next STEP ends.
std::vector<int> page_steps(const json& page) {
  std::vector<int> step;
  std::map<std::pair<int, int>, int> done;
  for (const json& a : page["actions"]) {  // ids are in start order, ties in the timeline's
    int& n = done[{a["rank"].get<int>(), a["stage"].get<int>()}];
    step.push_back(n + 1);
    if (a["kind"] == "STEP") ++n;
  }
  return step;
}

std::tuple<int, std::string, double, double> action_key(const json& a) {
  return {a["rank"].get<int>(), a["text"].get<std::string>(), a["start"].get<double>(),
          a["end"].get<double>()};
}

}  // namespace

TEST_CASE("explorer window of steps 2 to 3 starts from the whole trace's state and shows that slice",
          "[runtime][explorer]") {
  // Without bytes, and with bytes recorded as a real run records them (each stash's and each
  // version's), which the window's first state must carry over too.
  for (const bool recorded : {false, true})
  for (schedule_kind kind : {schedule_kind::pipedream, schedule_kind::two_bw, schedule_kind::zb_h1}) {
    INFO(schedule_name(kind) << (recorded ? " with bytes" : ""));
    const schedule s = lowered_schedule(kind, {4, 4, 1, 1, 5});
    cost_model costs;
    costs.link.latency = 0.25;  // RECVs that wait, so that some wait across the window's start
    auto sim = simulate(s, costs);
    REQUIRE(sim.ok());
    timeline trace = sim->trace;
    for (timeline_event& e : trace.events) {
      if (!recorded) break;
      const action_kind k = e.act.kind;
      if (k == action_kind::forward || k == action_kind::backward || k == action_kind::input_grad)
        e.bytes = 100 + e.act.microbatch;
      if (k == action_kind::weight_grad) e.bytes = 10 + e.act.microbatch;
      if (k == action_kind::step) e.bytes = 7;
    }
    const json whole = json::parse(explorer_json(trace).value());
    auto text = explorer_json(trace, step_window{2, 3});
    INFO((text.ok() ? std::string() : text.message()));
    REQUIRE(text.ok());
    const json w = json::parse(*text);
    CHECK(w["window"]["from_step"] == 2);
    CHECK(w["window"]["to_step"] == 3);
    CHECK(w["window"]["steps"] == 5);

    // The slice: the actions of steps 2 and 3, from the first start of one to the last end, and
    // every action that runs in that time.
    const std::vector<int> step = page_steps(whole);
    double t0 = 1e300, t1 = -1e300;
    for (std::size_t i = 0; i < step.size(); ++i) {
      if (step[i] < 2 || step[i] > 3) continue;
      t0 = std::min(t0, whole["actions"][i]["start"].get<double>());
      t1 = std::max(t1, whole["actions"][i]["end"].get<double>());
    }
    REQUIRE(t0 > 0.0);
    std::multiset<std::tuple<int, std::string, double, double>> expected, shown;
    for (std::size_t i = 0; i < step.size(); ++i) {
      const json& a = whole["actions"][i];
      if ((step[i] >= 2 && step[i] <= 3) ||
          (a["end"].get<double>() > t0 && a["start"].get<double>() < t1))
        expected.insert(action_key(a));
    }
    for (const json& a : w["actions"]) shown.insert(action_key(a));
    CHECK(shown == expected);
    CHECK(w["actions"].size() < whole["actions"].size());
    CHECK(w["start"].get<double>() == t0);
    CHECK(w["makespan"].get<double>() == Approx(t1 - t0));

    // The first moment: the whole page's state then (its last state at or before t0).
    const json states = full_states(whole), window_states = full_states(w);
    std::size_t at = 0;
    while (at + 1 < states.size() && states[at + 1]["time"].get<double>() <= t0) ++at;
    REQUIRE(window_states[0]["time"].get<double>() == t0);
    const json first = comparable_state(w, window_states[0]);
    CHECK(first == comparable_state(whole, states[at]));
    // ... which the steps before left: stashed microbatches and a version past 0.
    bool stashed = false, stepped = false;
    for (const json& r : first) {
      stashed = stashed || !r["stashed"].empty();
      for (const auto& [stage, vs] : r["versions"].items()) stepped = stepped || vs.back() >= 1;
    }
    CHECK(stashed);
    CHECK(stepped);
    std::int64_t held = 0;  // ... at their bytes, when the trace has them
    for (const json& r : first) held += r["stash_bytes"].is_null() ? 0 : r["stash_bytes"].get<std::int64_t>();
    CHECK((held > 0) == recorded);
    // Every later state is the whole page's at the same time.
    for (std::size_t k = 1; k < window_states.size(); ++k) {
      const double time = window_states[k]["time"];
      INFO("state at " << time);
      while (at < states.size() && states[at]["time"].get<double>() < time) ++at;
      REQUIRE(at < states.size());
      REQUIRE(states[at]["time"].get<double>() == time);
      CHECK(comparable_state(w, window_states[k]) == comparable_state(whole, states[at]));
    }
    CHECK(w["states"].back()["time"].get<double>() <= t1);
  }
}

TEST_CASE("explorer windows that are empty, reversed or past the end are errors naming their end",
          "[runtime][explorer]") {
  CHECK(check_window({0, 0}, 5).end == window_problem::none);
  CHECK(check_window({5, 5}, 5).end == window_problem::none);
  CHECK(check_window({2, 0}, 5).end == window_problem::none);
  CHECK(check_window({-1, 0}, 5).end == window_problem::first);
  CHECK(check_window({0, -2}, 5).end == window_problem::last);
  CHECK(check_window({6, 0}, 5).end == window_problem::first);
  CHECK(check_window({6, 0}, 5).message == "step 6 is past the trace's last step, 5");
  CHECK(check_window({1, 6}, 5).end == window_problem::last);
  CHECK(check_window({3, 2}, 5).end == window_problem::last);
  CHECK(check_window({3, 2}, 5).message.find("the window would be empty") != std::string::npos);
  CHECK(check_window({1, 1}, 0).end == window_problem::first);  // no steps: nothing to show
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {2, 2, 1, 1, 2});
  auto sim = simulate(s, cost_model{});
  REQUIRE(sim.ok());
  auto past = explorer_json(sim->trace, step_window{3, 0});
  REQUIRE_FALSE(past.ok());
  CHECK(past.message() == "explorer: the window's first step: step 3 is past the trace's last step, 2");
  CHECK(explorer_json(sim->trace, step_window{2, 2}).ok());
}

TEST_CASE("explorer window over a page's cell limit keeps its first actions and states before the cut",
          "[runtime][explorer]") {
  const schedule s = lowered_schedule(schedule_kind::one_f_one_b, {300, 1, 1, 1, 2});
  auto sim = simulate(s, cost_model{});
  REQUIRE(sim.ok());
  auto text = explorer_json(sim->trace, step_window{2, 2});
  REQUIRE(text.ok());
  const json d = json::parse(*text);
  REQUIRE(d["actions"].size() == static_cast<std::size_t>(max_explorer_cells / 300));
  CHECK(d["note"].get<std::string>().find("steps 2 to 2 of 2") == 0);
  CHECK(d["note"].get<std::string>().find("; the window has ") != std::string::npos);
  CHECK(d["note"].get<std::string>().find("this page shows the first 833") != std::string::npos);
  // The states stop before the first action left out, which starts no earlier than the last kept.
  double last_start = 0.0;
  for (const json& a : d["actions"]) last_start = std::max(last_start, a["start"].get<double>());
  const json states = full_states(d);
  CHECK(states.back()["time"].get<double>() <= last_start);
  for (const json& st : states)
    for (const json& r : st["ranks"])
      for (const json& id : r["waiting"]) CHECK(id.get<std::size_t>() < d["actions"].size());
}

// Found by fuzz/trace_chrome.cpp: a trace whose RECV names a SEND that ends after it made the
// critical path a cycle, and its walk grew without end. Every input of the target's seed corpus
// now reads and pages (or is refused) in bounded memory.
TEST_CASE("explorer pages every trace of the fuzz seed corpus, a cycle of links among them",
          "[runtime][explorer]") {
  const std::string dir = std::string(PIPEWORKS_SOURCE_DIR) + "/fuzz/corpus/trace_chrome/";
  for (const char* name : {"2bw.json", "cyclic-p2p.json", "critical-path-cycle.json"}) {
    INFO(name);
    auto t = read_chrome_trace(dir + name);
    REQUIRE(t.ok());
    auto page = explorer_json(*t);
    REQUIRE(page.ok());
    const json d = json::parse(*page);
    CHECK(d["critical_path"].size() <= d["actions"].size());
  }
}
