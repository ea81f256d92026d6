// The semantics tests with GPU stages: every schedule, its ranks on the GPU (or a mixed pipeline,
// stage 0 on the CPU and the rest on the GPU), ends with the weights of the sequential reference
// (on the CPU) within the float tolerance of the CPU runs. Skipped without a GPU.
#include <catch2/catch.hpp>
#include <memory>

#include "runtime/exec/local_run.hpp"
#include "runtime/exec/reference.hpp"
#include "runtime/validate.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

// How the ranks are placed: all on cuda:0, stage 0 of each replica on the CPU, or rank r on
// cuda:(r % 2) (two GPUs of one process: tensors cross by peer copy).
enum class placement { gpu, mixed, two_gpus };

const char* rank_device(placement where, int r, int p) {
  switch (where) {
    case placement::gpu: return "cuda:0";
    case placement::mixed: return r % p == 0 ? "cpu" : "cuda:0";
    case placement::two_gpus: return r % 2 == 0 ? "cuda:0" : "cuda:1";
  }
  return "cpu";
}

// The run's final weights (on the host), checked against the sequential reference.
std::vector<param_snapshot> check_on_gpu(const semantics_case& c, placement where) {
  auto made = make_schedule(c.kind, c.params(steps));
  if (!made) return {};  // the generator does not permit these parameters
  auto plan = std::make_shared<const schedule>(lower_communication(*made));
  REQUIRE(validate(*plan).ok());
  const int S = plan->virtual_stages;
  model<float> mdl = c.gpt ? make_gpt<float>(tiny_gpt(S)) : make_mlp<float>(small_mlp());
  const param_set initial = mdl.init_params(7);
  const std::vector<int> b = even_blocks(mdl.size(), plan->route_stages());
  const train_config cfg = semantics_train(steps, c.m, c.gpt);
  const std::int64_t B = 2 * c.m * c.w;
  minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
    return semantics_data(c.gpt, B, t, dtype::f32);
  };
  lowered_run run = local_lowered_run(plan, b, cfg);
  for (int r = 0; r < c.p * c.w; ++r)
    run.plan.ranks.push_back(rank_placement{rank_device(where, r, c.p), 1.0, "", 0});
  INFO(c.name() << (where == placement::mixed     ? " (stage 0 on the CPU)"
                    : where == placement::two_gpus ? " (on two GPUs)"
                                                   : " (all on the GPU)"));
  auto got = run_local(mdl, run, initial, data);
  REQUIRE(got.ok());
  auto ref = reference_train(mdl, *made, b, initial, cfg, data);
  REQUIRE(ref.ok());
  for (int s = 0; s < S; ++s) {
    INFO("virtual stage " << s);
    REQUIRE(got->stages[s].steps == steps);
    REQUIRE(got->weights[s]->where() == device::cpu());
    CHECK(max_relative_difference<float>(*got->weights[s], (*ref)[s]) <= 1e-5);
  }
  return got->weights;
}

std::vector<semantics_case> gpu_grid(bool gpt) {
  std::vector<semantics_case> out;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 4})
      for (int w : {1, 2}) {
        const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
        out.push_back({k, p, p, w, v, gpt});
        if (p == 2) out.push_back({k, p, 2 * p + 1, w, v, gpt});
      }
  return out;
}

}  // namespace

TEST_CASE("every schedule with GPU stages equals its sequential reference: mlp", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  for (const auto& c : gpu_grid(false)) check_on_gpu(c, placement::gpu);
}

TEST_CASE("every schedule with GPU stages equals its sequential reference: gpt-tiny", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  for (const auto& c : gpu_grid(true)) check_on_gpu(c, placement::gpu);
}

TEST_CASE("a mixed CPU and GPU pipeline equals its sequential reference", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  for (const auto& c : gpu_grid(true)) check_on_gpu(c, placement::mixed);
  for (const auto& c : gpu_grid(false)) check_on_gpu(c, placement::mixed);
}

TEST_CASE("every schedule over two GPUs of one process ends with one GPU's bits", "[cuda]") {
  if (!cuda_test::have_gpus(2)) return;
  for (const auto& c : gpu_grid(true)) {
    const auto one = check_on_gpu(c, placement::gpu);
    const auto two = check_on_gpu(c, placement::two_gpus);
    REQUIRE(one.size() == two.size());
    for (std::size_t s = 0; s < one.size(); ++s) {
      INFO(c.name() << ", virtual stage " << s);
      CHECK(same_bits(*one[s], *two[s]));
    }
  }
}
