// OVERLAP_F_B in the executor: DualPipeV's overlapped forward and backward, run at once on each
// rank's two threads, end with the sequential reference's weights bit for bit.
#include <catch2/catch.hpp>

#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reference.hpp"
#include "runtime/lower.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

void check_overlapped(bool gpt, int p, int m, int w, int threads) {
  const int steps = 2;
  auto made = make_schedule(schedule_kind::dualpipev, schedule_params{p, m, 2, w, steps});
  REQUIRE(made.ok());
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  REQUIRE(validate(*plan).ok());
  const int S = plan->virtual_stages;
  model<float> mdl = gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  const auto b = even_blocks(mdl.size(), S);
  const train_config cfg = semantics_train(steps, m, gpt);
  minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
    return semantics_data(gpt, 2 * m * w, t, dtype::f32);
  };
  INFO((gpt ? "gpt-tiny" : "mlp") << " p=" << p << " m=" << m << " w=" << w
                                  << " threads=" << threads);
  auto run = run_local(mdl, local_lowered_run(plan, b, cfg), initial, data,
                       {.order_seed = 3, .threads = threads});
  REQUIRE(run.ok());
  auto ref = reference_train(mdl, *made, b, initial, cfg, data);
  REQUIRE(ref.ok());
  for (int s = 0; s < S; ++s) CHECK(same_bits(*run->weights[s], (*ref)[s]));
}

}  // namespace

TEST_CASE("dualpipev with overlapped pairs on two threads equals its sequential reference",
          "[runtime][semantics]") {
  for (bool gpt : {false, true})
    for (int w : {1, 2}) {
      check_overlapped(gpt, 2, 4, w, 2);
      check_overlapped(gpt, 2, 5, w, 2);
    }
  check_overlapped(false, 3, 7, 1, 2);
  check_overlapped(true, 3, 6, 1, 3);
}
