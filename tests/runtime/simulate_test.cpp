// Tests for the simulator on hand-built programs: known timings, communication costs, REDUCE,
// weight versions, memory and ordering errors (closed forms and bad inputs are in their own files).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "simulate_helpers.hpp"

using namespace pipeworks;
using namespace pipeworks::sim_test;

TEST_CASE("simulate: two stages with free communication chain F and B", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  const simulation sim = run(s, uniform_costs(1.0, 2.0));
  CHECK(sim.makespan == exactly(6.0));
  CHECK(sim.bubble_fraction == exactly(0.5));
  REQUIRE(sim.stages.size() == 2);
  CHECK(sim.stages[0].busy == exactly(3.0));
  CHECK(sim.stages[1].busy == exactly(3.0));
  CHECK(sim.stages[0].peak_inflight == 1);
  CHECK(sim.actions == 8);
  // One event per action, on the right stream; a SEND and its RECV share a flow id.
  REQUIRE(sim.trace.events.size() == 8);
  CHECK(sim.trace.ranks == 2);
  CHECK(sim.trace.devices_per_replica == 2);
  const auto& sf = event(sim, 0, "0SEND_F0");
  const auto& rf = event(sim, 1, "1RECV_F0");
  const auto& sb = event(sim, 1, "1SEND_B0");
  const auto& rb = event(sim, 0, "0RECV_B0");
  CHECK(sf.stream == stream_kind::send);
  CHECK(rf.stream == stream_kind::recv);
  CHECK(sf.flow_id >= 0);
  CHECK(sf.flow_id == rf.flow_id);
  CHECK(sb.flow_id == rb.flow_id);
  CHECK(sb.flow_id != sf.flow_id);
  CHECK(rf.end == exactly(1.0));
  const auto& f1 = event(sim, 1, "1F0");
  CHECK(f1.stream == stream_kind::compute);
  CHECK(f1.start == exactly(1.0));
  CHECK(f1.end == exactly(2.0));
  CHECK(f1.version == 0);
  CHECK(sf.version == -1);
  CHECK(event(sim, 0, "0B0").start == exactly(4.0));
  CHECK(event(sim, 0, "0B0").end == exactly(6.0));
}

TEST_CASE("simulate: a RECV waits for send end + latency + bytes / bandwidth", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].boundary_bytes = 1000;
  c.link.bandwidth = 1000.0;  // 1 s per message
  c.link.latency = 0.5;
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0SEND_F0").start == exactly(1.0));
  CHECK(event(sim, 0, "0SEND_F0").end == exactly(2.0));
  CHECK(event(sim, 1, "1RECV_F0").end == exactly(2.5));
  CHECK(event(sim, 1, "1F0").start == exactly(2.5));
  CHECK(event(sim, 0, "0RECV_B0").end == exactly(7.0));  // B ends 5.5, + 1 + 0.5
  CHECK(sim.makespan == exactly(9.0));
  // Waiting for data is idle time, not busy time.
  CHECK(sim.stages[0].busy == exactly(3.0));
  CHECK(sim.bubble_fraction == exactly(1.0 - 6.0 / 18.0));
}

TEST_CASE("simulate: sends leave the compute stream free and queue on the send stream",
          "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1F0 1RECV_F1 1F1"}, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].boundary_bytes = 3;
  c.link.bandwidth = 1.0;  // 3 s per message
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0F1").end == exactly(2.0));         // not held up by the first send
  CHECK(event(sim, 0, "0SEND_F1").start == exactly(4.0));  // waits for the first on the send stream
  CHECK(event(sim, 0, "0SEND_F1").end == exactly(7.0));
  CHECK(event(sim, 1, "1F1").end == exactly(8.0));
  CHECK(sim.makespan == exactly(8.0));
  CHECK(sim.stages[1].peak_inflight == 2);  // both forwards stashed, no backward ran
}

TEST_CASE("simulate: REDUCE waits for every replica of its stage", "[runtime]") {
  const schedule s = hand({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0F1 0B1 0REDUCE 0STEP"}, 1, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].reduce = 0.5;
  c.stages[0].step = 0.25;
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0REDUCE").start == exactly(6.0));
  CHECK(event(sim, 0, "0REDUCE").end == exactly(6.5));
  CHECK(event(sim, 1, "0REDUCE").end == exactly(6.5));
  CHECK(sim.makespan == exactly(6.75));
  REQUIRE(sim.ranks.size() == 2);
  CHECK(sim.ranks[0].busy == exactly(3.75));
  CHECK(sim.ranks[1].busy == exactly(6.75));
  CHECK(sim.stages[0].busy == exactly(6.75));  // the most of its replicas
}

TEST_CASE("simulate: derived REDUCE time is a ring all-reduce of the parameters", "[runtime]") {
  const schedule s = hand({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0REDUCE 0STEP"}, 1, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].param_bytes = 1000;
  c.reduce_link.bandwidth = 1000.0;
  c.reduce_link.latency = 0.1;
  const simulation sim = run(s, c);
  CHECK(sim.makespan == exactly(3.0 + 1.0 + 0.2));  // 2(w-1)/w * 1 s + 2(w-1) * 0.1 s
}

TEST_CASE("simulate: peak live weight versions with stashing", "[runtime]") {
  // No version table: each F uses the newest version; its backward uses the same one.
  const schedule s = hand({"0F0 0F1 0B0 0STEP 0F2 0B1 0STEP 0B2 0STEP"}, 1);
  const simulation sim = run(s, uniform_costs(1.0, 1.0));
  CHECK(sim.stages[0].peak_versions == 2);
  CHECK(event(sim, 0, "0F1").version == 0);
  CHECK(event(sim, 0, "0F2").version == 1);
  CHECK(event(sim, 0, "0B2").version == 1);
  CHECK(sim.stages[0].peak_inflight == 2);
  // A flush schedule never holds more than one.
  const simulation flush =
      run(hand({"0F0 0F1 0B0 0B1 0STEP 0F2 0B2 0STEP"}, 1), uniform_costs(1.0, 1.0));
  CHECK(flush.stages[0].peak_versions == 1);
}

TEST_CASE("simulate: a version table that names a version before its STEP is an error",
          "[runtime]") {
  schedule s = hand({"0F0 0B0 0F1 0B1 0STEP"}, 1);
  s.versions = {{{0, 0}, {1, 1}}};
  const std::string msg = fails(s, uniform_costs(1.0, 1.0));
  CHECK_THAT(msg,
             Catch::Contains("0F1") && Catch::Contains("version 1") && Catch::Contains("STEP"));
}

TEST_CASE("simulate: activation memory over the device's is an error naming stage and time",
          "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].activation_bytes = 100;
  c.devices[0].memory = 250;
  const std::string msg = fails(hand({"0F0 0F1 0F2 0B0 0B1 0B2"}, 1), c);
  CHECK_THAT(msg,
             Catch::Contains("stage 0") && Catch::Contains("t=2") && Catch::Contains("memory"));
  const simulation ok = run(hand({"0F0 0B0 0F1 0B1 0F2 0B2"}, 1), c);
  CHECK(ok.stages[0].peak_activation_bytes == 100);
  // Weight versions count too: two live versions of 100 bytes on a 150-byte device.
  cost_model w = uniform_costs(1.0, 1.0);
  w.stages[0].param_bytes = 100;
  w.devices[0].memory = 150;
  const std::string msg2 = fails(hand({"0F0 0F1 0B0 0STEP 0B1 0STEP"}, 1), w);
  CHECK_THAT(msg2, Catch::Contains("stage 0") && Catch::Contains("t=3"));
}

TEST_CASE("simulate: a deadlock shows each rank's program with the stuck action marked",
          "[runtime]") {
  const schedule s = hand({"0RECV_B0 0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  const std::string msg = fails(s, uniform_costs(1.0, 2.0));
  CHECK_THAT(msg, Catch::Contains("deadlock"));
  CHECK_THAT(msg, Catch::Contains("[0RECV_B0]") && Catch::Contains("[1RECV_F0]"));
  CHECK_THAT(msg, Catch::Contains("waits for 1SEND_B0"));
}

TEST_CASE("simulate: actions before their inputs are errors that say what is missing",
          "[runtime]") {
  const cost_model c = uniform_costs(1.0, 2.0);
  // Not lowered: stage 1's F has no RECV_F.
  CHECK_THAT(fails(hand({"0F0 0B0", "1F0 1B0"}, 2), c), Catch::Contains("lower_communication"));
  CHECK_THAT(fails(hand({"0B0 0F0"}, 1), c),
             Catch::Contains("0B0") && Catch::Contains("its F has not run"));
  CHECK_THAT(fails(hand({"0F0 0F0"}, 1), c), Catch::Contains("already ran"));
  CHECK_THAT(fails(hand({"0F0 0W0"}, 1), c), Catch::Contains("its I has not run"));
  CHECK_THAT(fails(hand({"1F0", "0F0"}, 2), c), Catch::Contains("lives on device 1"));
  CHECK_THAT(fails(hand({"0F0 0SEND_B0"}, 1), c), Catch::Contains("past the end"));
  // Virtual stages on one device hand over without sends.
  const simulation sim = run(hand({"0F0 1F0 1B0 0B0"}, 1, 1, 2), c);
  CHECK(sim.makespan == exactly(6.0));
}

TEST_CASE("simulate: split backward runs I = B - W, then W", "[runtime]") {
  const simulation sim = run(hand({"0F0 0I0 0W0"}, 1), uniform_costs(1.0, 3.0, 1.0));
  CHECK(event(sim, 0, "0I0").end == exactly(3.0));
  CHECK(event(sim, 0, "0W0").end == exactly(4.0));
  CHECK(sim.stages[0].peak_inflight == 1);
}

TEST_CASE("simulate: device speed divides compute times", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.devices = {device_cost{1.0, 0}, device_cost{2.0, 0}};
  const simulation sim =
      run(hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2), c);
  CHECK(sim.makespan == exactly(1.0 + 0.5 + 1.0 + 2.0));
}

TEST_CASE("simulate: without a timeline the results are the same", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  simulate_options o;
  o.record_timeline = false;
  auto sim = simulate(s, uniform_costs(1.0, 2.0), o);
  REQUIRE(sim.ok());
  CHECK(sim->trace.events.empty());
  CHECK(sim->makespan == exactly(6.0));
}

TEST_CASE("simulate: to_json prints makespan, bubble fraction and per-stage figures", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].activation_bytes = 64;
  const simulation sim =
      run(hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2), c);
  CHECK(
      to_json(sim).value() ==
      "{\"makespan\": 6, \"bubble_fraction\": 0.5, \"stages\": ["
      "{\"busy\": 3, \"peak_inflight\": 1, \"peak_versions\": 1, \"peak_activation_bytes\": 64}, "
      "{\"busy\": 3, \"peak_inflight\": 1, \"peak_versions\": 1, \"peak_activation_bytes\": 64}]}");
}

TEST_CASE("simulate: a built-in schedule on its quick bounds gives what the full checks give",
          "[runtime]") {
  // The same programs marked custom take the path that scans every program first.
  cost_model costs = uniform_costs(1.0, 2.0, 0.5);
  for (schedule_kind k : every_schedule_kind()) {
    CAPTURE(schedule_name(k));
    const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
    const int p = k == schedule_kind::dualpipe ? 4 : 3;  // dualpipe mirrors an even p
    const schedule built =
        lower_communication(make_schedule(k, params(p, 2 * p, v, 2, 2)).value());
    schedule custom = built;
    custom.custom_programs = true;
    const simulation a = run(built, costs), b = run(custom, costs);
    CHECK(a.makespan == b.makespan);
    CHECK(a.bubble_fraction == b.bubble_fraction);
    CHECK(a.actions == b.actions);
    REQUIRE(a.ranks.size() == b.ranks.size());
    for (std::size_t r = 0; r < a.ranks.size(); ++r) {
      CHECK(a.ranks[r].busy == b.ranks[r].busy);
      CHECK(a.ranks[r].peak_inflight == b.ranks[r].peak_inflight);
      CHECK(a.ranks[r].peak_versions == b.ranks[r].peak_versions);
      CHECK(a.ranks[r].peak_memory_bytes == b.ranks[r].peak_memory_bytes);
    }
    REQUIRE(a.trace.events.size() == b.trace.events.size());
    for (std::size_t i = 0; i < a.trace.events.size(); ++i) {
      const timeline_event &x = a.trace.events[i], &y = b.trace.events[i];
      CHECK((x.rank == y.rank && x.act == y.act && x.start == y.start && x.end == y.end &&
             x.version == y.version && x.flow_id == y.flow_id));
    }
  }
}

TEST_CASE("simulate: a built-in schedule edited past its bounds gets the full checks' message",
          "[runtime]") {
  const cost_model costs = uniform_costs(1.0, 2.0);
  const schedule built =
      lower_communication(make_schedule(schedule_kind::one_f_one_b, params(2, 4)).value());
  auto same_message = [&](schedule edited) {
    schedule custom = edited;
    custom.custom_programs = true;
    const std::string quick = fails(edited, costs);
    CHECK(quick == fails(custom, costs));
    return quick;
  };
  schedule far = built;  // a microbatch id past m * steps
  far.programs[0][0].microbatch = 7;  // 0F0 becomes 0F7
  CHECK_THAT(same_message(far), Catch::Contains("simulate:"));
  schedule wrong = built;  // a stage on another device
  wrong.programs[1][0].stage = 0;
  CHECK_THAT(same_message(wrong), Catch::Contains("runs on device 1 but stage 0 lives on device 0"));
  schedule twice = built;  // two STEPs more than the parameters give room for
  twice.programs[0].push_back(action{0, action_kind::step, -1});
  twice.programs[0].push_back(action{0, action_kind::step, -1});
  schedule custom = twice;
  custom.custom_programs = true;
  const simulation a = run(twice, costs), b = run(custom, costs);
  CHECK(a.makespan == b.makespan);
  CHECK(a.ranks[0].peak_versions == b.ranks[0].peak_versions);
}

TEST_CASE("simulate: a flush schedule's version table is read once it departs from the rule",
          "[runtime]") {
  const cost_model costs = uniform_costs(1.0, 2.0);
  schedule s = lower_communication(make_schedule(schedule_kind::gpipe, params(2, 2, 1, 1, 2)).value());
  const simulation rule = run(s, costs);
  CHECK(rule.ranks[1].peak_versions == 1);  // version t for every microbatch of step t
  // Microbatch 3 (step 1) on stage 1 now uses version 0: two versions live at once there.
  s.versions[1][3] = version_use{0, 0};
  const simulation edited = run(s, costs);
  CHECK(edited.ranks[1].peak_versions == 2);
  CHECK(edited.ranks[0].peak_versions == 1);
}
