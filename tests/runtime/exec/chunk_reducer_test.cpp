// Tests for chunk_reducer: w replicas exchanging pieces and sums in any order reach, bit for bit,
// the sum gradient_reducer computes; each sends (w - 1)/w of its gradient per phase; duplicates,
// strangers and odd shapes are refused.
#include "runtime/exec/chunk_reducer.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <variant>

#include "runtime/exec/reducer.hpp"

using namespace pipeworks;

namespace {

std::shared_ptr<const param_set> random_grads(std::mt19937& rng, int n) {
  param_set p({{{"w", {n}}}}, 0, dtype::f32);
  std::normal_distribution<float> d(0.f, 1e3f);
  for (float& x : p.values<float>()) x = d(rng);
  return std::make_shared<const param_set>(std::move(p));
}

}  // namespace

TEST_CASE("replicas exchanging chunks in any order reach the reducer's sum bit for bit", "[runtime]") {
  std::mt19937 rng(7);
  for (int w : {2, 3, 4}) {
    for (int n : {1, 5, 1000, 1003}) {
      CAPTURE(w, n);
      std::vector<std::shared_ptr<const param_set>> g;
      for (int r = 0; r < w; ++r) g.push_back(random_grads(rng, n));
      gradient_reducer central(2, w);
      std::optional<std::vector<reduce_result>> want;
      for (int r = 0; r < w; ++r) {
        auto got = central.add(reduce_request{2, r, 5, g[static_cast<std::size_t>(r)]});
        REQUIRE(got);
        if (*got) want = std::move(*got);
      }
      REQUIRE(want);
      // Every message in flight, delivered in a random order.
      std::vector<chunk_reducer> shares;
      for (int r = 0; r < w; ++r) shares.emplace_back(2, r, w);
      using msg = std::variant<reduce_request, reduce_chunk, gather_chunk>;
      std::vector<std::pair<int, msg>> flight;
      for (int r = 0; r < w; ++r) flight.emplace_back(r, reduce_request{2, r, 5, g[static_cast<std::size_t>(r)]});
      std::vector<std::optional<reduce_result>> results(static_cast<std::size_t>(w));
      std::int64_t sent_values = 0;
      while (!flight.empty()) {
        const std::size_t k = rng() % flight.size();
        auto [to, m] = std::move(flight[k]);
        flight.erase(flight.begin() + static_cast<std::ptrdiff_t>(k));
        chunk_reducer& share = shares[static_cast<std::size_t>(to)];
        auto out = std::visit(
            [&](auto& x) -> result<chunk_reducer::outputs> {
              using X = std::decay_t<decltype(x)>;
              if constexpr (std::is_same_v<X, reduce_request>) return share.add_local(std::move(x));
              else if constexpr (std::is_same_v<X, reduce_chunk>) return share.add_piece(std::move(x));
              else return share.add_sum(std::move(x));
            },
            m);
        REQUIRE(out);
        for (auto& [r, p] : out->pieces) {
          sent_values += numel(p.data.shape());
          flight.emplace_back(r, std::move(p));
        }
        for (auto& [r, s] : out->sums) {
          sent_values += numel(s.data.shape());
          flight.emplace_back(r, std::move(s));
        }
        if (out->result) results[static_cast<std::size_t>(to)] = std::move(out->result);
      }
      // Each replica sent (w - 1)/w of its gradient in each phase: 2 (w - 1) n values in all.
      CHECK(sent_values == 2 * static_cast<std::int64_t>(w - 1) * n);
      for (int r = 0; r < w; ++r) {
        auto& got = results[static_cast<std::size_t>(r)];
        REQUIRE(got);
        CHECK(got->step == 5);
        CHECK(got->sum->same_layout(*want->front().sum));
        CHECK(std::memcmp(got->sum->arena().bytes(), want->front().sum->arena().bytes(),
                          got->sum->arena().nbytes()) == 0);
        CHECK(shares[static_cast<std::size_t>(r)].pending_steps() == 0);
      }
    }
  }
}

TEST_CASE("a replica share of the all-reduce refuses duplicates and strangers and odd shapes", "[runtime]") {
  std::mt19937 rng(3);
  auto g = random_grads(rng, 10);
  chunk_reducer share(1, 0, 2);
  REQUIRE(share.add_local(reduce_request{1, 0, 0, g}));
  CHECK_FALSE(share.add_local(reduce_request{1, 0, 0, g}));                    // twice
  CHECK_FALSE(share.add_local(reduce_request{1, 1, 1, g}));                    // another replica's
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 1, 1, {}}));                 // not my chunk
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 5, 0, {}}));                 // no such replica
  CHECK_FALSE(share.add_sum(gather_chunk{1, 0, 0, {}}));                      // my own chunk's sum
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 1, 0, *tensor_payload::allocate(dtype::f32, {3})}));
  // Chunk 0 of 10 values split 2 ways holds 5; a piece of 3 is refused when it is summed.
  chunk_reducer other(1, 0, 2);
  REQUIRE(other.add_piece(reduce_chunk{1, 0, 1, 0, *tensor_payload::allocate(dtype::f32, {3})}));
  CHECK_FALSE(other.add_local(reduce_request{1, 0, 0, g}));
}
