// ZeRO stage 1 pieces: tensors spread whole over the replicas by size, and w optimizers that each
// update their own tensors, put together, give the bits of one optimizer updating every tensor,
// step after step, with AdamW and SGD, clipping included; each keeps only its tensors' moments.
#include "ops/train/zero_shards.hpp"

#include <catch2/catch.hpp>
#include <cstring>

#include "ops/model/gpt.hpp"
#include "ops/train/stage_optimizer.hpp"
#include "tests/ops/gradcheck.hpp"

using namespace pipeworks;

namespace {

bool same_bits(const param_set& a, const param_set& b) {
  return a.same_layout(b) && std::memcmp(a.arena().bytes(), b.arena().bytes(), a.nbytes()) == 0;
}

void fill_random(param_set& g, std::uint64_t seed) {
  auto v = test::random_values(g.size(), seed);
  std::copy(v.begin(), v.end(), g.values<float>().begin());
}

}  // namespace

TEST_CASE("shard owners spread whole tensors over the replicas by size", "[ops][zero]") {
  const model<float> m = make_gpt<float>(gpt_tiny());
  const param_set p = m.init_params(1);
  for (int w : {1, 2, 3, 4}) {
    INFO("w = " << w);
    const std::vector<int> owners = shard_owners(p, w);
    REQUIRE(owners.size() == p.entries().size());
    std::vector<std::int64_t> load(static_cast<std::size_t>(w), 0);
    std::int64_t largest = 0;
    for (std::size_t i = 0; i < owners.size(); ++i) {
      REQUIRE(owners[i] >= 0);
      REQUIRE(owners[i] < w);
      load[static_cast<std::size_t>(owners[i])] += p.entries()[i].numel();
      largest = std::max(largest, p.entries()[i].numel());
    }
    // Greedy by size: no replica holds more than its even share plus the largest tensor.
    for (std::int64_t l : load) CHECK(l <= p.size() / w + largest);
    CHECK(shard_owners(p, w) == owners);  // every replica computes the same
  }
}

TEST_CASE("sharded optimizers put together give the unsharded bits", "[ops][zero]") {
  const model<float> m = make_gpt<float>(gpt_tiny());
  for (optimizer_kind kind : {optimizer_kind::adamw, optimizer_kind::sgd}) {
    for (int w : {2, 3}) {
      INFO(optimizer_kind_name(kind) << ", w = " << w);
      train_config cfg;
      cfg.steps = 10;
      cfg.optim = default_optimizer_config(kind);
      cfg.clip_grad_norm = 0.5;  // the norm is the whole gradient's on every replica
      param_snapshot whole = std::make_shared<const param_set>(m.init_params(3));
      stage_optimizer<float> one(*whole, cfg);
      const std::vector<int> owners = shard_owners(*whole, w);
      std::vector<stage_optimizer<float>> shards;
      for (int r = 0; r < w; ++r) {
        shards.emplace_back(*whole, cfg);
        shards.back().own_only(owned_by(owners, r));
      }
      param_snapshot sharded = whole;
      for (int step = 0; step < 3; ++step) {
        param_set g = whole->zeros_like();
        fill_random(g, 100 + static_cast<std::uint64_t>(step));
        param_set g_copy = g.clone();
        auto next = one.apply(whole, g, step);
        REQUIRE(next.ok());
        std::vector<param_snapshot> parts;
        for (int r = 0; r < w; ++r) {
          param_set gr = g_copy.clone();  // each replica holds the whole reduced gradient
          auto part = shards[static_cast<std::size_t>(r)].apply(sharded, gr, step);
          REQUIRE(part.ok());
          parts.push_back(*part);
        }
        auto composed = compose_shards(parts, owners);
        REQUIRE(composed.ok());
        INFO("step " << step);
        REQUIRE(same_bits(*composed, **next));
        whole = *next;
        sharded = std::make_shared<const param_set>(std::move(*composed));
      }
      // Each replica's moments cover its own tensors only.
      std::int64_t kept = 0;
      for (const auto& s : shards)
        for (const auto& st : s.state()) kept += static_cast<std::int64_t>(st.m.size());
      std::int64_t all = 0;
      for (const auto& st : one.state()) all += static_cast<std::int64_t>(st.m.size());
      CHECK(kept == all);
      for (int r = 0; r < w; ++r) {
        const auto& st = shards[static_cast<std::size_t>(r)].state();
        for (std::size_t i = 0; i < st.size(); ++i) CHECK(st[i].m.empty() == (owners[i] != r));
      }
    }
  }
}

TEST_CASE("compose_shards refuses versions of another layout or a bad owner", "[ops][zero]") {
  const model<float> m = make_gpt<float>(gpt_tiny());
  const param_snapshot a = std::make_shared<const param_set>(m.init_params(1));
  const param_snapshot b = std::make_shared<const param_set>(m.init_params(2));
  gpt_config one_layer = gpt_tiny();
  one_layer.layers = 1;
  const param_snapshot other = std::make_shared<const param_set>(make_gpt<float>(one_layer).init_params(1));
  std::vector<int> owners(a->entries().size(), 0);
  CHECK(compose_shards({a, b}, owners).ok());
  CHECK(!compose_shards({a, other}, owners).ok());  // another layout
  owners[0] = 2;
  CHECK(!compose_shards({a, b}, owners).ok());      // no third replica
  CHECK(!compose_shards({a}, std::vector<int>(3, 0)).ok());
}

TEST_CASE("a sharded optimizer never reuses the buffer of a version another replica may hold", "[ops][zero]") {
  // Under ZeRO the latest version is the replicas' gathered one: other replicas (and a checkpoint
  // writer) may hold it through references this optimizer cannot count, so even when it is the
  // very object the optimizer made last (an address the allocator gave again) and this
  // optimizer's own references to it are gone, its buffer is not written.
  const model<float> m = make_gpt<float>(gpt_tiny());
  train_config cfg;
  cfg.steps = 10;
  cfg.optim = default_optimizer_config(optimizer_kind::adamw);
  const param_snapshot v0 = std::make_shared<const param_set>(m.init_params(3));
  stage_optimizer<float> opt(*v0, cfg);
  opt.own_only(owned_by(shard_owners(*v0, 2), 0));
  auto gradient = [&](std::uint64_t seed) {
    param_set g = v0->zeros_like();
    fill_random(g, seed);
    return g;
  };
  param_set g0 = gradient(1), g1 = gradient(2), g2 = gradient(3);
  auto v1 = opt.apply(v0, g0, 0);
  REQUIRE(v1.ok());
  const param_snapshot held_elsewhere = *v1;  // another replica's reference
  const param_set before = held_elsewhere->clone();
  {
    // This rank's reference, through a control block of its own.
    param_snapshot mine(v1->get(), [keep = *v1](const param_set*) {});
    v1 = param_snapshot{};
    auto v2 = opt.apply(mine, g1, 1);
    REQUIRE(v2.ok());
    mine.reset();
    auto v3 = opt.apply(*v2, g2, 2);
    REQUIRE(v3.ok());
  }
  CHECK(same_bits(*held_elsewhere, before));
}
