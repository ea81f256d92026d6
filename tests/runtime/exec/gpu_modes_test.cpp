// GPU ranks under the modes that must not change a run's bits, or only by their rounding:
// --recompute full and selective end with the bits of none (every schedule, w in {1, 2}, fp32
// and bf16), and TF32 and bf16 runs repeat bit for bit in any message order and stay within 1e-2
// of the fp32 GPU run (which gpu_semantics_test holds to the sequential reference). Skipped
// without a GPU.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "runtime/exec/local_run.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

// What a run asks for beyond its case.
struct run_modes {
  recompute_mode recompute = recompute_mode::none;
  bool tf32 = false, bf16 = false;
  std::uint64_t order_seed = 0;
  std::string name() const {
    return "--recompute " + std::string(recompute_name(recompute)) + (tf32 ? " --tf32" : "") +
           (bf16 ? " --bf16" : "") + ", message order " + std::to_string(order_seed);
  }
};

// Every (replica, virtual stage)'s final weights of `f` with each rank on `device`.
std::vector<param_snapshot> weights_of(const case_run& f, const semantics_case& c,
                                       const char* device, const run_modes& modes) {
  lowered_run run = local_lowered_run(f.plan, f.bounds, f.cfg);
  run.plan.recompute = modes.recompute;
  run.plan.tf32 = modes.tf32;
  run.plan.bf16 = modes.bf16;
  for (int r = 0; r < c.p * c.w; ++r) run.plan.ranks.push_back(rank_placement{device, 1.0, "", 0});
  auto got = run_local(f.mdl, run, f.initial, f.data, {.order_seed = modes.order_seed});
  INFO(c.name() << ", " << modes.name() << ": " << (got.ok() ? std::string() : got.message()));
  REQUIRE(got.ok());
  REQUIRE(got->replica_weights.size() ==
          static_cast<std::size_t>(f.plan->virtual_stages * c.w));
  return got->replica_weights;
}

// p = 2, both of the semantics grid's kinds of m (a pipeline not yet full, and more than 2p
// microbatches), w in {1, 2}: every schedule, small enough to run many times.
std::vector<semantics_case> small_grid(bool gpt) {
  std::vector<semantics_case> out;
  for (const semantics_case& c : semantics_grid(gpt))
    if (c.p == 2 && (c.m == 2 || c.m == 5 || default_routes(c.kind) > 1)) out.push_back(c);
  return out;
}

// Checks that recompute full and selective end with the bits of none on `device`; returns the
// number of cases that ran.
int check_recompute_bits(bool gpt, const char* device, bool bf16) {
  int ran = 0;
  for (const semantics_case& c : small_grid(gpt)) {
    auto f = make_case_run(c, steps);
    if (!f) continue;
    const auto none = weights_of(*f, c, device, {.bf16 = bf16});
    for (recompute_mode mode : {recompute_mode::full, recompute_mode::selective}) {
      const auto again = weights_of(*f, c, device, {.recompute = mode, .bf16 = bf16, .order_seed = 5});
      for (std::size_t i = 0; i < none.size(); ++i) {
        INFO(c.name() << ", --recompute " << recompute_name(mode) << (bf16 ? " --bf16" : "")
                      << ", replica and stage " << i);
        CHECK(same_bits(*again[i], *none[i]));
      }
    }
    ++ran;
  }
  return ran;
}

// Checks that `modes` (TF32 or bf16) repeats bit for bit in another message order and stays within
// 1e-2 of the fp32 run on `device`; returns the number of cases that ran.
int check_reduced_precision(bool gpt, const char* device, run_modes modes) {
  int ran = 0;
  for (const semantics_case& c : small_grid(gpt)) {
    auto f = make_case_run(c, steps);
    if (!f) continue;
    const auto fp32 = weights_of(*f, c, device, {});
    const auto first = weights_of(*f, c, device, modes);
    run_modes reordered = modes;
    reordered.order_seed = 23;
    const auto second = weights_of(*f, c, device, reordered);
    for (std::size_t i = 0; i < fp32.size(); ++i) {
      INFO(c.name() << ", " << modes.name() << ", replica and stage " << i);
      CHECK(same_bits(*first[i], *second[i]));
      CHECK(max_relative_difference<float>(*first[i], *fp32[i]) <= 1e-2);
    }
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("recompute full and selective on GPU ranks end with the bits of none: mlp", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  CHECK(check_recompute_bits(false, "cuda:0", false) >= 20);
}

TEST_CASE("recompute full and selective on GPU ranks end with the bits of none: gpt-tiny", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  CHECK(check_recompute_bits(true, "cuda:0", false) >= 20);
  CHECK(check_recompute_bits(true, "cuda:0", true) >= 20);
}

TEST_CASE("every schedule with GPU stages in TF32 and bf16 repeats its bits and stays near fp32", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  for (bool gpt : {false, true}) {
    CHECK(check_reduced_precision(gpt, "cuda:0", {.tf32 = true}) >= 20);
    CHECK(check_reduced_precision(gpt, "cuda:0", {.bf16 = true}) >= 20);
  }
}

// The same checks on CPU ranks, where --tf32 and --bf16 change nothing: what the GPU cases above
// compare holds on the machine CI runs on, so a GPU failure is the GPU's.
TEST_CASE("the GPU mode checks hold on CPU ranks", "[runtime][recompute]") {
  CHECK(check_recompute_bits(true, "cpu", false) >= 20);
  CHECK(check_reduced_precision(false, "cpu", {.bf16 = true}) >= 20);
}
