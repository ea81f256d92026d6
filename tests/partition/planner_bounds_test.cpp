// Figures a library caller can put in a profile or cluster without a reader to check them: an
// infinite or huge layer time, a microbatch near 2^62, a device speed of 1e-308, a bandwidth of
// 1e-300. Both planners refuse each with an error naming it, never a crash or an overflow.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "partition/pipedream_planner.hpp"
#include "partition/two_bw_planner.hpp"
#include "profile_fixtures.hpp"

using namespace pipeworks;
using partition_test::layer;

namespace {

model_profile four_layers() {
  model_profile p;
  p.microbatch = 4;
  for (int i = 0; i < 4; ++i) p.layers.push_back(layer(1, 2, 10, 40, 1000, 500));
  return p;
}

cluster two_devices(double speed0 = 1, double bandwidth = 1e9) {
  cluster c;
  c.devices = {{"a", speed0, 0}, {"b", 1, 0}};
  c.levels.push_back(cluster_level{"server", 2, bandwidth, 0.0});
  return c;
}

// Both planners' errors for one profile and cluster ("" where a planner succeeds).
std::pair<std::string, std::string> errors_of(const model_profile& p, const cluster& c) {
  auto pd = plan_pipedream(p, c);
  auto bw = plan_two_bw(p, c);
  return {pd.ok() ? std::string() : pd.message(), bw.ok() ? std::string() : bw.message()};
}

}  // namespace

TEST_CASE("planners refuse times and figures that would overflow, naming them", "[partition]") {
  REQUIRE(errors_of(four_layers(), two_devices()) == std::pair<std::string, std::string>{});
  struct bad_case {
    model_profile profile;
    cluster c;
    std::string says;
  };
  std::vector<bad_case> cases;
  for (double t : {1.5e308, std::numeric_limits<double>::infinity(), 2e9}) {
    auto p = four_layers();
    p.layers[1].fwd_ms = t;
    cases.push_back({p, two_devices(), "fwd_ms " + std::string(t == 2e9 ? "2e+09" : std::isinf(t) ? "inf" : "1.5e+308") + " is outside 0..1e9 ms"});
  }
  auto huge_mb = four_layers();
  huge_mb.microbatch = std::int64_t{1} << 62;
  cases.push_back({huge_mb, two_devices(), "microbatch 4611686018427387904 is outside 1..2^31-1"});
  cases.push_back({four_layers(), two_devices(1e-308), "speed 1e-308 must be in 1e-6..1e6"});
  cases.push_back({four_layers(), two_devices(1, 1e-300), "bandwidth_bytes_per_s 1e-300 is too small"});
  for (const auto& c : cases) {
    const auto [pd, bw] = errors_of(c.profile, c.c);
    INFO(pd << " / " << bw);
    CHECK(pd.find(c.says) != std::string::npos);
    CHECK(bw.find(c.says) != std::string::npos);
  }
}
