// Tests for ops/device/optimizer_update: on the CPU it is optimizer_step over the arena's slice,
// bit for bit, for both optimizers; the moments stay on the host.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "ops/device/optimizer_update.hpp"

using namespace pipeworks;

TEST_CASE("optimizer_update on the CPU is optimizer_step over the slice", "[ops][optim]") {
  for (optimizer_kind kind : {optimizer_kind::adamw, optimizer_kind::sgd}) {
    optimizer_config c = default_optimizer_config(kind);
    c.weight_decay = 0.05;
    tensor w({10}, dtype::f32), g({10}, dtype::f32), out({10}, dtype::f32);
    for (int i = 0; i < 10; ++i) {
      w.data<float>()[i] = 0.1f * static_cast<float>(i) - 0.3f;
      g.data<float>()[i] = 0.07f * static_cast<float>(9 - i) - 0.2f;
    }
    std::vector<float> ref_w(w.data<float>() + 3, w.data<float>() + 8);
    const std::vector<float> ref_g(g.data<float>() + 3, g.data<float>() + 8);
    optimizer_state<float> state, ref_state;
    device_moments on_device;
    for (int step = 0; step < 3; ++step) {
      REQUIRE(optimizer_update<float>(c, 1e-2, w, g, out, 3, 5, state, on_device, "h.0.w").ok());
      std::vector<float> ref_out(5);
      REQUIRE(optimizer_step<float>(c, 1e-2, ref_w, ref_g, ref_state, ref_out, "h.0.w").ok());
      REQUIRE(std::memcmp(out.data<float>() + 3, ref_out.data(), 5 * sizeof(float)) == 0);
      std::memcpy(w.data<float>() + 3, out.data<float>() + 3, 5 * sizeof(float));
      ref_w = ref_out;
    }
    REQUIRE(state.step == 3);
    REQUIRE(state.m == ref_state.m);
    REQUIRE(state.v == ref_state.v);
    REQUIRE(on_device.m.empty());  // the CPU's moments are the host state
    read_moments<float>(on_device, kind, state);
    REQUIRE(state.m == ref_state.m);
  }
}

TEST_CASE("optimizer_update names the tensor whose state does not fit", "[ops][optim]") {
  optimizer_config c = default_optimizer_config(optimizer_kind::adamw);
  tensor w({4}, dtype::f32), g({4}, dtype::f32), out({4}, dtype::f32);
  optimizer_state<float> state;
  state.m.assign(3, 0.f);
  device_moments on_device;
  const status s = optimizer_update<float>(c, 1e-3, w, g, out, 0, 4, state, on_device, "wte");
  REQUIRE_FALSE(s.ok());
  REQUIRE_THAT(s.message(), Catch::Contains("wte"));
}
