// Failures end a run quickly with an error that names the stage, the replica, the action and the
// cause: an exception in a stage, a non-finite loss, and a stage actor that dies without a word.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "actors/pipeline.hpp"
#include "tests/actors/fixtures.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

struct failed_run {
  std::string message;
  double wall_s = 0;
};

failed_run run_with_fault(fault_kind kind, const char* at, bool detached = true, int replica = 0,
                          int replicas = 1) {
  const model<float> net = small_mlp();
  run_plan o = one_f_one_b(2, 4, 3);
  o.detached = detached;
  o.replicas = replicas;
  pipeline_hooks hooks;
  hooks.fault.kind = kind;
  hooks.fault.replica = replica;
  hooks.fault.at = parse_action(at).value();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = train_pipeline<float>(net, net.init_params(4), o, synthetic_data(), {}, hooks);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(r.ok());
  return {r.message(), wall};
}

}  // namespace

// The whole run of this tiny model takes milliseconds, so its wall time bounds the time from the
// fault to the error; the bound is generous so that a loaded machine does not fail the test.
TEST_CASE("an exception in a stage ends the run with an error naming it", "[actors]") {
  for (bool detached : {true, false}) {
    CAPTURE(detached);
    auto f = run_with_fault(fault_kind::exception, "1F2", detached);
    CHECK_THAT(f.message, Catch::Contains("stage 1") && Catch::Contains("replica 0") &&
                              Catch::Contains("1F2") && Catch::Contains("injected fault"));
    CHECK(f.wall_s < 60.0);  // it ends rather than hangs (a guard, not a timing target)
  }
  auto f = run_with_fault(fault_kind::exception, "0B2");
  CHECK_THAT(f.message, Catch::Contains("stage 0") && Catch::Contains("replica 0") &&
                            Catch::Contains("0B2") && Catch::Contains("injected fault"));
  CHECK(f.wall_s < 60.0);  // it ends rather than hangs (a guard, not a timing target)
}

TEST_CASE("a non-finite loss ends the run with an error naming the stage", "[actors]") {
  auto f = run_with_fault(fault_kind::nan, "1F1");
  CHECK_THAT(f.message, Catch::Contains("stage 1") && Catch::Contains("replica 0") &&
                            Catch::Contains("1F1") && Catch::Contains("not finite"));
  CHECK(f.wall_s < 60.0);  // it ends rather than hangs (a guard, not a timing target)
}

TEST_CASE("a stage actor that dies is named by the driver", "[actors]") {
  for (bool detached : {true, false}) {
    CAPTURE(detached);
    auto f = run_with_fault(fault_kind::kill, "0B1", detached);
    CHECK_THAT(f.message, Catch::Contains("stage 0") && Catch::Contains("replica 0") &&
                              Catch::Contains("0B1") && Catch::Contains("died"));
    CHECK(f.wall_s < 60.0);  // it ends rather than hangs (a guard, not a timing target)
  }
  auto f = run_with_fault(fault_kind::kill, "1STEP", true, 1, 2);
  CHECK_THAT(f.message, Catch::Contains("stage 1") && Catch::Contains("replica 1") &&
                            Catch::Contains("1STEP") && Catch::Contains("died"));
  CHECK(f.wall_s < 60.0);  // it ends rather than hangs (a guard, not a timing target)
}
