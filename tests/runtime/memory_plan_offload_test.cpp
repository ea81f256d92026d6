// What offload moves to host memory in the memory plan (offload_to_host), predicted on the CPU
// with no GPU: the optimizer moments, and the stash beyond the microbatches in use.
#include <catch2/catch.hpp>

#include "ops/model/model_spec.hpp"
#include "runtime/lower.hpp"
#include "runtime/memory_plan.hpp"

using namespace pipeworks;

namespace {

struct predicted {
  std::vector<stage_bytes> bytes;
  std::vector<stage_memory> stages;
};

// gpt-tiny in two stages under `kind` with 4 microbatches of 2 samples.
predicted predict(schedule_kind kind, recompute_mode mode) {
  const model_spec spec = *parse_model_spec("gpt-tiny");
  const model<float> net = build_model<float>(spec);
  auto made = make_schedule(kind, schedule_params{2, 4, 1, 1, 1});
  REQUIRE(made.ok());
  const schedule s = lower_communication(*made);
  auto bytes = measure_stage_bytes(net, example_microbatch(spec, 2), {0, net.size() / 2, net.size()},
                                   mode, optimizer_kind::adamw);
  REQUIRE(bytes.ok());
  return {*bytes, predict_memory(s, *bytes, mode)};
}

}  // namespace

TEST_CASE("without offload nothing is in host memory", "[runtime][memory]") {
  predicted p = predict(schedule_kind::gpipe, recompute_mode::none);
  for (std::size_t s = 0; s < 2; ++s) {
    offload_to_host(p.stages[s], p.bytes[s], offload_spec{}, recompute_mode::none);
    CHECK(p.stages[s].host == 0);
    CHECK(p.stages[s].device_total() == p.stages[s].total());
  }
}

TEST_CASE("optimizer offload moves the moments to host memory", "[runtime][memory]") {
  predicted p = predict(schedule_kind::one_f_one_b, recompute_mode::none);
  for (std::size_t s = 0; s < 2; ++s) {
    stage_memory& m = p.stages[s];
    const std::int64_t whole = m.total();
    REQUIRE(m.moments > 0);
    offload_to_host(m, p.bytes[s], offload_spec{true, false}, recompute_mode::none);
    CHECK(m.host == m.moments);
    CHECK(m.total() == whole);  // the bytes move, the figure of each kind stays
    CHECK(m.device_total() == whole - m.moments);
  }
}

TEST_CASE("activation offload keeps two microbatches' stashes on the device", "[runtime][memory]") {
  // GPipe's stage 0 holds all 4 microbatches' stashes at once: 2 of them move to the host.
  predicted p = predict(schedule_kind::gpipe, recompute_mode::none);
  const stage_bytes& b0 = p.bytes[0];
  stage_memory& m0 = p.stages[0];
  REQUIRE(m0.peak_inflight == 4);
  REQUIRE(m0.activations == 4 * b0.stash);
  offload_to_host(m0, b0, offload_spec{false, true}, recompute_mode::none);
  CHECK(m0.host == 2 * b0.stash);
  CHECK(m0.device_total() == m0.total() - 2 * b0.stash);
  // Both: the moments too.
  offload_to_host(m0, b0, offload_spec{true, true}, recompute_mode::none);
  CHECK(m0.host == 2 * b0.stash + m0.moments);
  // 1F1B's last stage holds one microbatch at a time: nothing to move.
  predicted q = predict(schedule_kind::one_f_one_b, recompute_mode::none);
  REQUIRE(q.stages[1].peak_inflight == 1);
  offload_to_host(q.stages[1], q.bytes[1], offload_spec{false, true}, recompute_mode::none);
  CHECK(q.stages[1].host == 0);
}

TEST_CASE("activation offload under full recomputation keeps room for a stash made again",
          "[runtime][memory]") {
  predicted p = predict(schedule_kind::gpipe, recompute_mode::full);
  const stage_bytes& b0 = p.bytes[0];
  stage_memory& m0 = p.stages[0];
  REQUIRE(b0.whole_stash > b0.stash);
  offload_to_host(m0, b0, offload_spec{false, true}, recompute_mode::full);
  CHECK(m0.host == m0.activations - std::min(m0.activations, 2 * b0.whole_stash));
  CHECK(m0.host >= 0);
}
