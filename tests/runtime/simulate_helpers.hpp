// Helpers for the simulator's tests: hand-written schedules, running and failing simulations,
// finding timeline events, and exact comparison within 1e-9.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/lower.hpp"
#include "runtime/simulate.hpp"

namespace pipeworks::sim_test {

// Equal within 1e-9 absolute, with no relative slack (Approx alone allows ~1.2e-5 relative).
inline Approx exactly(double x) { return Approx(x).epsilon(0).margin(1e-9); }

// A schedule around hand-written programs ("0F0 0SEND_F0 ..."), one per rank, stage s on device
// s % p, no version table (the simulator then uses the latest version at each F).
inline schedule hand(std::vector<std::string> rows, int p, int replicas = 1, int chunks = 1) {
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

inline simulation run(const schedule& s, const cost_model& c) {
  auto sim = simulate(s, c);
  INFO((sim.ok() ? std::string() : sim.message()));
  REQUIRE(sim.ok());
  return std::move(sim).value();
}

inline std::string fails(const schedule& s, const cost_model& c) {
  auto sim = simulate(s, c);
  REQUIRE(!sim.ok());
  return sim.message();
}

inline const timeline_event& event(const simulation& sim, int rank, const std::string& act) {
  for (const auto& e : sim.trace.events) {
    if (e.rank == rank && to_string(e.act) == act) return e;
  }
  FAIL("no event " << act << " on rank " << rank);
  return sim.trace.events.front();
}

inline schedule_params params(int p, int m, int v = 1, int w = 1, int steps = 1) {
  schedule_params sp;
  sp.stages = p;
  sp.microbatches = m;
  sp.chunks = v;
  sp.replicas = w;
  sp.steps = steps;
  return sp;
}

inline simulation run_kind(schedule_kind k, const schedule_params& sp, const cost_model& c) {
  auto s = make_schedule(k, sp);
  INFO(schedule_name(k) << " p=" << sp.stages << " m=" << sp.microbatches << " v=" << sp.chunks);
  INFO((s.ok() ? std::string() : s.message()));
  REQUIRE(s.ok());
  auto sim = simulate(lower_communication(*s), c);
  INFO((sim.ok() ? std::string() : sim.message()));
  REQUIRE(sim.ok());
  return std::move(sim).value();
}

}  // namespace pipeworks::sim_test
