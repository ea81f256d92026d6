// Shared checks for schedule generator tests: every stage runs F and a backward for every
// microbatch exactly once, F before B, and helpers to read a stage's order.
#pragma once
#include <catch2/catch.hpp>

#include <vector>

#include "runtime/schedule.hpp"

namespace pipeworks::testing {

// The compute actions of virtual stage `stage` on replica `replica`, in program order.
inline std::vector<action> stage_actions(const schedule& s, int stage, int replica = 0) {
  std::vector<action> out;
  for (const action& a : s.programs[s.rank_of(replica, s.device_of[stage])])
    if (a.stage == stage && is_compute(a.kind)) out.push_back(a);
  return out;
}

// Each microbatch's F precedes its backward, and both appear exactly once, on every stage and
// replica.
inline void check_complete(const schedule& s) {
  const int total = s.total_microbatches();
  for (int q = 0; q < s.params.replicas; ++q)
    for (int st = 0; st < s.virtual_stages; ++st) {
      std::vector<int> f(total, 0), b(total, 0);
      for (const action& a : stage_actions(s, st, q)) {
        REQUIRE(a.microbatch >= 0);
        REQUIRE(a.microbatch < total);
        if (a.kind == action_kind::forward) {
          ++f[a.microbatch];
        } else if (a.kind == action_kind::backward || a.kind == action_kind::input_grad) {
          INFO("stage " << st << " microbatch " << a.microbatch);
          CHECK(f[a.microbatch] == 1);  // its F came first
          ++b[a.microbatch];
        }
      }
      for (int mb = 0; mb < total; ++mb) {
        INFO("stage " << st << " replica " << q << " microbatch " << mb);
        CHECK(f[mb] == 1);
        CHECK(b[mb] == 1);
      }
    }
}

// Forwards before the first backward at `stage`.
inline int warmup_forwards(const schedule& s, int stage) {
  int n = 0;
  for (const action& a : stage_actions(s, stage)) {
    if (a.kind != action_kind::forward) break;
    ++n;
  }
  return n;
}

// The peak number of distinct weight versions live at `stage` of replica 0: the versions held by
// microbatches between their F and their backward, plus the stage's newest version.
inline int peak_live_versions(const schedule& s, int stage) {
  std::vector<int> held;  // versions of in-flight microbatches, multiset as counts
  int newest = 0, peak = 1;
  auto live = [&]() {
    int n = 0;
    for (int v = 0; v < static_cast<int>(held.size()); ++v) n += (held[v] > 0 || v == newest);
    return std::max(n, 1);
  };
  for (const action& a : s.programs[s.device_of[stage]]) {
    if (a.stage != stage) continue;
    if (a.kind == action_kind::step) {
      ++newest;
      if (static_cast<int>(held.size()) <= newest) held.resize(newest + 1, 0);
    } else if (a.kind == action_kind::forward) {
      const int v = s.versions[stage][a.microbatch].forward;
      INFO("stage " << stage << " F of microbatch " << a.microbatch << " uses version " << v);
      CHECK(v <= newest);  // the version it uses exists already
      if (static_cast<int>(held.size()) <= std::max(v, newest)) held.resize(std::max(v, newest) + 1);
      ++held[v];
    } else if (a.kind == action_kind::backward || a.kind == action_kind::weight_grad) {
      --held[s.versions[stage][a.microbatch].backward];
    }
    peak = std::max(peak, live());
  }
  return peak;
}

// Independently of how the generator computes its table: on every replica and stage, each F's
// version exists when the F runs (at most the STEPs of that stage before it), and each backward's
// version is still live, at most `max_behind` versions older than the stage's newest then.
inline void check_versions_usable(const schedule& s, int max_behind) {
  for (int r = 0; r < s.ranks(); ++r) {
    std::vector<int> newest(s.virtual_stages, 0);
    for (const action& a : s.programs[r]) {
      if (a.kind == action_kind::step) {
        ++newest[a.stage];
        continue;
      }
      if (!is_compute(a.kind)) continue;
      const version_use& v = s.versions[a.stage][a.microbatch];
      INFO("rank " << r << " " << to_string(a) << ": F version " << v.forward << ", B version "
                   << v.backward << ", newest " << newest[a.stage]);
      if (a.kind == action_kind::forward) {
        CHECK(v.forward <= newest[a.stage]);
      } else {
        CHECK(v.backward == v.forward);
        CHECK(v.backward >= newest[a.stage] - max_behind);
      }
    }
  }
}

}  // namespace pipeworks::testing
