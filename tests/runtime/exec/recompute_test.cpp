// Activation recomputation on one thread: for every schedule, w in {1, 2}, mlp and gpt-tiny, a run
// with --recompute full or selective ends with the bits of the run without it and holds fewer
// stashed bytes; a checkpoint taken under one mode resumes under another, bit for bit.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

using fixture = case_run;

std::optional<fixture> make_fixture(const semantics_case& c, int steps) {
  auto f = make_case_run(c, steps);
  if (f) REQUIRE(validate(*f->plan).ok());
  return f;
}

lowered_run lowered(const fixture& f, recompute_mode mode) {
  lowered_run run = local_lowered_run(f.plan, f.bounds, f.cfg);
  run.plan.recompute = mode;
  return run;
}

int fewer_bytes_checked = 0;  // cases where recomputation had to save bytes

// Returns whether the case ran.
bool check_same_bits(const semantics_case& c) {
  constexpr int steps = 3;
  auto f = make_fixture(c, steps);
  if (!f) return false;
  INFO(c.name());
  auto none = run_local(f->mdl, lowered(*f, recompute_mode::none), f->initial, f->data);
  REQUIRE(none.ok());
  const int S = f->plan->virtual_stages;
  for (recompute_mode mode : {recompute_mode::full, recompute_mode::selective}) {
    INFO("--recompute " << recompute_name(mode));
    auto run = run_local(f->mdl, lowered(*f, mode), f->initial, f->data, {.order_seed = 17});
    INFO((run.ok() ? std::string() : run.message()));
    REQUIRE(run.ok());
    for (int i = 0; i < S * c.w; ++i) {
      INFO("replica " << i / S << ", virtual stage " << i % S);
      CHECK(same_bits(*run->replica_weights[i], *none->replica_weights[i]));
    }
    REQUIRE(run->losses == none->losses);
    // What a stage holds (full: its inputs and, during one backward, one whole stash; selective:
    // each stash less what its backward makes again) is never more than without recomputation.
    // (A zero-bubble stage also holds what each I left for its W, which recomputation does not
    // touch; an mlp's or an embedding's stash is about its input and has nothing to drop.)
    for (int s = 0; s < S; ++s) {
      INFO("virtual stage " << s);
      const stage_stats &n = none->stages[s], &r = run->stages[s];
      CHECK(r.peak_activation_bytes <= n.peak_activation_bytes);
      CHECK(r.peak_inflight == n.peak_inflight);
    }
    // gpt-tiny's stage 0 (the embedding and a transformer block) with two or more stashes at
    // once, under a schedule whose backward is whole: fewer bytes.
    const bool split_backward = splits_backward(c.kind);
    if (c.gpt && c.v == 1 && !split_backward && none->stages[0].peak_inflight >= 2) {
      CHECK(run->stages[0].peak_activation_bytes < none->stages[0].peak_activation_bytes);
      ++fewer_bytes_checked;
    }
  }
  return true;
}

// Snapshots taken under `saving`, each resumed under `resuming`: the uninterrupted run's bits.
void check_resume_across_modes(const semantics_case& c, recompute_mode saving,
                               recompute_mode resuming) {
  constexpr int steps = 5, every = 2;
  auto f = make_fixture(c, steps);
  if (!f) return;
  INFO(c.name() << ": saved under " << recompute_name(saving) << ", resumed under "
                << recompute_name(resuming));
  auto whole = run_local(f->mdl, lowered(*f, recompute_mode::none), f->initial, f->data);
  REQUIRE(whole.ok());
  lowered_run with_cuts = lowered(*f, saving);
  with_cuts.plan.checkpoint = {every, "in-memory", 0};
  std::map<std::int64_t, std::vector<rank_state>> snaps;
  auto saved = run_local(f->mdl, with_cuts, f->initial, f->data,
                         {.order_seed = 3, .on_snapshot = [&](rank_state st) {
                           snaps[st.step].push_back(std::move(st));
                         }});
  REQUIRE(saved.ok());
  REQUIRE(snaps.size() == 2);
  const int S = f->plan->virtual_stages;
  for (auto& [n, states] : snaps) {
    INFO("resumed after step " << n);
    std::sort(states.begin(), states.end(),
              [](const rank_state& x, const rank_state& y) { return x.rank < y.rank; });
    auto resumed = run_local(f->mdl, lowered(*f, resuming), f->initial, f->data,
                             {.order_seed = 9, .resume = std::move(states)});
    INFO((resumed.ok() ? std::string() : resumed.message()));
    REQUIRE(resumed.ok());
    for (int i = 0; i < S * c.w; ++i) {
      INFO("replica " << i / S << ", virtual stage " << i % S);
      CHECK(same_bits(*resumed->replica_weights[i], *whole->replica_weights[i]));
    }
  }
}

}  // namespace

TEST_CASE("recompute full and selective end with the same bits for every schedule: mlp", "[runtime][recompute]") {
  int ran = 0;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 3})
      for (int w : {1, 2}) {
        const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
        for (int m : {p, 2 * p + 1}) ran += check_same_bits({k, p, m, w, v, false});
      }
  CHECK(ran >= 70);
}

TEST_CASE("recompute full and selective end with the same bits for every schedule: gpt-tiny",
          "[runtime][recompute]") {
  int ran = 0;
  for (schedule_kind k : all_kinds)
    for (int w : {1, 2}) {
      const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
      ran += check_same_bits({k, 2, 4, w, v, true});
    }
  CHECK(ran == 2 * static_cast<int>(all_kinds.size()));
  // gpipe, 1f1b, pipedream(-vs), 2bw, cyclic at w = 1 and 2, in both modes
  CHECK(fewer_bytes_checked >= 24);
}

TEST_CASE("a checkpoint resumes across recompute modes bit for bit", "[runtime][recompute]") {
  for (schedule_kind k : {schedule_kind::one_f_one_b, schedule_kind::two_bw,
                          schedule_kind::zb_h2, schedule_kind::pipedream})
    for (auto [saving, resuming] : {std::pair{recompute_mode::full, recompute_mode::full},
                                    std::pair{recompute_mode::full, recompute_mode::none},
                                    std::pair{recompute_mode::none, recompute_mode::full},
                                    std::pair{recompute_mode::selective, recompute_mode::none},
                                    std::pair{recompute_mode::full, recompute_mode::selective}})
      check_resume_across_modes({k, 2, 3, 1, 1, true}, saving, resuming);
}
