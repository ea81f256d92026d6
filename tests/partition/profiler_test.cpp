// The profiler: one entry per block, real shapes (each block runs on its predecessor's output),
// bytes that follow from the model's sizes, and positive times; the stash each recompute mode
// keeps.
#include "partition/profiler.hpp"

#include <catch2/catch.hpp>

#include "ops/model/gpt.hpp"
#include "ops/model/mlp.hpp"

using namespace pipeworks;

TEST_CASE("profile of an mlp: bytes from the layer sizes and positive times", "[partition]") {
  model<float> net = make_mlp<float>(mlp_config{12, {16, 8}, 4});
  minibatch mb{tensor({4, 12}, dtype::f32), tensor({4}, dtype::i32)};
  for (int i = 0; i < 4; ++i) mb.targets.data<std::int32_t>()[i] = i % 4;
  auto p = profile_model(net, mb, {.repeats = 3, .optimizer = optimizer_kind::adamw});
  REQUIRE(p.ok());
  REQUIRE(p->layers.size() == 3);
  CHECK(p->microbatch == 4);
  CHECK(p->layers[0].name == "fc1");
  CHECK(p->layers[0].param_bytes == (12 * 16 + 16) * 4);
  CHECK(p->layers[0].optimizer_bytes == 2 * p->layers[0].param_bytes);
  CHECK(p->layers[0].activation_bytes == 4 * 16 * 4);
  CHECK(p->layers[1].activation_bytes == 4 * 8 * 4);
  CHECK(p->layers[2].param_bytes == (8 * 4 + 4) * 4);
  for (const auto& l : p->layers) {
    CHECK(l.fwd_ms >= 0);
    CHECK(l.bwd_ms >= 0);
    CHECK(l.saved_bytes > 0);
  }
  auto sgd = profile_model(net, mb, {.repeats = 1, .optimizer = optimizer_kind::sgd});
  REQUIRE(sgd.ok());
  CHECK(sgd->layers[0].optimizer_bytes == sgd->layers[0].param_bytes);
}

TEST_CASE("profile of gpt-tiny: a transformer block's output is B x T x C floats", "[partition]") {
  const gpt_config c = gpt_tiny();
  model<float> net = make_gpt<float>(c);
  minibatch mb{tensor({2, c.context}, dtype::i32), tensor({2, c.context}, dtype::i32)};
  for (int i = 0; i < 2 * c.context; ++i) {
    mb.inputs.data<std::int32_t>()[i] = 65 + i % 26;
    mb.targets.data<std::int32_t>()[i] = 65 + (i + 1) % 26;
  }
  auto p = profile_model(net, mb, {.repeats = 2});
  REQUIRE(p.ok());
  REQUIRE(static_cast<int>(p->layers.size()) == net.size());
  CHECK(p->layers[1].activation_bytes == std::int64_t{2} * c.context * c.width * 4);
  CHECK(p->layers[1].fwd_ms > 0);
  CHECK(p->layers[1].bwd_ms > 0);
  CHECK(p->layers.back().activation_bytes == 4);  // the loss
}

namespace {

minibatch gpt_sample(const gpt_config& c, int b) {
  minibatch mb{tensor({b, c.context}, dtype::i32), tensor({b, c.context}, dtype::i32)};
  for (int i = 0; i < b * c.context; ++i) {
    mb.inputs.data<std::int32_t>()[i] = 65 + i % 26;
    mb.targets.data<std::int32_t>()[i] = 65 + (i + 1) % 26;
  }
  return mb;
}

}  // namespace

TEST_CASE("profile with recompute: selective drops a GPT block's probabilities and GELU output",
          "[partition]") {
  // Bytes only: times are live, so only their shape is checked.
  const gpt_config c = gpt_tiny();
  model<float> net = make_gpt<float>(c);
  const minibatch mb = gpt_sample(c, 2);
  auto none = profile_model(net, mb, {.repeats = 1});
  auto selective = profile_model(net, mb, {.repeats = 1, .recompute = recompute_mode::selective});
  auto full = profile_model(net, mb, {.repeats = 1, .recompute = recompute_mode::full});
  REQUIRE(none.ok());
  REQUIRE(selective.ok());
  REQUIRE(full.ok());
  CHECK(none->recompute == recompute_mode::none);
  CHECK(selective->recompute == recompute_mode::selective);
  CHECK(full->recompute == recompute_mode::full);
  REQUIRE(selective->layers.size() == none->layers.size());
  REQUIRE(full->layers.size() == none->layers.size());
  // Layer 1 is the first transformer block: B·heads·T·T probabilities and B·T·4C GELU floats go.
  const std::int64_t dropped =
      std::int64_t{2} * (c.heads * c.context * c.context + c.context * 4 * c.width) * 4;
  CHECK(selective->layers[1].saved_bytes < none->layers[1].saved_bytes);
  CHECK(selective->layers[1].saved_bytes == none->layers[1].saved_bytes - dropped);
  // The embedding and the head keep their stash; full keeps every block's whole stash.
  CHECK(selective->layers.front().saved_bytes == none->layers.front().saved_bytes);
  CHECK(selective->layers.back().saved_bytes == none->layers.back().saved_bytes);
  for (std::size_t l = 0; l < none->layers.size(); ++l) {
    CHECK(full->layers[l].saved_bytes == none->layers[l].saved_bytes);
    CHECK(full->layers[l].activation_bytes == none->layers[l].activation_bytes);
    CHECK(full->layers[l].param_bytes == none->layers[l].param_bytes);
    CHECK(selective->layers[l].activation_bytes == none->layers[l].activation_bytes);
    CHECK(full->layers[l].bwd_ms >= 0);
    CHECK(selective->layers[l].bwd_ms >= 0);
  }
}

TEST_CASE("profile with selective recompute: an mlp block keeps its whole stash", "[partition]") {
  model<float> net = make_mlp<float>(mlp_config{12, {16, 8}, 4});
  minibatch mb{tensor({4, 12}, dtype::f32), tensor({4}, dtype::i32)};
  for (int i = 0; i < 4; ++i) mb.targets.data<std::int32_t>()[i] = i % 4;
  auto none = profile_model(net, mb, {.repeats = 1});
  auto selective = profile_model(net, mb, {.repeats = 1, .recompute = recompute_mode::selective});
  REQUIRE(none.ok());
  REQUIRE(selective.ok());
  REQUIRE(selective->layers.size() == none->layers.size());
  for (std::size_t l = 0; l < none->layers.size(); ++l)
    CHECK(selective->layers[l].saved_bytes == none->layers[l].saved_bytes);
}
