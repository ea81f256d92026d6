// The analytic GPT profile: parameter counts of published GPT-2 sizes, one layer's figures by
// hand, linear scaling in the microbatch, recomputation, and argument errors.
#include <catch2/catch.hpp>

#include <cstdint>

#include "partition/gpt_profile.hpp"

using namespace pipeworks;

namespace {

gpt_config gpt2(int layers, std::int64_t hidden, int heads) {
  return gpt_config{"gpt2", layers, hidden, heads, 1024, 50257};
}

}  // namespace

TEST_CASE("gpt_parameters matches the published GPT-2 sizes exactly", "[partition][gpt_profile]") {
  CHECK(gpt_parameters(gpt2(12, 768, 12)) == 124'439'808);      // GPT-2 small, "124M"
  CHECK(gpt_parameters(gpt2(48, 1600, 25)) == 1'557'611'200);   // GPT-2 XL, "1.5B"
}

TEST_CASE("gpt_profile lays out embed then the layers then head", "[partition][gpt_profile]") {
  const gpt_config c = gpt2(48, 1600, 25);
  auto p = gpt_profile(c, {});
  REQUIRE(p);
  REQUIRE(p->layers.size() == 50);
  CHECK(p->layers.front().name == "embed");
  CHECK(p->layers[1].name == "layer0");
  CHECK(p->layers[48].name == "layer47");  // profile index i + 1 is "layer<i>"
  CHECK(p->layers.back().name == "head");
  std::int64_t params = 0, opt = 0;
  for (const layer_profile& l : p->layers) {
    params += l.param_bytes;
    opt += l.optimizer_bytes;
  }
  // fp16 weights; the head keeps its own copy of the V·h output embedding.
  CHECK(params == 2 * (gpt_parameters(c) + 50257 * 1600));
  CHECK(opt == 6 * params);
}

TEST_CASE("gpt_profile one transformer layer by hand", "[partition][gpt_profile]") {
  gpt_profile_options o;
  o.microbatch = 1;
  o.flops_per_s = 1e12;
  auto p = gpt_profile(gpt_config{"t", 2, 1024, 16, 512, 1000}, o);
  REQUIRE(p);
  const layer_profile& l = p->layers[1];
  // 24·512·1024² + 4·512²·1024 = 13,958,643,712 FLOPs at 1e12 FLOP/s.
  CHECK(l.fwd_ms == Approx(13.958643712));
  CHECK(l.bwd_ms == Approx(2 * 13.958643712));
  CHECK(l.activation_bytes == 2 * 512 * 1024);
  CHECK(l.saved_bytes == 512 * 1024 * (34 + 5 * 16 * 512 / 1024));  // 38,797,312
  CHECK(l.param_bytes == 2 * (12 * 1024 * 1024 + 13 * 1024));
  // The head: 2·b·s·h·V FLOPs, fp32 logits kept for the loss.
  CHECK(p->layers.back().fwd_ms == Approx(2.0 * 512 * 1024 * 1000 / 1e9));
  CHECK(p->layers.back().saved_bytes == 4 * 512 * 1000 + 2 * 512 * 1024);
  CHECK(p->layers.front().fwd_ms == 0.0);
}

TEST_CASE("gpt_profile scales linearly in the microbatch", "[partition][gpt_profile]") {
  const gpt_config c{"t", 4, 2048, 16, 512, 51200};
  gpt_profile_options one, four;
  one.microbatch = 1;
  four.microbatch = 4;
  auto a = gpt_profile(c, one);
  auto b = gpt_profile(c, four);
  REQUIRE(a);
  REQUIRE(b);
  for (std::size_t i = 0; i + 1 < a->layers.size(); ++i) {
    CHECK(b->layers[i].fwd_ms == Approx(4 * a->layers[i].fwd_ms));
    CHECK(b->layers[i].bwd_ms == Approx(4 * a->layers[i].bwd_ms));
    CHECK(b->layers[i].activation_bytes == 4 * a->layers[i].activation_bytes);
    CHECK(b->layers[i].saved_bytes == 4 * a->layers[i].saved_bytes);
    CHECK(b->layers[i].param_bytes == a->layers[i].param_bytes);
    CHECK(b->layers[i].optimizer_bytes == a->layers[i].optimizer_bytes);
  }
}

TEST_CASE("gpt_profile with recomputation keeps only the layer input", "[partition][gpt_profile]") {
  const gpt_config c{"t", 2, 1024, 16, 512, 1000};
  gpt_profile_options o;
  o.microbatch = 2;
  auto plain = gpt_profile(c, o);
  o.recompute = true;
  auto re = gpt_profile(c, o);
  REQUIRE(plain);
  REQUIRE(re);
  CHECK(re->layers[1].saved_bytes == 2 * 2 * 512 * 1024);
  CHECK(re->layers[1].saved_bytes < plain->layers[1].saved_bytes);
  CHECK(re->layers[1].bwd_ms == Approx(3 * re->layers[1].fwd_ms));
  CHECK(re->layers[1].fwd_ms == Approx(plain->layers[1].fwd_ms));
}

TEST_CASE("gpt_profile refuses impossible shapes and rates", "[partition][gpt_profile]") {
  auto heads = gpt_profile(gpt_config{"t", 2, 1000, 16, 512, 1000}, {});
  REQUIRE_FALSE(heads);
  CHECK_THAT(heads.message(), Catch::Contains("not a multiple of heads"));
  gpt_profile_options o;
  o.flops_per_s = 0;
  auto rate = gpt_profile(gpt_config{"t", 2, 1024, 16, 512, 1000}, o);
  REQUIRE_FALSE(rate);
  CHECK_THAT(rate.message(), Catch::Contains("flops_per_s"));
  REQUIRE_FALSE(gpt_profile(gpt_config{"t", 0, 1024, 16, 512, 1000}, {}));
}
