// Tests for the simulator: hand-built programs with known timings, communication costs, REDUCE,
// weight versions, memory and errors; then the closed forms and peak counts of the generators.
// Cases tagged [generators] use the built-in generators and lower_communication.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/simulate.hpp"

using namespace pipeworks;

namespace {

// A schedule around hand-written programs ("0F0 0SEND_F0 ..."), one per rank, stage s on device
// s % p, no version table (the simulator then uses the latest version at each F).
schedule hand(std::vector<std::string> rows, int p, int replicas = 1, int chunks = 1) {
  schedule s;
  s.params.stages = p;
  s.params.replicas = replicas;
  s.params.chunks = chunks;
  s.virtual_stages = p * chunks;
  for (int v = 0; v < p * chunks; ++v) s.device_of.push_back(v % p);
  for (const auto& r : rows) s.programs.push_back(parse_program(r).value());
  s.lowered = true;
  return s;
}

simulation run(const schedule& s, const cost_model& c) {
  auto sim = simulate(s, c);
  INFO((sim.ok() ? std::string() : sim.message()));
  REQUIRE(sim.ok());
  return std::move(sim).value();
}

std::string fails(const schedule& s, const cost_model& c) {
  auto sim = simulate(s, c);
  REQUIRE(!sim.ok());
  return sim.message();
}

const timeline_event& event(const simulation& sim, int rank, const std::string& act) {
  for (const auto& e : sim.trace.events) {
    if (e.rank == rank && to_string(e.act) == act) return e;
  }
  FAIL("no event " << act << " on rank " << rank);
  return sim.trace.events.front();
}

schedule_params params(int p, int m, int v = 1, int w = 1, int steps = 1) {
  schedule_params sp;
  sp.stages = p;
  sp.microbatches = m;
  sp.chunks = v;
  sp.replicas = w;
  sp.steps = steps;
  return sp;
}

simulation run_kind(schedule_kind k, const schedule_params& sp, const cost_model& c) {
  auto s = make_schedule(k, sp);
  INFO(schedule_name(k) << " p=" << sp.stages << " m=" << sp.microbatches << " v=" << sp.chunks);
  INFO((s.ok() ? std::string() : s.message()));
  REQUIRE(s.ok());
  auto sim = simulate(lower_communication(*s), c);
  INFO((sim.ok() ? std::string() : sim.message()));
  REQUIRE(sim.ok());
  return std::move(sim).value();
}

}  // namespace

TEST_CASE("simulate: two stages with free communication chain F and B", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  const simulation sim = run(s, uniform_costs(1.0, 2.0));
  CHECK(sim.makespan == Approx(6.0).margin(1e-12));
  CHECK(sim.bubble_fraction == Approx(0.5).margin(1e-12));
  REQUIRE(sim.stages.size() == 2);
  CHECK(sim.stages[0].busy == Approx(3.0));
  CHECK(sim.stages[1].busy == Approx(3.0));
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
  CHECK(rf.end == Approx(1.0));
  const auto& f1 = event(sim, 1, "1F0");
  CHECK(f1.stream == stream_kind::compute);
  CHECK(f1.start == Approx(1.0));
  CHECK(f1.end == Approx(2.0));
  CHECK(f1.version == 0);
  CHECK(sf.version == -1);
  CHECK(event(sim, 0, "0B0").start == Approx(4.0));
  CHECK(event(sim, 0, "0B0").end == Approx(6.0));
}

TEST_CASE("simulate: a RECV waits for send end + latency + bytes / bandwidth", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].boundary_bytes = 1000;
  c.link.bandwidth = 1000.0;  // 1 s per message
  c.link.latency = 0.5;
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0SEND_F0").start == Approx(1.0));
  CHECK(event(sim, 0, "0SEND_F0").end == Approx(2.0));
  CHECK(event(sim, 1, "1RECV_F0").end == Approx(2.5));
  CHECK(event(sim, 1, "1F0").start == Approx(2.5));
  CHECK(event(sim, 0, "0RECV_B0").end == Approx(7.0));  // B ends 5.5, + 1 + 0.5
  CHECK(sim.makespan == Approx(9.0));
  // Waiting for data is idle time, not busy time.
  CHECK(sim.stages[0].busy == Approx(3.0));
  CHECK(sim.bubble_fraction == Approx(1.0 - 6.0 / 18.0));
}

TEST_CASE("simulate: sends leave the compute stream free and queue on the send stream", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1F0 1RECV_F1 1F1"}, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].boundary_bytes = 3;
  c.link.bandwidth = 1.0;  // 3 s per message
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0F1").end == Approx(2.0));        // not held up by the first send
  CHECK(event(sim, 0, "0SEND_F1").start == Approx(4.0));  // waits for the first on the send stream
  CHECK(event(sim, 0, "0SEND_F1").end == Approx(7.0));
  CHECK(event(sim, 1, "1F1").end == Approx(8.0));
  CHECK(sim.makespan == Approx(8.0));
  CHECK(sim.stages[1].peak_inflight == 2);  // both forwards stashed, no backward ran
}

TEST_CASE("simulate: REDUCE waits for every replica of its stage", "[runtime]") {
  const schedule s = hand({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0F1 0B1 0REDUCE 0STEP"}, 1, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].reduce = 0.5;
  c.stages[0].step = 0.25;
  const simulation sim = run(s, c);
  CHECK(event(sim, 0, "0REDUCE").start == Approx(6.0));
  CHECK(event(sim, 0, "0REDUCE").end == Approx(6.5));
  CHECK(event(sim, 1, "0REDUCE").end == Approx(6.5));
  CHECK(sim.makespan == Approx(6.75));
  REQUIRE(sim.ranks.size() == 2);
  CHECK(sim.ranks[0].busy == Approx(3.75));
  CHECK(sim.ranks[1].busy == Approx(6.75));
  CHECK(sim.stages[0].busy == Approx(6.75));  // the most of its replicas
}

TEST_CASE("simulate: derived REDUCE time is a ring all-reduce of the parameters", "[runtime]") {
  const schedule s = hand({"0F0 0B0 0REDUCE 0STEP", "0F0 0B0 0REDUCE 0STEP"}, 1, 2);
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].param_bytes = 1000;
  c.reduce_link.bandwidth = 1000.0;
  c.reduce_link.latency = 0.1;
  const simulation sim = run(s, c);
  CHECK(sim.makespan == Approx(3.0 + 1.0 + 0.2));  // 2(w-1)/w * 1 s + 2(w-1) * 0.1 s
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
  const simulation flush = run(hand({"0F0 0F1 0B0 0B1 0STEP 0F2 0B2 0STEP"}, 1), uniform_costs(1.0, 1.0));
  CHECK(flush.stages[0].peak_versions == 1);
}

TEST_CASE("simulate: a version table that names a version before its STEP is an error", "[runtime]") {
  schedule s = hand({"0F0 0B0 0F1 0B1 0STEP"}, 1);
  s.versions = {{{0, 0}, {1, 1}}};
  const std::string msg = fails(s, uniform_costs(1.0, 1.0));
  CHECK_THAT(msg, Catch::Contains("0F1") && Catch::Contains("version 1") && Catch::Contains("STEP"));
}

TEST_CASE("simulate: activation memory over the device's is an error naming stage and time", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].activation_bytes = 100;
  c.devices[0].memory = 250;
  const std::string msg = fails(hand({"0F0 0F1 0F2 0B0 0B1 0B2"}, 1), c);
  CHECK_THAT(msg, Catch::Contains("stage 0") && Catch::Contains("t=2") && Catch::Contains("memory"));
  const simulation ok = run(hand({"0F0 0B0 0F1 0B1 0F2 0B2"}, 1), c);
  CHECK(ok.stages[0].peak_activation_bytes == 100);
  // Weight versions count too: two live versions of 100 bytes on a 150-byte device.
  cost_model w = uniform_costs(1.0, 1.0);
  w.stages[0].param_bytes = 100;
  w.devices[0].memory = 150;
  const std::string msg2 = fails(hand({"0F0 0F1 0B0 0STEP 0B1 0STEP"}, 1), w);
  CHECK_THAT(msg2, Catch::Contains("stage 0") && Catch::Contains("t=3"));
}

TEST_CASE("simulate: a deadlock shows each rank's program with the stuck action marked", "[runtime]") {
  const schedule s = hand({"0RECV_B0 0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  const std::string msg = fails(s, uniform_costs(1.0, 2.0));
  CHECK_THAT(msg, Catch::Contains("deadlock"));
  CHECK_THAT(msg, Catch::Contains("[0RECV_B0]") && Catch::Contains("[1RECV_F0]"));
  CHECK_THAT(msg, Catch::Contains("waits for 1SEND_B0"));
}

TEST_CASE("simulate: actions before their inputs are errors that say what is missing", "[runtime]") {
  const cost_model c = uniform_costs(1.0, 2.0);
  // Not lowered: stage 1's F has no RECV_F.
  CHECK_THAT(fails(hand({"0F0 0B0", "1F0 1B0"}, 2), c), Catch::Contains("lower_communication"));
  CHECK_THAT(fails(hand({"0B0 0F0"}, 1), c), Catch::Contains("0B0") && Catch::Contains("its F has not run"));
  CHECK_THAT(fails(hand({"0F0 0F0"}, 1), c), Catch::Contains("already ran"));
  CHECK_THAT(fails(hand({"0F0 0W0"}, 1), c), Catch::Contains("its I has not run"));
  CHECK_THAT(fails(hand({"1F0", "0F0"}, 2), c), Catch::Contains("lives on device 1"));
  CHECK_THAT(fails(hand({"0F0 0SEND_B0"}, 1), c), Catch::Contains("past the end"));
  // Virtual stages on one device hand over without sends.
  const simulation sim = run(hand({"0F0 1F0 1B0 0B0"}, 1, 1, 2), c);
  CHECK(sim.makespan == Approx(6.0));
}

TEST_CASE("simulate: split backward runs I = B - W, then W", "[runtime]") {
  const simulation sim = run(hand({"0F0 0I0 0W0"}, 1), uniform_costs(1.0, 3.0, 1.0));
  CHECK(event(sim, 0, "0I0").end == Approx(3.0));
  CHECK(event(sim, 0, "0W0").end == Approx(4.0));
  CHECK(sim.stages[0].peak_inflight == 1);
}

TEST_CASE("simulate: device speed divides compute times", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.devices = {device_cost{1.0, 0}, device_cost{2.0, 0}};
  const simulation sim = run(hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2), c);
  CHECK(sim.makespan == Approx(1.0 + 0.5 + 1.0 + 2.0));
}

TEST_CASE("simulate: without a timeline the results are the same", "[runtime]") {
  const schedule s = hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2);
  simulate_options o;
  o.record_timeline = false;
  auto sim = simulate(s, uniform_costs(1.0, 2.0), o);
  REQUIRE(sim.ok());
  CHECK(sim->trace.events.empty());
  CHECK(sim->makespan == Approx(6.0));
}

TEST_CASE("simulate: to_json prints makespan, bubble fraction and per-stage figures", "[runtime]") {
  cost_model c = uniform_costs(1.0, 2.0);
  c.stages[0].activation_bytes = 64;
  const simulation sim = run(hand({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}, 2), c);
  CHECK(to_json(sim) ==
        "{\"makespan\": 6, \"bubble_fraction\": 0.5, \"stages\": ["
        "{\"busy\": 3, \"peak_inflight\": 1, \"peak_versions\": 1, \"peak_activation_bytes\": 64}, "
        "{\"busy\": 3, \"peak_inflight\": 1, \"peak_versions\": 1, \"peak_activation_bytes\": 64}]}");
}

// ---- closed forms over the built-in generators, with uniform costs and free communication ----

TEST_CASE("simulate: GPipe and 1F1B take (m + p - 1)(F + B)", "[runtime][generators]") {
  const double f = 1.25, b = 2.5;
  for (auto k : {schedule_kind::gpipe, schedule_kind::one_f_one_b}) {
    for (int p : {1, 2, 3, 5, 8}) {
      for (int m : {1, 2, 5, 12}) {
        const simulation sim = run_kind(k, params(p, m), uniform_costs(f, b));
        INFO(schedule_name(k) << " p=" << p << " m=" << m);
        CHECK(std::abs(sim.makespan - (m + p - 1) * (f + b)) < 1e-9);
        CHECK(std::abs(sim.bubble_fraction - (p - 1.0) / (m + p - 1.0)) < 1e-9);
      }
    }
  }
}

TEST_CASE("simulate: peak in-flight is m for GPipe and min(p - s, m) for 1F1B", "[runtime][generators]") {
  for (int p : {1, 2, 4, 7}) {
    for (int m : {1, 3, 8, 16}) {
      const simulation g = run_kind(schedule_kind::gpipe, params(p, m), uniform_costs(1.0, 2.0));
      const simulation o = run_kind(schedule_kind::one_f_one_b, params(p, m), uniform_costs(1.0, 2.0));
      for (int s = 0; s < p; ++s) {
        INFO("p=" << p << " m=" << m << " stage " << s);
        CHECK(g.stages[s].peak_inflight == m);
        CHECK(o.stages[s].peak_inflight == std::min(p - s, m));
      }
    }
  }
}

TEST_CASE("simulate: interleaved takes m(F + B) + (p - 1)(F + B) / v", "[runtime][generators]") {
  // F and B are a device's whole share of the model; each of its v chunks takes F / v and B / v.
  const double f = 3.0, b = 6.0;
  for (int p : {2, 3, 4}) {
    for (int v : {1, 2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        const simulation sim = run_kind(schedule_kind::interleaved, params(p, m, v), uniform_costs(f / v, b / v));
        INFO("p=" << p << " v=" << v << " m=" << m);
        CHECK(std::abs(sim.makespan - (m * (f + b) + (p - 1) * (f + b) / v)) < 1e-9);
      }
    }
  }
}

TEST_CASE("simulate: ZB-H1 bubble is (p - 1)(F + I - W)", "[runtime][generators]") {
  // The paper's conditions: enough microbatches (m >= p) and W no longer than F or I (Table 1:
  // T_W < T_F < T_B). The bubble is each stage's idle time in the step: makespan - m(F + I + W).
  for (auto fiw : {std::array{1.0, 1.0, 1.0}, {1.0, 2.0, 1.0}, {2.0, 1.5, 0.5}, {1.5, 1.0, 1.0}}) {
    const double f = fiw[0], i = fiw[1], w = fiw[2];
    for (int p : {1, 2, 4, 6}) {
      for (int m : {p, p + 1, 3 * p}) {
        const simulation sim = run_kind(schedule_kind::zb_h1, params(p, m), uniform_costs(f, i + w, w));
        INFO("F=" << f << " I=" << i << " W=" << w << " p=" << p << " m=" << m);
        CHECK(std::abs(sim.makespan - m * (f + i + w) - (p - 1) * (f + i - w)) < 1e-9);
        for (int s = 0; s < p; ++s) CHECK(sim.stages[s].peak_inflight == p);
      }
    }
  }
}

TEST_CASE("simulate: ZB-H2 bubble is (p - 1)(F + I - 2W) per step", "[runtime][generators]") {
  // ZB-H2 drops the optimizer synchronisation (paper §4): each stage steps on its own, so steps
  // overlap as the parallelogram of Figure 3 repeats, and the bubble is what each further step
  // adds beyond m(F + I + W). Conditions: m >= 2p - 1, W <= F and W <= I. With F = I = W it is 0.
  for (auto fiw : {std::array{1.0, 1.0, 1.0}, {1.0, 2.0, 1.0}, {2.0, 1.5, 0.5}, {1.5, 1.0, 1.0}}) {
    const double f = fiw[0], i = fiw[1], w = fiw[2];
    for (int p : {1, 2, 4, 6}) {
      for (int m : {2 * p - 1, 2 * p, 3 * p}) {
        const cost_model c = uniform_costs(f, i + w, w);
        const simulation two = run_kind(schedule_kind::zb_h2, params(p, m, 1, 1, 2), c);
        const simulation three = run_kind(schedule_kind::zb_h2, params(p, m, 1, 1, 3), c);
        INFO("F=" << f << " I=" << i << " W=" << w << " p=" << p << " m=" << m);
        CHECK(std::abs(three.makespan - two.makespan - m * (f + i + w) - (p - 1) * (f + i - 2 * w)) < 1e-9);
        CHECK(three.stages[p - 1].peak_inflight == 2 * p - 1);
      }
    }
  }
}

TEST_CASE("simulate: peak live versions are p - s for PipeDream, 2 for 2BW, 1 for flush schedules",
          "[runtime][generators]") {
  for (int p : {1, 2, 4, 6}) {
    const simulation pd = run_kind(schedule_kind::pipedream, params(p, 1, 1, 1, 3 * p), uniform_costs(1.0, 2.0));
    for (int s = 0; s < p; ++s) {
      INFO("pipedream p=" << p << " stage " << s);
      CHECK(pd.stages[s].peak_versions == p - s);
    }
    for (int m : {p, 2 * p}) {
      const simulation bw = run_kind(schedule_kind::two_bw, params(p, m, 1, 1, 4), uniform_costs(1.0, 2.0));
      for (int s = 0; s < p; ++s) {
        INFO("2bw p=" << p << " m=" << m << " stage " << s);
        CHECK(bw.stages[s].peak_versions == 2);  // W(t+1) = W(t) - lr * grad(W(t-1)) needs both
      }
    }
    for (auto k : {schedule_kind::gpipe, schedule_kind::one_f_one_b, schedule_kind::interleaved,
                   schedule_kind::zb_h1, schedule_kind::zb_h2, schedule_kind::bfs}) {
      const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : 1;
      const simulation sim = run_kind(k, params(p, 2 * p, v, 1, 3), uniform_costs(1.0, 2.0, 1.0));
      for (int s = 0; s < p; ++s) {
        INFO(schedule_name(k) << " p=" << p << " stage " << s);
        CHECK(sim.stages[s].peak_versions == 1);
      }
    }
  }
}

TEST_CASE("simulate: every built-in schedule runs to the end on a small grid", "[runtime][generators]") {
  const cost_model c = uniform_costs(1.0, 2.0, 1.0);
  for (auto k : {schedule_kind::gpipe, schedule_kind::one_f_one_b, schedule_kind::interleaved,
                 schedule_kind::zb_h1, schedule_kind::zb_h2, schedule_kind::bfs, schedule_kind::pipedream,
                 schedule_kind::pipedream_vs, schedule_kind::two_bw, schedule_kind::cyclic}) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 2 * p; ++m) {
        for (int v = 1; v <= 2; ++v) {
          for (int w = 1; w <= 2; ++w) {
            auto s = make_schedule(k, params(p, m, v, w, 2));
            if (!s.ok()) continue;  // parameters the schedule does not permit
            auto sim = simulate(lower_communication(*s), c);
            INFO(schedule_name(k) << " p=" << p << " m=" << m << " v=" << v << " w=" << w);
            INFO((sim.ok() ? std::string() : sim.message()));
            REQUIRE(sim.ok());
            CHECK(sim->makespan > 0.0);
            CHECK(sim->bubble_fraction >= 0.0);
            CHECK(sim->bubble_fraction < 1.0);
            CHECK(sim->trace.events.size() == static_cast<std::size_t>(sim->actions));
          }
        }
      }
    }
  }
}

TEST_CASE("simulate: timeline versions come from the schedule's version table", "[runtime][generators]") {
  for (auto k : {schedule_kind::two_bw, schedule_kind::pipedream, schedule_kind::zb_h2}) {
    auto s = make_schedule(k, params(3, 3, 1, 1, 3));
    REQUIRE(s.ok());
    const simulation sim = run(lower_communication(*s), uniform_costs(1.0, 2.0, 1.0));
    int compute = 0;
    for (const auto& e : sim.trace.events) {
      if (!is_compute(e.act.kind)) {
        CHECK(e.version == -1);
        continue;
      }
      ++compute;
      const version_use& v = s->versions[e.act.stage][e.act.microbatch];
      INFO(schedule_name(k) << " " << to_string(e.act));
      CHECK(e.version == (e.act.kind == action_kind::forward ? v.forward : v.backward));
    }
    CHECK(compute == 3 * 9 * (k == schedule_kind::zb_h2 ? 3 : 2));
  }
}

TEST_CASE("simulate: peak activation bytes follow the stashed microbatches", "[runtime][generators]") {
  cost_model c = uniform_costs(1.0, 2.0, 1.0);
  c.stages[0].activation_bytes = 1000;
  for (int p : {2, 4}) {
    const simulation o = run_kind(schedule_kind::one_f_one_b, params(p, 3 * p), c);
    const simulation h2 = run_kind(schedule_kind::zb_h2, params(p, 3 * p), c);
    for (int s = 0; s < p; ++s) {
      CHECK(o.stages[s].peak_activation_bytes == 1000 * (p - s));
      CHECK(h2.stages[s].peak_activation_bytes == 1000 * h2.stages[s].peak_inflight);
    }
    CHECK(h2.stages[p - 1].peak_activation_bytes == 1000 * (2 * p - 1));
  }
}
