// reshard on one thread: a flush schedule's snapshots at a step boundary, re-cut for every other
// flush schedule and stage count (and ZeRO stage, each tensor's moments from its owner), resume
// to the uninterrupted run's bits; an asynchronous schedule's snapshots (microbatches and
// versions across steps) are refused naming the rank.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "ops/train/zero_shards.hpp"
#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reshard.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/lower.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 4, every = 2, m = 4;

struct layout {
  schedule_kind kind;
  int p, v;
};

lowered_run lowered(const layout& l, int blocks) {
  auto made = make_schedule(l.kind, schedule_params{l.p, m, l.v, 1, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  return local_lowered_run(plan, even_blocks(blocks, plan->virtual_stages),
                           semantics_train(steps, m, true));
}

// A layout of w replicas under ZeRO stage `zero`, m / w microbatches per replica (the same
// minibatch of 2m samples).
lowered_run lowered_zero(const layout& l, int w, int zero, int blocks) {
  auto made = make_schedule(l.kind, schedule_params{l.p, m / w, l.v, w, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  lowered_run r = local_lowered_run(plan, even_blocks(blocks, plan->virtual_stages),
                                    semantics_train(steps, m / w, true));
  r.plan.zero = zero;
  return r;
}

minibatch_fn data() {
  return [](std::int64_t t) -> result<minibatch> { return semantics_data(true, 2 * m, t, dtype::f32); };
}

}  // namespace

TEST_CASE("a flush schedule's snapshots re-cut for another layout resume bit for bit", "[runtime][reshard]") {
  const model<float> mdl = make_gpt<float>(tiny_gpt(4));
  const param_set initial = mdl.init_params(7);
  const layout from{schedule_kind::one_f_one_b, 2, 1};
  const lowered_run source = lowered(from, mdl.size());
  auto whole = run_local(mdl, source, initial, data());
  REQUIRE(whole.ok());
  lowered_run saving = source;
  saving.plan.checkpoint = {every, "in-memory", 0};
  std::map<std::int64_t, std::vector<rank_state>> snaps;
  auto saved = run_local(mdl, saving, initial, data(), {.on_snapshot = [&](rank_state st) {
                                                          snaps[st.step].push_back(std::move(st));
                                                        }});
  REQUIRE(saved.ok());
  REQUIRE(snaps.count(every));
  std::vector<rank_state>& at = snaps[every];
  std::sort(at.begin(), at.end(), [](const rank_state& a, const rank_state& b) { return a.rank < b.rank; });
  auto joined = join_params(whole->weights);
  REQUIRE(joined.ok());
  const param_set& want = *joined;
  int ran = 0;
  for (const layout& to : {layout{schedule_kind::gpipe, 4, 1}, layout{schedule_kind::one_f_one_b, 3, 1},
                           layout{schedule_kind::interleaved, 2, 2}, layout{schedule_kind::zb_h1, 4, 1},
                           layout{schedule_kind::zb_h2, 2, 1}, layout{schedule_kind::bfs, 2, 2},
                           layout{schedule_kind::zbv, 2, 2}, layout{schedule_kind::dualpipev, 2, 2}}) {
    INFO("to " << schedule_name(to.kind) << " p=" << to.p << " v=" << to.v);
    const lowered_run target = lowered(to, mdl.size());
    auto states = reshard(mdl, source, at, target);
    INFO((states.ok() ? std::string() : states.message()));
    REQUIRE(states.ok());
    REQUIRE(static_cast<int>(states->size()) == target.ranks());
    auto resumed = run_local(mdl, target, initial, data(), {.resume = std::move(*states)});
    INFO((resumed.ok() ? std::string() : resumed.message()));
    REQUIRE(resumed.ok());
    CHECK(same_bits(*join_params(resumed->weights), want));
    ++ran;
  }
  CHECK(ran == 8);
}

TEST_CASE("an asynchronous schedule's snapshots are refused naming the rank", "[runtime][reshard]") {
  const model<float> mdl = make_gpt<float>(tiny_gpt(4));
  const param_set initial = mdl.init_params(7);
  const lowered_run source = lowered({schedule_kind::two_bw, 2, 1}, mdl.size());
  lowered_run saving = source;
  saving.plan.checkpoint = {every, "in-memory", 0};
  std::vector<rank_state> at;
  auto saved = run_local(mdl, saving, initial, data(), {.on_snapshot = [&](rank_state st) {
                                                          if (st.step == every) at.push_back(std::move(st));
                                                        }});
  REQUIRE(saved.ok());
  REQUIRE(!at.empty());
  auto states = reshard(mdl, source, at, lowered({schedule_kind::gpipe, 4, 1}, mdl.size()));
  REQUIRE(!states.ok());
  CHECK_THAT(states.message(), Catch::Contains("rank") && Catch::Contains("step boundary"));
}

TEST_CASE("ZeRO snapshots re-cut take each tensor's moments from its owner and shard them anew", "[runtime][reshard]") {
  const model<float> mdl = make_gpt<float>(tiny_gpt(4));
  const param_set initial = mdl.init_params(7);
  const lowered_run source = lowered_zero({schedule_kind::one_f_one_b, 2, 1}, 2, 1, mdl.size());
  auto whole = run_local(mdl, source, initial, data());
  REQUIRE(whole.ok());
  lowered_run saving = source;
  saving.plan.checkpoint = {every, "in-memory", 0};
  std::vector<rank_state> at;
  auto saved = run_local(mdl, saving, initial, data(), {.on_snapshot = [&](rank_state st) {
                                                          if (st.step == every) at.push_back(std::move(st));
                                                        }});
  REQUIRE(saved.ok());
  std::sort(at.begin(), at.end(),
            [](const rank_state& a, const rank_state& b) { return a.rank < b.rank; });
  REQUIRE(at.size() == 4);
  // The shards as written: a replica's non-owned tensors have no moments and no updates.
  std::size_t empty = 0;
  for (const rank_state& r : at)
    for (const stage_state& s : r.stages)
      for (std::size_t e = 0; e < s.updates.size(); ++e) empty += s.moment1[e].empty() ? 1 : 0;
  REQUIRE(empty > 0);
  auto joined = join_params(whole->weights);
  REQUIRE(joined.ok());
  const param_set& want = *joined;
  struct target {
    layout l;
    int zero;
  };
  for (const target& to : {target{{schedule_kind::gpipe, 4, 1}, 2},
                           target{{schedule_kind::zb_h1, 2, 1}, 0},
                           target{{schedule_kind::interleaved, 2, 2}, 1}}) {
    INFO("to " << schedule_name(to.l.kind) << " p=" << to.l.p << " v=" << to.l.v << " zero "
               << to.zero);
    const lowered_run t = lowered_zero(to.l, 2, to.zero, mdl.size());
    auto states = reshard(mdl, source, at, t);
    INFO((states.ok() ? std::string() : states.message()));
    REQUIRE(states.ok());
    // Each tensor's moments on exactly its owners: every replica unsharded, one under ZeRO.
    std::map<std::pair<int, std::size_t>, int> keepers;
    for (const rank_state& r : *states) {
      const int replica = r.rank / to.l.p;
      for (const stage_state& s : r.stages) {
        const int shards = to.zero > 0 ? 2 : 1;
        const auto mine = owned_by(shard_owners(*s.versions.at(s.latest), shards),
                                   shards > 1 ? replica : 0);
        for (std::size_t e = 0; e < s.updates.size(); ++e) {
          CHECK(s.moment1[e].empty() == !mine[e]);
          if (!mine[e]) CHECK(s.moment2[e].empty());  // (SGD keeps no second moment at all)
          CHECK(s.updates[e] == (mine[e] ? every : 0));
          keepers[{s.stage, e}] += mine[e] ? 1 : 0;
        }
      }
    }
    for (const auto& [key, n] : keepers) CHECK(n == (to.zero > 0 ? 1 : 2));
    auto resumed = run_local(mdl, t, initial, data(), {.resume = std::move(*states)});
    INFO((resumed.ok() ? std::string() : resumed.message()));
    REQUIRE(resumed.ok());
    CHECK(same_bits(*join_params(resumed->weights), want));
  }
}
