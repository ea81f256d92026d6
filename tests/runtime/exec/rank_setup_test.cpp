// read_lowered_run: a plan's JSON from another process is read, checked and lowered once, to the
// same programs and boundaries as the process that wrote it lowered.
#include <catch2/catch.hpp>

#include "runtime/exec/rank_setup.hpp"
#include "tests/runtime/mlp_plan_fixture.hpp"

using namespace pipeworks;

namespace {

run_plan mlp_plan() {  // the shared plan, split after the first block
  run_plan p = test::mlp_plan();
  p.split = {0, 1};
  return p;
}

}  // namespace

TEST_CASE("read_lowered_run lowers a plan's JSON as lower_run lowered the plan", "[runtime]") {
  auto here = lower_run(mlp_plan(), 3);
  REQUIRE(here);
  auto there = read_lowered_run(to_json_text(here->plan), "plan.json", 3);
  REQUIRE(there);
  CHECK(to_json_text(there->plan) == to_json_text(here->plan));
  CHECK(there->boundaries == here->boundaries);
  CHECK(there->credit_window == here->credit_window);
  CHECK(there->programs->programs == here->programs->programs);
}

TEST_CASE("read_lowered_run refuses a plan its check refuses, naming the field", "[runtime]") {
  run_plan bad = mlp_plan();
  bad.data.batch = 7;
  auto read = read_lowered_run(to_json_text(bad), "plan.json");
  REQUIRE_FALSE(read);
  CHECK(read.message().find("data.batch") != std::string::npos);
}

namespace {

// The mlp plan as 1F1B over 2 stages and 2 replicas, rank r on devices[r] in processes[r].
run_plan replicated(std::vector<const char*> devices, std::vector<int> processes = {0, 0, 0, 0}) {
  run_plan p = mlp_plan();
  p.schedule = schedule_kind::one_f_one_b;
  p.replicas = 2;
  for (std::size_t r = 0; r < devices.size(); ++r)
    p.ranks.push_back(rank_placement{devices[r], 1.0, "", processes[r]});
  return p;
}

std::optional<device> reduce_device(const run_plan& p, int piece) {
  auto run = lower_run(p, 3);
  if (!run) FAIL(run.message());
  return gpu_reduce_device(*run, piece);
}

}  // namespace

TEST_CASE("replicas all on GPUs of the driver's process are summed on a GPU", "[runtime]") {
  // Ranks 0 and 1 are replica 0's stages 0 and 1: each stage's sum is made on that rank's GPU.
  const run_plan p = replicated({"cuda:1", "cuda:0", "cuda:0", "cuda:1"});
  CHECK(reduce_device(p, 0) == device{device_kind::cuda, 1});
  CHECK(reduce_device(p, 1) == device{device_kind::cuda, 0});
  auto run = lower_run(p, 3);
  REQUIRE(run);
  for (int r = 0; r < 4; ++r) CHECK(rank_setup(*run, r).reduce_on_gpu);
}

TEST_CASE("the host sums when a replica is on the CPU or in another process", "[runtime]") {
  CHECK_FALSE(reduce_device(replicated({"cuda:0", "cuda:0", "cpu", "cuda:0"}), 0));
  CHECK_FALSE(reduce_device(replicated({"cpu", "cpu", "cpu", "cpu"}), 0));
  CHECK_FALSE(reduce_device(replicated({}), 0));
  run_plan workers = replicated({"cuda:0", "cuda:0", "cuda:0", "cuda:0"}, {0, 0, 1, 1});
  workers.processes.workers = {"127.0.0.1:4000"};
  CHECK_FALSE(reduce_device(workers, 0));
  run_plan zero = replicated({"cuda:0", "cuda:0", "cuda:0", "cuda:0"});
  zero.zero = 1;
  CHECK_FALSE(reduce_device(zero, 0));
  run_plan chain = replicated({"cuda:0", "cuda:0", "cuda:0", "cuda:0"});
  chain.schedule = schedule_kind::cyclic;
  chain.reduce = reduce_mode::p2p;
  CHECK_FALSE(reduce_device(chain, 0));
  run_plan one = replicated({"cuda:0", "cuda:0"});
  one.replicas = 1;
  CHECK_FALSE(reduce_device(one, 0));
  auto run = lower_run(replicated({"cuda:0", "cuda:0", "cpu", "cuda:0"}), 3);
  REQUIRE(run);
  CHECK_FALSE(rank_setup(*run, 0).reduce_on_gpu);
}
