// Tests for ops/optim/optimizer: config parsing and checks, state sizing and size errors.
#include <catch2/catch.hpp>

#include <vector>

#include "ops/optim/optimizer.hpp"

using namespace pipeworks;

TEST_CASE("optimizer kinds parse and print", "[ops][optim]") {
  REQUIRE(*parse_optimizer_kind("sgd") == optimizer_kind::sgd);
  REQUIRE(*parse_optimizer_kind("adamw") == optimizer_kind::adamw);
  auto bad = parse_optimizer_kind("adam");
  REQUIRE_FALSE(bad.ok());
  REQUIRE_THAT(bad.message(), Catch::Contains("adam") && Catch::Contains("sgd or adamw"));
  REQUIRE(optimizer_kind_name(optimizer_kind::adamw) == "adamw");
}

TEST_CASE("optimizer configs are range-checked", "[ops][optim]") {
  REQUIRE(validate(default_optimizer_config(optimizer_kind::sgd)).ok());
  REQUIRE(validate(default_optimizer_config(optimizer_kind::adamw)).ok());
  optimizer_config c = default_optimizer_config(optimizer_kind::adamw);
  c.beta2 = 1.0;
  REQUIRE_THAT(validate(c).message(), Catch::Contains("beta2"));
  c = default_optimizer_config(optimizer_kind::sgd);
  c.lr = -1;
  REQUIRE_THAT(validate(c).message(), Catch::Contains("lr"));
  c.lr = 0.1;
  c.momentum = 1.5;
  REQUIRE_THAT(validate(c).message(), Catch::Contains("momentum"));
}

TEST_CASE("optimizer_step sizes its state and rejects mismatched spans", "[ops][optim]") {
  optimizer_config c = default_optimizer_config(optimizer_kind::adamw);
  std::vector<float> w(4, 1.0f), g(4, 0.5f), g3(3, 0.5f);
  optimizer_state<float> st;
  REQUIRE(optimizer_step<float>(c, 1e-3, w, g, st, w).ok());
  REQUIRE(st.m.size() == 4);
  REQUIRE(st.v.size() == 4);
  REQUIRE(st.step == 1);
  REQUIRE(w[0] < 1.0f);
  auto s = optimizer_step<float>(c, 1e-3, w, g3, st, w, "h.0.ln_1.weight");
  REQUIRE_FALSE(s.ok());
  REQUIRE_THAT(s.message(), Catch::Contains("h.0.ln_1.weight") && Catch::Contains("gradient"));
  REQUIRE(st.step == 1);  // a rejected step changes nothing
  std::vector<float> w5(5), g5(5);
  REQUIRE_THAT(optimizer_step<float>(c, 1e-3, w5, g5, st, w5).message(),
               Catch::Contains("optimizer state"));
}

TEST_CASE("sgd without momentum is plain gradient descent", "[ops][optim]") {
  optimizer_config c = default_optimizer_config(optimizer_kind::sgd);
  c.momentum = 0.0;
  std::vector<double> w = {1.0, -2.0}, g = {0.25, 4.0};
  optimizer_state<double> st;
  for (int k = 0; k < 3; ++k) REQUIRE(optimizer_step<double>(c, 0.5, w, g, st, w).ok());
  REQUIRE(w[0] == Approx(1.0 - 3 * 0.5 * 0.25));
  REQUIRE(w[1] == Approx(-2.0 - 3 * 0.5 * 4.0));
  REQUIRE(st.v.empty());
}
