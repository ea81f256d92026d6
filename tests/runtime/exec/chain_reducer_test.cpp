// Tests for chain_reducer (cyclic's p2p reduce across processes): the chain's sum has the bits of
// gradient_reducer's collective sum whatever the order messages arrive in, only the last replica's
// rank gets it, the last replica's version reaches every other replica's rank, and wrong, odd or
// repeated messages are refused.
#include "runtime/exec/chain_reducer.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>
#include <variant>

#include "runtime/exec/reducer.hpp"

using namespace pipeworks;

namespace {

std::shared_ptr<const param_set> values(std::vector<float> v) {
  param_set p({{{"w", {2}}, {"b", {static_cast<std::int64_t>(v.size()) - 2}}}}, 0, dtype::f32);
  std::copy(v.begin(), v.end(), p.values<float>().begin());
  return std::make_shared<const param_set>(std::move(p));
}

bool same_bits(const param_set& a, const param_set& b) {
  return a.same_layout(b) && std::memcmp(a.arena().bytes(), b.arena().bytes(), a.nbytes()) == 0;
}

// w replicas' shares, their messages delivered in a random order.
struct chain_net {
  std::vector<chain_reducer> shares;
  std::deque<std::pair<int, std::variant<reduce_chunk, gather_chunk>>> in_flight;
  std::vector<std::vector<reduce_result>> got;  // by replica: what its rank received

  explicit chain_net(int w) : got(static_cast<std::size_t>(w)) {
    for (int r = 0; r < w; ++r) shares.emplace_back(0, r, w);
  }
  void take(int r, result<chain_reducer::outputs> out) {
    REQUIRE(out.ok());
    for (auto& [to, piece] : out->pieces) in_flight.emplace_back(to, std::move(piece));
    for (auto& [to, sum] : out->sums) in_flight.emplace_back(to, std::move(sum));
    if (out->result) got[static_cast<std::size_t>(r)].push_back(std::move(*out->result));
  }
  void deliver(std::mt19937& rng) {
    while (!in_flight.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, in_flight.size() - 1);
      const std::size_t i = pick(rng);
      auto [to, msg] = std::move(in_flight[i]);
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
      auto& share = shares[static_cast<std::size_t>(to)];
      if (auto* c = std::get_if<reduce_chunk>(&msg)) take(to, share.add_piece(std::move(*c)));
      else take(to, share.add_sum(std::move(std::get<gather_chunk>(msg))));
    }
  }
};

}  // namespace

TEST_CASE("chain_reducer: the last replica gets the collective sum's bits in any order", "[runtime]") {
  for (int w : {2, 3, 4})
    for (unsigned seed : {1u, 2u, 3u, 4u}) {
      INFO("w = " << w << ", seed " << seed);
      std::mt19937 rng(seed);
      std::uniform_real_distribution<float> u(-1e4f, 1e4f);
      std::vector<std::shared_ptr<const param_set>> grads;
      for (int r = 0; r < w; ++r) grads.push_back(values({u(rng), u(rng), u(rng), u(rng), u(rng)}));
      gradient_reducer collective(0, w);
      std::shared_ptr<const param_set> expected;
      for (int r = 0; r < w; ++r) {
        auto out = collective.add(reduce_request{0, r, 7, grads[static_cast<std::size_t>(r)]});
        REQUIRE(out.ok());
        if (*out) expected = (**out)[0].sum;
      }
      REQUIRE(expected);
      chain_net net(w);
      std::vector<int> order(static_cast<std::size_t>(w));
      for (int r = 0; r < w; ++r) order[static_cast<std::size_t>(r)] = r;
      std::shuffle(order.begin(), order.end(), rng);
      for (int r : order) {
        net.take(r, net.shares[static_cast<std::size_t>(r)].add_local(
                        reduce_request{0, r, 7, grads[static_cast<std::size_t>(r)]}));
        net.deliver(rng);
      }
      for (int r = 0; r + 1 < w; ++r) CHECK(net.got[static_cast<std::size_t>(r)].empty());
      REQUIRE(net.got.back().size() == 1);
      CHECK(net.got.back()[0].step == 7);
      CHECK(same_bits(*net.got.back()[0].sum, *expected));
      for (const auto& s : net.shares) CHECK(s.pending_steps() == 0);

      // The last replica's new version reaches every other rank, as a version.
      auto version = values({1, 2, 3, 4, 5});
      net.take(w - 1, net.shares.back().add_local(
                          reduce_request{0, w - 1, 7, version, reduce_kind::weights}));
      net.deliver(rng);
      for (int r = 0; r + 1 < w; ++r) {
        REQUIRE(net.got[static_cast<std::size_t>(r)].size() == 1);
        const reduce_result& v = net.got[static_cast<std::size_t>(r)][0];
        CHECK(v.kind == reduce_kind::weights);
        CHECK(v.step == 7);
        CHECK(same_bits(*v.sum, *version));
      }
    }
}

TEST_CASE("chain_reducer refuses messages that are not its to take", "[runtime]") {
  chain_reducer second(0, 1, 3), last(0, 2, 3);
  auto g = values({1, 2, 3});
  tensor_payload five(tensor({5}, dtype::f32));
  // A version before any gradient, to the last replica, or from another than the last.
  CHECK_FALSE(second.add_sum(gather_chunk{0, 0, 2, five, chunk_kind::chain_version}).ok());
  REQUIRE(second.add_local(reduce_request{0, 1, 0, g}).ok());
  CHECK_FALSE(last.add_sum(gather_chunk{0, 0, 2, five, chunk_kind::chain_version}).ok());
  CHECK_FALSE(second.add_sum(gather_chunk{0, 0, 0, five, chunk_kind::chain_version}).ok());
  // A version of the wrong size or kind.
  auto odd = second.add_sum(gather_chunk{0, 0, 2, five, chunk_kind::chain_version});
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.message().find("[5]") != std::string::npos);
  CHECK_FALSE(second.add_sum(gather_chunk{0, 0, 2, tensor_payload(tensor({3}, dtype::f32)),
                                          chunk_kind::all_reduce}).ok());
  // A partial sum from another than the previous replica, addressed elsewhere, twice, or odd.
  tensor_payload three(tensor({3}, dtype::f32));
  CHECK_FALSE(second.add_piece(reduce_chunk{0, 0, 2, 1, three, chunk_kind::chain_partial}).ok());
  CHECK_FALSE(second.add_piece(reduce_chunk{0, 0, 0, 2, three, chunk_kind::chain_partial}).ok());
  CHECK_FALSE(second.add_piece(reduce_chunk{0, 0, 0, 1, three, chunk_kind::owned_gradient}).ok());
  REQUIRE(second.add_piece(reduce_chunk{0, 5, 0, 1, three, chunk_kind::chain_partial}).ok());
  CHECK_FALSE(second.add_piece(reduce_chunk{0, 5, 0, 1, three, chunk_kind::chain_partial}).ok());
  auto wrong = second.add_piece(reduce_chunk{0, 6, 0, 1, five, chunk_kind::chain_partial});
  REQUIRE(wrong.ok());  // kept until the local gradient says the layout
  CHECK_FALSE(second.add_local(reduce_request{0, 1, 6, g}).ok());
  // A gradient twice, or of another replica; a version from a replica but the last.
  CHECK_FALSE(second.add_local(reduce_request{0, 1, 0, g}).ok());
  CHECK_FALSE(second.add_local(reduce_request{0, 0, 9, g}).ok());
  CHECK_FALSE(second.add_local(reduce_request{0, 1, 9, g, reduce_kind::weights}).ok());
}
