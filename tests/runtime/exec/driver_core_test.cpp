// driver_core after a resume, where one replica may ask for step N+1 before another asks for step
// N: both are dealt, a second request is refused, and a step nobody asked for counts its samples.
#include "runtime/exec/driver_core.hpp"

#include <catch2/catch.hpp>
#include <memory>

#include "runtime/lower.hpp"

using namespace pipeworks;

namespace {

constexpr std::int64_t batch = 8;

std::shared_ptr<const schedule> cyclic_programs(int steps) {
  auto s = make_schedule(schedule_kind::cyclic, schedule_params{2, 2, 1, 2, steps});
  REQUIRE(s);
  return std::make_shared<const schedule>(lower_communication(*s));
}

minibatch_fn rows_of_step() {
  return [](std::int64_t) -> result<minibatch> {
    minibatch mb;
    mb.inputs = tensor({batch, 3});
    mb.targets = tensor({batch, 3}, dtype::i32);
    return mb;
  };
}

}  // namespace

TEST_CASE("a resumed driver deals steps in whatever order the replicas ask", "[runtime][exec]") {
  // Resumed after step 8 (cyclic, p 2, w 2, m 2): replica 1 asks for microbatch 18 (step 9) before
  // replica 0 asks for 17 (step 8).
  driver_core d(cyclic_programs(40), rows_of_step(), {}, 8, 8 * batch);
  std::vector<outgoing> out;
  REQUIRE(d.receive(input_request{1, 18}, out).ok());
  const status first = d.receive(input_request{0, 17}, out);
  INFO(first.message());
  CHECK(first.ok());
  const status again = d.receive(input_request{0, 17}, out);
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.message(), Catch::Contains("asked for twice"));
  const status before = d.receive(input_request{0, 15}, out);
  REQUIRE_FALSE(before.ok());
  CHECK_THAT(before.message(), Catch::Contains("outside the run's steps"));
}

TEST_CASE("a resumed driver counts the samples of a step whose inputs nobody asked for", "[runtime][exec]") {
  // Every microbatch of step 8 was held at the cut: only its losses and step reports come.
  driver_core d(cyclic_programs(40), rows_of_step(), {}, 8, 8 * batch);
  std::vector<outgoing> out;
  for (int replica = 0; replica < 2; ++replica)
    for (int k = 0; k < 2; ++k) REQUIRE(d.receive(loss_report{replica, 16 + k, 1.0}, out).ok());
  for (int stage = 0; stage < 2; ++stage)
    REQUIRE(d.receive(step_report{stage, 0, 8, 1.0, 1e-3, {}}, out).ok());
  REQUIRE(d.steps_done() == 9);
  CHECK(d.samples() == 9 * batch);
  CHECK(d.samples_at(9) == 9 * batch);
  // Step 8 is complete: asking for one of its microbatches now is a second request.
  const status late = d.receive(input_request{0, 17}, out);
  REQUIRE_FALSE(late.ok());
  CHECK_THAT(late.message(), Catch::Contains("asked for twice"));
}
