// DualPipe on the stage executors, on one thread (run_local): microbatches fed from both ends,
// each stage's two copies meeting at REDUCE on mirrored devices. Every copy ends with the weights
// of the sequential reference, bit for bit, in order and in random message orders, and those are
// the weights of the same pipeline run as 1F1B over twice the replicas (each route a replica),
// also with each overlapped F and B run at once on two threads.
#include <catch2/catch.hpp>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reference.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

struct dualpipe_case {
  bool gpt = false;
  int p = 2, m = 4, w = 1;  // m: the step's microbatches per replica, half on each route
};

// The run's weights of every virtual stage, against the reference and, for each piece, against
// 1F1B with 2w replicas of m/2 microbatches on the same data.
void check(const dualpipe_case& c, std::uint64_t seed, int threads = 0) {
  INFO((c.gpt ? "gpt-tiny" : "mlp") << " p=" << c.p << " m=" << c.m << " w=" << c.w
                                    << " seed=" << seed << " threads=" << threads);
  auto made = make_schedule(schedule_kind::dualpipe, {c.p, c.m, 2, c.w, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  REQUIRE(validate(*plan).ok());
  const int S = plan->virtual_stages, L = plan->route_stages();
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  const auto bounds = even_blocks(mdl.size(), L);  // the model in p pieces, each held twice
  const train_config cfg = semantics_train(steps, c.m / 2, c.gpt);
  const std::int64_t B = 2 * c.m * c.w;
  const bool gpt = c.gpt;
  minibatch_fn data = [gpt, B](std::int64_t t) -> result<minibatch> {
    return semantics_data(gpt, B, t, dtype::f32);
  };
  local_run_options o;
  o.order_seed = seed;
  o.threads = threads;  // with 2, each OVERLAP_F_B pair runs its F and B at once
  auto run = run_local(mdl, local_lowered_run(plan, bounds, cfg), initial, data, std::move(o));
  INFO((run.ok() ? std::string() : run.message()));
  REQUIRE(run.ok());
  CHECK(run->losses.size() == static_cast<std::size_t>(steps));
  auto ref = reference_train(mdl, *plan, bounds, initial, cfg, data);
  REQUIRE(ref.ok());
  auto dp = make_schedule(schedule_kind::one_f_one_b, {c.p, c.m / 2, 1, 2 * c.w, steps});
  REQUIRE(dp.ok());
  auto dp_plan = std::make_shared<const schedule>(lower_communication(*dp));
  auto dp_run = run_local(mdl, local_lowered_run(dp_plan, bounds, cfg), initial, data);
  REQUIRE(dp_run.ok());
  for (int q = 0; q < c.w; ++q)
    for (int s = 0; s < S; ++s) {
      INFO("replica " << q << ", virtual stage " << s);
      const param_snapshot& got = run->replica_weights[static_cast<std::size_t>(q * S + s)];
      REQUIRE(got);
      CHECK(same_bits(*got, (*ref)[static_cast<std::size_t>(s)]));
      CHECK(same_bits(*got, *dp_run->weights[static_cast<std::size_t>(plan->piece_of(s))]));
    }
  // The losses are the step's mean over both routes, as 1F1B's over its 2w replicas.
  CHECK(run->losses == dp_run->losses);
}

}  // namespace

TEST_CASE("dualpipe on the executors equals its reference: mlp",
          "[runtime][semantics]") {
  for (int p : {2, 4})
    for (int m : {2 * p, 2 * p + 2})
      for (int w : {1, 2})
        for (std::uint64_t seed : {0, 1, 7}) check({false, p, m, w}, seed);
}

TEST_CASE("dualpipe on the executors equals its reference: gpt-tiny", "[runtime][semantics]") {
  for (int p : {2, 4})
    for (int w : {1, 2}) check({true, p, 2 * p, w}, 3);
  check({true, 2, 6, 1}, 5, 2);
  check({false, 4, 8, 2}, 1, 2);
}
