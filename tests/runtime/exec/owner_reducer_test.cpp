// Tests for owner_reducer (ZeRO's exchanges across processes): w replicas exchanging messages in
// any order reach, bit for bit, the sums and squared norms of the unsharded reduction for the
// tensors they own, and the version gradient_reducer puts together from the owners' updates;
// duplicates, strangers and odd shapes are refused.
#include "runtime/exec/owner_reducer.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <variant>

#include "ops/train/stage_optimizer.hpp"
#include "ops/train/zero_shards.hpp"
#include "runtime/exec/reducer.hpp"

using namespace pipeworks;

namespace {

// Two blocks of tensors of unequal sizes, so that the owners' shares differ; or (small) one
// block of two tensors, so that with more replicas some own nothing.
std::shared_ptr<const param_set> random_set(std::mt19937& rng, bool small = false) {
  param_set p = small ? param_set({{{"a.weight", {3, 2}}, {"a.bias", {2}}}}, 0, dtype::f32)
                      : param_set({{{"a.weight", {7, 5}}, {"a.bias", {5}}, {"b.weight", {3, 4}}},
                                   {{"c.weight", {11}}, {"c.bias", {2}}}},
                                  0, dtype::f32);
  std::normal_distribution<float> d(0.f, 1e3f);
  for (float& x : p.values<float>()) x = d(rng);
  return std::make_shared<const param_set>(std::move(p));
}

using msg = std::variant<reduce_request, reduce_chunk, gather_chunk>;

// Delivers every message in a random order; returns each replica's result and the values sent.
std::vector<std::optional<reduce_result>> exchange(std::mt19937& rng, int w,
                                                   std::vector<reduce_request> locals,
                                                   std::int64_t& sent_values) {
  std::vector<owner_reducer> shares;
  for (int r = 0; r < w; ++r) shares.emplace_back(2, r, w);
  std::vector<std::pair<int, msg>> flight;
  for (int r = 0; r < w; ++r) flight.emplace_back(r, std::move(locals[static_cast<std::size_t>(r)]));
  std::vector<std::optional<reduce_result>> results(static_cast<std::size_t>(w));
  while (!flight.empty()) {
    const std::size_t k = rng() % flight.size();
    auto [to, m] = std::move(flight[k]);
    flight.erase(flight.begin() + static_cast<std::ptrdiff_t>(k));
    owner_reducer& share = shares[static_cast<std::size_t>(to)];
    auto out = std::visit(
        [&](auto& x) -> result<owner_reducer::outputs> {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, reduce_request>) return share.add_local(std::move(x));
          else if constexpr (std::is_same_v<X, reduce_chunk>) return share.add_piece(std::move(x));
          else return share.add_gathered(std::move(x));
        },
        m);
    REQUIRE(out);
    for (auto& [r, p] : out->pieces) {
      if (p.data.type() != dtype::f64) sent_values += numel(p.data.shape());
      flight.emplace_back(r, std::move(p));
    }
    for (auto& [r, s] : out->sums) {
      if (s.data.type() != dtype::f64) sent_values += numel(s.data.shape());
      flight.emplace_back(r, std::move(s));
    }
    if (out->result) results[static_cast<std::size_t>(to)] = std::move(out->result);
  }
  for (const owner_reducer& s : shares) CHECK(s.pending_steps() == 0);
  return results;
}

std::span<const std::byte> tensor_bytes(const param_set& s, const param_entry& e) {
  return {reinterpret_cast<const std::byte*>(s.values<float>(e).data()),
          static_cast<std::size_t>(e.numel()) * sizeof(float)};
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

TEST_CASE("owners summing their tensors in any order reach the reducer's sums and norms bit for bit", "[runtime]") {
  std::mt19937 rng(11);
  for (int w : {2, 3, 4, 5})
  for (bool small : {false, true}) {  // small: with w > 2 some replicas own no tensor
    CAPTURE(w, small);
    std::vector<std::shared_ptr<const param_set>> g;
    for (int r = 0; r < w; ++r) g.push_back(random_set(rng, small));
    gradient_reducer central(2, w);
    std::optional<std::vector<reduce_result>> want;
    for (int r = 0; r < w; ++r) {
      auto got = central.add(reduce_request{2, r, 5, g[static_cast<std::size_t>(r)]});
      REQUIRE(got);
      if (*got) want = std::move(*got);
    }
    REQUIRE(want);
    const param_set& sum = *want->front().sum;
    const std::vector<double> squares = tensor_squares<float>(sum);
    const std::vector<int> owners = shard_owners(sum, w);
    std::vector<reduce_request> locals;
    for (int r = 0; r < w; ++r) locals.push_back(reduce_request{2, r, 5, g[static_cast<std::size_t>(r)]});
    std::int64_t sent = 0;
    auto results = exchange(rng, w, std::move(locals), sent);
    // Each replica sends the values of the tensors it does not own, once: (w - 1) n in all.
    CHECK(sent == static_cast<std::int64_t>(w - 1) * sum.size());
    for (int r = 0; r < w; ++r) {
      CAPTURE(r);
      auto& got = results[static_cast<std::size_t>(r)];
      REQUIRE(got);
      CHECK(got->kind == reduce_kind::gradient);
      REQUIRE(got->sum->same_layout(sum));
      CHECK(got->squares == squares);  // every tensor's, bit for bit (doubles compared exactly)
      for (std::size_t i = 0; i < owners.size(); ++i) {
        const param_entry& e = sum.entries()[i];
        if (owners[i] == r) {
          CHECK(same_bytes(tensor_bytes(*got->sum, e), tensor_bytes(sum, e)));
        } else {
          for (float x : got->sum->values<float>(e)) CHECK(x == 0.0f);
        }
      }
    }
  }
}

TEST_CASE("owners gathering their updated tensors reach the reducer's version bit for bit", "[runtime]") {
  std::mt19937 rng(12);
  for (int w : {2, 3, 4, 5})
  for (bool small : {false, true}) {  // small: with w > 2 some replicas own no tensor
    CAPTURE(w, small);
    // Replica r's version: its own values everywhere; only its owned tensors are to be kept.
    std::vector<param_snapshot> versions;
    for (int r = 0; r < w; ++r) versions.push_back(random_set(rng, small));
    gradient_reducer central(2, w);
    std::optional<std::vector<reduce_result>> want;
    for (int r = 0; r < w; ++r) {
      auto got = central.add(reduce_request{2, r, 3, versions[static_cast<std::size_t>(r)],
                                            reduce_kind::weights});
      REQUIRE(got);
      if (*got) want = std::move(*got);
    }
    REQUIRE(want);
    const param_set& whole = *want->front().sum;
    CHECK(want->front().kind == reduce_kind::weights);
    CHECK(want->back().sum == want->front().sum);  // one version shared by the replicas
    const std::vector<int> owners = shard_owners(whole, w);
    for (std::size_t i = 0; i < owners.size(); ++i) {
      const param_entry& e = whole.entries()[i];
      CHECK(same_bytes(tensor_bytes(whole, e),
                       tensor_bytes(*versions[static_cast<std::size_t>(owners[i])], e)));
    }
    std::vector<reduce_request> locals;
    for (int r = 0; r < w; ++r)
      locals.push_back(reduce_request{2, r, 3, versions[static_cast<std::size_t>(r)], reduce_kind::weights});
    std::int64_t sent = 0;
    auto results = exchange(rng, w, std::move(locals), sent);
    // Each owner sends its tensors to the w - 1 others: (w - 1) n values in all.
    CHECK(sent == static_cast<std::int64_t>(w - 1) * whole.size());
    for (int r = 0; r < w; ++r) {
      auto& got = results[static_cast<std::size_t>(r)];
      REQUIRE(got);
      CHECK(got->kind == reduce_kind::weights);
      REQUIRE(got->sum->same_layout(whole));
      CHECK(same_bytes({got->sum->arena().bytes(), got->sum->arena().nbytes()},
                       {whole.arena().bytes(), whole.arena().nbytes()}));
    }
  }
}

TEST_CASE("an owner share refuses duplicates, strangers, other kinds and odd shapes", "[runtime]") {
  std::mt19937 rng(13);
  auto g = random_set(rng);
  owner_reducer share(1, 0, 2);
  REQUIRE(share.add_local(reduce_request{1, 0, 0, g}));
  CHECK_FALSE(share.add_local(reduce_request{1, 0, 0, g}));  // twice
  CHECK_FALSE(share.add_local(reduce_request{1, 1, 1, g}));  // another replica's
  CHECK_FALSE(share.add_local(reduce_request{2, 0, 1, g}));  // another stage's
  auto f32 = [](std::int64_t n) { return *tensor_payload::allocate(dtype::f32, {n}); };
  // Not this replica's to sum, a replica out of range, the plain all-reduce's kind.
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 1, 1, f32(3), chunk_kind::owned_gradient}));
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 5, 0, f32(3), chunk_kind::owned_gradient}));
  CHECK_FALSE(share.add_piece(reduce_chunk{1, 0, 1, 0, f32(3), chunk_kind::all_reduce}));
  CHECK_FALSE(share.add_gathered(gather_chunk{1, 0, 0, f32(3), chunk_kind::owned_weights}));  // mine
  CHECK_FALSE(share.add_gathered(gather_chunk{1, 0, 1, f32(3), chunk_kind::all_reduce}));
  // A piece of the wrong size is refused once it is summed.
  owner_reducer other(1, 0, 2);
  REQUIRE(other.add_piece(reduce_chunk{1, 0, 1, 0, f32(3), chunk_kind::owned_gradient}));
  CHECK_FALSE(other.add_local(reduce_request{1, 0, 0, g}));
  // Owner 1's tensors of the wrong size are refused once the local version is in.
  owner_reducer gather(1, 0, 2);
  REQUIRE(gather.add_gathered(gather_chunk{1, 4, 1, f32(1), chunk_kind::owned_weights}));
  CHECK_FALSE(gather.add_local(reduce_request{1, 0, 4, g, reduce_kind::weights}));
  // Squared norms of the wrong count are refused.
  owner_reducer norms(1, 0, 2);
  REQUIRE(norms.add_gathered(gather_chunk{1, 2, 1, *tensor_payload::allocate(dtype::f64, {9}),
                                          chunk_kind::owned_squares}));
  auto piece_for_me = [&] {
    const auto owners = shard_owners(*g, 2);
    std::int64_t n = 0;
    for (std::size_t i = 0; i < owners.size(); ++i)
      if (owners[i] == 0) n += g->entries()[i].numel();
    return reduce_chunk{1, 2, 1, 0, f32(n), chunk_kind::owned_gradient};
  };
  REQUIRE(norms.add_piece(piece_for_me()));
  CHECK_FALSE(norms.add_local(reduce_request{1, 0, 2, g}));
}
