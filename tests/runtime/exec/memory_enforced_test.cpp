// The run plan's memory limit enforced by each CPU rank's memory account: a run whose ranks need
// more than it stops naming the rank and the limit; with room, the run's weights are those of a
// run without a limit, and each rank's measured peak (device_peak_bytes) is what it held.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/lower.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

TEST_CASE("a rank that needs more than the plan's memory limit stops the run naming it", "[runtime][memory]") {
  constexpr int steps = 2;
  auto made = make_schedule(schedule_kind::one_f_one_b, schedule_params{2, 4, 1, 1, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  const model<float> mdl = make_gpt<float>(tiny_gpt(2));
  const param_set initial = mdl.init_params(7);
  const train_config cfg = semantics_train(steps, 4, true);
  minibatch_fn data = [](std::int64_t t) -> result<minibatch> {
    return semantics_data(true, 8, t, dtype::f32);
  };
  lowered_run run = local_lowered_run(plan, even_blocks(mdl.size(), 2), cfg);
  auto free_run = run_local(mdl, run, initial, data);
  REQUIRE(free_run.ok());
  std::int64_t most = 0;
  for (const stage_stats& s : free_run->stages) {
    CHECK(s.device_peak_bytes > 0);  // what each rank's account measured
    most = std::max(most, s.device_peak_bytes);
  }
  // A limit at the largest measured peak: the same run fits and ends with the same bits.
  run.plan.memory_limit = most;
  auto roomy = run_local(mdl, run, initial, data);
  INFO((roomy.ok() ? std::string() : roomy.message()));
  REQUIRE(roomy.ok());
  REQUIRE(roomy->replica_weights.size() == free_run->replica_weights.size());
  for (std::size_t i = 0; i < roomy->replica_weights.size(); ++i)
    CHECK(std::memcmp(roomy->replica_weights[i]->arena().bytes(),
                      free_run->replica_weights[i]->arena().bytes(),
                      roomy->replica_weights[i]->arena().nbytes()) == 0);
  // Half of it: some rank is refused an allocation, and the run says which and why.
  run.plan.memory_limit = most / 2;
  auto tight = run_local(mdl, run, initial, data);
  REQUIRE_FALSE(tight.ok());
  CHECK(tight.message().find("rank ") != std::string::npos);
  CHECK(tight.message().find("over its memory limit of " + std::to_string(most / 2) + " bytes") !=
        std::string::npos);
}
