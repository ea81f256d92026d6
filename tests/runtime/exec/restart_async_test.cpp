// restart_at_newest on one thread: asynchronous schedules' snapshots keep each stage's newest
// version and optimizer state, record what they drop, and once re-cut resume to the same bits on
// every flush layout; ranks at other steps or stages without their Nth version are refused.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "ops/model/param_split.hpp"
#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reshard.hpp"
#include "runtime/exec/restart_async.hpp"
#include "runtime/lower.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 4, every = 2, m = 4;

lowered_run lowered(schedule_kind kind, int p, int v, int blocks) {
  auto made = make_schedule(kind, schedule_params{p, m, v, 1, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  return local_lowered_run(plan, even_blocks(blocks, plan->virtual_stages),
                           semantics_train(steps, m, true));
}

minibatch_fn data() {
  return [](std::int64_t t) -> result<minibatch> { return semantics_data(true, 2 * m, t, dtype::f32); };
}

// Every rank's snapshot at step `every` of a run of `kind` over 2 stages, in rank order.
std::vector<rank_state> snapshots(const model<float>& mdl, const param_set& initial,
                                  const lowered_run& source) {
  lowered_run saving = source;
  saving.plan.checkpoint = {every, "in-memory", 0};
  std::vector<rank_state> at;
  auto saved = run_local(mdl, saving, initial, data(), {.on_snapshot = [&](rank_state st) {
                                                          if (st.step == every) at.push_back(std::move(st));
                                                        }});
  REQUIRE(saved.ok());
  std::sort(at.begin(), at.end(), [](const rank_state& a, const rank_state& b) { return a.rank < b.rank; });
  return at;
}

bool same_tensor(const tensor& a, const tensor& b) {
  return a.nbytes() == b.nbytes() && (a.nbytes() == 0 || std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0);
}

}  // namespace

TEST_CASE("an asynchronous snapshot restarts from each stage's newest version", "[runtime][reshard]") {
  const model<float> mdl = make_gpt<float>(tiny_gpt(4));
  const param_set initial = mdl.init_params(7);
  for (schedule_kind kind : {schedule_kind::two_bw, schedule_kind::pipedream,
                             schedule_kind::pipedream_vs, schedule_kind::cyclic}) {
    INFO(schedule_name(kind));
    const lowered_run source = lowered(kind, 2, 1, mdl.size());
    std::vector<rank_state> at = snapshots(mdl, initial, source);
    REQUIRE(at.size() == 2);
    // What the restart must keep and drop, read before the snapshots are handed over.
    std::vector<param_snapshot> newest;
    std::vector<tensor> m1;
    std::size_t held = 0, older = 0;
    for (const rank_state& r : at) {
      held += r.held.size();
      for (const stage_state& s : r.stages) {
        REQUIRE(s.latest == every);
        newest.push_back(s.versions.at(s.latest));
        older += s.versions.size() - 1;
        for (const tensor& t : s.moment1) m1.push_back(t.clone());
      }
    }
    CHECK(held > 0);  // the cut of an asynchronous schedule holds microbatches of step 3
    auto restarted = restart_at_newest(std::move(at));
    INFO((restarted.ok() ? std::string() : restarted.message()));
    REQUIRE(restarted.ok());
    CHECK(restarted->step == every);
    std::size_t i = 0, k = 0, dropped_held = 0, dropped_versions = 0;
    for (const rank_state& r : restarted->states) {
      CHECK(r.held.empty());
      CHECK(r.deliver.empty());
      CHECK(r.losses.empty());
      CHECK(r.to_send_f.empty());
      CHECK(r.to_send_b.empty());
      for (const stage_state& s : r.stages) {
        REQUIRE(s.versions.size() == 1);
        CHECK(s.versions.begin()->first == every);
        CHECK(s.versions.begin()->second == newest.at(i++));  // the version itself, not a copy
        CHECK(!s.grads);
        for (const tensor& t : s.moment1) CHECK(same_tensor(t, m1.at(k++)));
        for (std::int64_t u : s.updates) CHECK(u == every);
      }
    }
    for (const restart_drop& d : restarted->dropped) {
      dropped_held += d.microbatches.size();
      dropped_versions += d.versions.size();
      for (const auto& h : d.microbatches) CHECK(h.microbatch >= every * m);  // of later steps
    }
    CHECK(dropped_held == held);
    CHECK(dropped_versions == older);
    const auto record = restart_record(*restarted, schedule_name(kind));
    CHECK(record.at("from_schedule") == std::string(schedule_name(kind)));
    CHECK(record.at("step") == every);

    // Re-cut for flush layouts (2 and 4 stages, one device), each resumes to the same bits.
    std::optional<param_set> first;
    for (const auto& [to_kind, p] : {std::pair{schedule_kind::one_f_one_b, 2},
                                     std::pair{schedule_kind::gpipe, 4},
                                     std::pair{schedule_kind::zb_h1, 2}}) {
      INFO("to " << schedule_name(to_kind) << " p=" << p);
      std::vector<rank_state> copy;
      for (const rank_state& r : restarted->states) {  // reshard reads them; keep the originals
        rank_state c;
        c.rank = r.rank;
        c.step = r.step;
        c.pc = r.pc;
        for (const stage_state& s : r.stages) {
          stage_state cs;
          cs.stage = s.stage;
          cs.latest = s.latest;
          cs.forwards_done = s.forwards_done;
          cs.versions = s.versions;
          for (const tensor& t : s.moment1) cs.moment1.push_back(t.clone());
          for (const tensor& t : s.moment2) cs.moment2.push_back(t.clone());
          cs.updates = s.updates;
          c.stages.push_back(std::move(cs));
        }
        copy.push_back(std::move(c));
      }
      const lowered_run t = lowered(to_kind, p, 1, mdl.size());
      auto states = reshard(mdl, source, copy, t);
      INFO((states.ok() ? std::string() : states.message()));
      REQUIRE(states.ok());
      auto resumed = run_local(mdl, t, initial, data(), {.resume = std::move(*states)});
      INFO((resumed.ok() ? std::string() : resumed.message()));
      REQUIRE(resumed.ok());
      for (double loss : resumed->losses) CHECK(std::isfinite(loss));
      auto joined = join_params(resumed->weights);
      REQUIRE(joined.ok());
      if (!first) first = std::move(*joined);
      else CHECK(same_bits(*joined, *first));
    }
  }
}

TEST_CASE("a restart refuses ranks at other steps and stages without their newest version", "[runtime][reshard]") {
  auto state = [](int rank, std::int64_t step, int latest) {
    rank_state r;
    r.rank = rank;
    r.step = step;
    stage_state s;
    s.stage = rank;
    s.latest = latest;
    s.versions[latest] = std::make_shared<const param_set>();
    r.stages.push_back(std::move(s));
    return r;
  };
  {
    std::vector<rank_state> from;
    from.push_back(state(0, 2, 2));
    from.push_back(state(1, 3, 3));
    auto r = restart_at_newest(std::move(from));
    REQUIRE(!r.ok());
    CHECK_THAT(r.message(), Catch::Contains("rank 1") && Catch::Contains("step 3"));
  }
  {
    std::vector<rank_state> from;
    from.push_back(state(0, 2, 1));
    auto r = restart_at_newest(std::move(from));
    REQUIRE(!r.ok());
    CHECK_THAT(r.message(), Catch::Contains("stage 0") && Catch::Contains("version 2"));
  }
  {
    std::vector<rank_state> from;
    from.push_back(state(0, 2, 2));
    from.back().stages.back().versions.clear();
    auto r = restart_at_newest(std::move(from));
    REQUIRE(!r.ok());
    CHECK_THAT(r.message(), Catch::Contains("newest"));
  }
  CHECK(!restart_at_newest({}).ok());
}
