// Activation offload in the executor (executor_setup::offload): each held stash goes to the host
// after its forward and comes back before its backward. A plan refuses it on CPU ranks, so this
// sets it on the lowered run directly, where the copies are host to host: the bookkeeping runs
// without a GPU. For every schedule, w in {1, 2}, gpt-tiny, with and without recomputation: the
// bits and the held bytes of the run without it; a checkpoint taken with it resumes without it.
#include <catch2/catch.hpp>
#include <algorithm>
#include <map>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/lower.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

using fixture = case_run;

// The case's run, AdamW for every kind.
std::optional<fixture> make_fixture(const semantics_case& c, int steps) {
  return make_case_run(c, steps, true);
}

lowered_run lowered(const fixture& f, recompute_mode mode, bool offload) {
  lowered_run run = local_lowered_run(f.plan, f.bounds, f.cfg);
  run.plan.recompute = mode;
  run.plan.offload.activations = offload;
  return run;
}

bool check_same_bits(const semantics_case& c, recompute_mode mode) {
  constexpr int steps = 3;
  auto f = make_fixture(c, steps);
  if (!f) return false;
  INFO(c.name() << ", recompute " << recompute_name(mode));
  auto kept = run_local(f->mdl, lowered(*f, mode, false), f->initial, f->data);
  REQUIRE(kept.ok());
  auto off = run_local(f->mdl, lowered(*f, mode, true), f->initial, f->data, {.order_seed = 5});
  INFO((off.ok() ? std::string() : off.message()));
  REQUIRE(off.ok());
  const int S = f->plan->virtual_stages;
  for (int i = 0; i < S * c.w; ++i) {
    INFO("replica " << i / S << ", virtual stage " << i % S);
    CHECK(same_bits(*off->replica_weights[i], *kept->replica_weights[i]));
  }
  CHECK(off->losses == kept->losses);
  for (int s = 0; s < S; ++s) {  // the bytes held move; the stash counted stays the same
    CHECK(off->stages[s].peak_activation_bytes == kept->stages[s].peak_activation_bytes);
    CHECK(off->stages[s].peak_inflight == kept->stages[s].peak_inflight);
  }
  return true;
}

}  // namespace

TEST_CASE("activation offload keeps the bits of every schedule with and without recomputation",
          "[runtime][offload]") {
  int ran = 0;
  for (schedule_kind k : all_kinds)
    for (int w : {1, 2}) {
      const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
      for (recompute_mode mode : {recompute_mode::none, recompute_mode::full, recompute_mode::selective})
        ran += check_same_bits({k, 2, 4, w, v, true}, mode);
    }
  CHECK(ran >= 30);
}

TEST_CASE("a checkpoint taken with activation offload resumes without it bit for bit",
          "[runtime][offload]") {
  constexpr int steps = 5, every = 2;
  for (schedule_kind k : {schedule_kind::one_f_one_b, schedule_kind::two_bw, schedule_kind::zb_h1}) {
    const semantics_case c{k, 2, 4, 1, default_chunks(k), true};
    auto f = make_fixture(c, steps);
    REQUIRE(f);
    INFO(c.name());
    auto whole = run_local(f->mdl, lowered(*f, recompute_mode::none, false), f->initial, f->data);
    REQUIRE(whole.ok());
    lowered_run with_cuts = lowered(*f, recompute_mode::none, true);
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
      auto resumed = run_local(f->mdl, lowered(*f, recompute_mode::none, false), f->initial, f->data,
                               {.order_seed = 9, .resume = std::move(states)});
      INFO((resumed.ok() ? std::string() : resumed.message()));
      REQUIRE(resumed.ok());
      for (int i = 0; i < S; ++i) CHECK(same_bits(*resumed->replica_weights[i], *whole->replica_weights[i]));
    }
  }
}
