// --zero 1 and 2 on one thread: for every schedule that takes them (all but dualpipe), w in {2, 4},
// mlp and gpt-tiny, messages in random orders, each replica's weights are those of --zero 0 bit for
// bit: sharding moves the optimizer's work and never the order of a sum.
#include <catch2/catch.hpp>

#include "runtime/exec/local_run.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;
using namespace pipeworks::test;

namespace {

constexpr int steps = 3;

std::vector<param_snapshot> weights_with(const case_run& f, int zero, std::uint64_t order_seed) {
  lowered_run run = local_lowered_run(f.plan, f.bounds, f.cfg);
  run.plan.zero = zero;
  auto got = run_local(f.mdl, run, f.initial, f.data, {.order_seed = order_seed});
  INFO("--zero " << zero << ": " << (got.ok() ? std::string() : got.message()));
  REQUIRE(got.ok());
  return got->replica_weights;
}

// Returns the number of cases that ran.
int check_zero_bits(bool gpt) {
  int ran = 0;
  for (schedule_kind k : all_kinds) {
    if (default_routes(k) > 1) continue;  // dualpipe refuses --zero by name
    const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
    for (int w : {2, 4})
      for (int m : {2, 5}) {
        const semantics_case c{k, 2, m, w, v, gpt};
        auto f = make_case_run(c, steps, true);  // AdamW: moments to shard
        if (!f) continue;
        const auto whole = weights_with(*f, 0, 0);
        for (int zero : {1, 2}) {
          const auto sharded = weights_with(*f, zero, 7);
          REQUIRE(sharded.size() == whole.size());
          for (std::size_t i = 0; i < whole.size(); ++i) {
            INFO(c.name() << ", --zero " << zero << ", replica and stage " << i);
            CHECK(same_bits(*sharded[i], *whole[i]));
          }
        }
        ++ran;
      }
  }
  return ran;
}

}  // namespace

TEST_CASE("zero 1 and 2 end with the bits of zero 0 for every schedule: mlp", "[runtime][zero]") {
  CHECK(check_zero_bits(false) >= 40);
}

TEST_CASE("zero 1 and 2 end with the bits of zero 0 for every schedule: gpt-tiny", "[runtime][zero]") {
  CHECK(check_zero_bits(true) >= 40);
}
