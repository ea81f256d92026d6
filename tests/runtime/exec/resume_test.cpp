// Checkpoints as consistent cuts, on one thread: for every schedule, a run restored from the
// snapshots its ranks recorded after step N (taken under one message order, resumed under
// another) ends with weights, optimizer state and per-step losses bit-identical to a run that
// was never interrupted; on the CPU, and with every rank on a GPU.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/checkpoint/rank_file.hpp"
#include "runtime/exec/local_run.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

struct resume_case {
  semantics_case c;
  int steps;
  int every;
  bool through_files = false;  // write each snapshot to a rank file and read it back
  bool gpu = false;            // every rank on cuda:0
};

// A rank_state after a trip through its checkpoint file.
template <class T>
rank_state through_file(const rank_state& st, const model<T>& m, const std::vector<int>& b) {
  const scratch_dir dir("pipeworks-resume-test");
  const std::string path = dir / ("rank-" + std::to_string(st.rank) + ".safetensors");
  auto written = write_rank_file(path, st);
  INFO((written.ok() ? std::string() : written.message()));
  REQUIRE(written.ok());
  auto back = read_rank_file(path, m, b);
  INFO((back.ok() ? std::string() : back.message()));
  REQUIRE(back.ok());
  return std::move(*back);
}

void check_resume(const resume_case& rc) {
  const semantics_case& c = rc.c;
  auto made = make_schedule(c.kind, c.params(rc.steps));
  if (!made) return;
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  REQUIRE(validate(*plan).ok());
  const int S = plan->virtual_stages;
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  const std::vector<int> b = even_blocks(mdl.size(), plan->route_stages());
  train_config cfg = semantics_train(rc.steps, c.m, c.gpt);
  if (c.kind == schedule_kind::two_bw || c.kind == schedule_kind::pipedream)
    cfg.optim = default_optimizer_config(optimizer_kind::adamw);  // moments to restore too
  const std::int64_t B = 2 * c.m * c.w;
  minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
    return semantics_data(c.gpt, B, t, dtype::f32);
  };
  INFO(c.name() << " steps=" << rc.steps << " every=" << rc.every << (rc.gpu ? " on cuda:0" : ""));

  lowered_run plain = local_lowered_run(plan, b, cfg);
  if (rc.gpu) plain.plan.ranks.assign(static_cast<std::size_t>(c.p * c.w), rank_placement{"cuda:0", 1.0, "", 0});
  auto whole = run_local(mdl, plain, initial, data, {.order_seed = 11});
  INFO((whole.ok() ? std::string() : whole.message()));
  REQUIRE(whole.ok());

  lowered_run saving = plain;
  saving.plan.checkpoint = {rc.every, "in-memory", 0};
  std::map<std::int64_t, std::vector<rank_state>> snaps;
  auto saved = run_local(mdl, saving, initial, data,
                         {.order_seed = 23, .on_snapshot = [&](rank_state st) {
                           if (rc.through_files) st = through_file(st, mdl, b);
                           snaps[st.step].push_back(std::move(st));
                         }});
  REQUIRE(saved.ok());
  // Taking snapshots changes nothing, and every checkpoint completes.
  for (int s = 0; s < S; ++s) CHECK(same_bits(*saved->weights[s], *whole->weights[s]));
  std::vector<std::int64_t> want;
  for (std::int64_t n = rc.every; n < rc.steps; n += rc.every) want.push_back(n);
  CHECK(saved->checkpoints_due == want);
  REQUIRE(snaps.size() == want.size());

  for (auto& [n, states] : snaps) {
    INFO("resumed after step " << n);
    REQUIRE(static_cast<int>(states.size()) == plan->ranks());
    std::sort(states.begin(), states.end(),
              [](const rank_state& x, const rank_state& y) { return x.rank < y.rank; });
    auto resumed = run_local(mdl, plain, initial, data,
                             {.order_seed = 5 + static_cast<std::uint64_t>(n),
                              .resume = std::move(states)});
    REQUIRE(resumed.ok());
    for (int s = 0; s < S; ++s) {
      INFO("virtual stage " << s);
      CHECK(same_bits(*resumed->weights[s], *whole->weights[s]));
      for (int r = 1; r < c.w; ++r)
        CHECK(same_bits(*resumed->replica_weights[r * S + s], *whole->replica_weights[r * S + s]));
    }
    REQUIRE(resumed->losses.size() == static_cast<std::size_t>(rc.steps - n));
    for (std::size_t i = 0; i < resumed->losses.size(); ++i) {
      CHECK(resumed->losses[i] == whole->losses[static_cast<std::size_t>(n) + i]);
      CHECK(resumed->steps[i].grad_norm == whole->steps[static_cast<std::size_t>(n) + i].grad_norm);
    }
  }
}

}  // namespace

TEST_CASE("every schedule resumes from its checkpoint snapshots bit for bit: mlp", "[runtime][checkpoint]") {
  int ran = 0;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 3})
      for (int w : {1, 2})
        for (int m : {1, p, 2 * p + 1}) {
          const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
          const resume_case rc{{k, p, m, w, v, false}, 5, 1, p == 3 && m == p && w == 2};
          ran += make_schedule(k, schedule_params{p, m, v, w, 5}).ok();
          check_resume(rc);
        }
  CHECK(ran >= 60);
}

TEST_CASE("every schedule resumes from its checkpoint snapshots bit for bit: gpt-tiny", "[runtime][checkpoint]") {
  for (schedule_kind k : all_kinds) {
    const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
    check_resume({{k, 2, 4, 2, v, true}, 4, 2, true});
  }
}

TEST_CASE("every schedule with GPU stages resumes from its checkpoint files bit for bit", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  for (schedule_kind k : all_kinds) {
    const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
    check_resume({{k, 2, 4, 2, v, true}, 4, 2, true, true});
    check_resume({{k, 2, 3, 1, v, false}, 4, 1, true, true});
  }
}
