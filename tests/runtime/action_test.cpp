// Tests for runtime/action.cpp: text forms of actions and programs, both ways.
#include <catch2/catch.hpp>
#include <string>

#include "runtime/action.hpp"

using namespace pipeworks;

TEST_CASE("actions print in PyTorch's text form", "[runtime]") {
  CHECK(to_string(action{1, action_kind::forward, 0}) == "1F0");
  CHECK(to_string(action{1, action_kind::backward, 3}) == "1B3");
  CHECK(to_string(action{0, action_kind::input_grad, 2}) == "0I2");
  CHECK(to_string(action{0, action_kind::weight_grad, 2}) == "0W2");
  CHECK(to_string(action{2, action_kind::send_f, 1}) == "2SEND_F1");
  CHECK(to_string(action{3, action_kind::recv_b, 0}) == "3RECV_B0");
  CHECK(to_string(action{1, action_kind::reduce, -1}) == "1REDUCE");
  CHECK(to_string(action{1, action_kind::step, -1}) == "1STEP");
  CHECK(to_string(action{12, action_kind::recv_f, 105}) == "12RECV_F105");
}

TEST_CASE("every action kind parses back to itself", "[runtime]") {
  for (const char* text : {"1F0", "1B3", "0I2", "0W2", "2SEND_F1", "3RECV_B0", "0RECV_F7",
                           "4SEND_B11", "1REDUCE", "1STEP", "10F200"}) {
    auto a = parse_action(text);
    REQUIRE(a.ok());
    CHECK(to_string(*a) == text);
  }
  auto a = parse_action(" 2SEND_F3 ");
  REQUIRE(a.ok());
  CHECK(a->stage == 2);
  CHECK(a->kind == action_kind::send_f);
  CHECK(a->microbatch == 3);
  auto r = parse_action("1REDUCE_GRAD");  // PyTorch's spelling
  REQUIRE(r.ok());
  CHECK(r->kind == action_kind::reduce);
  CHECK(r->microbatch == -1);
}

TEST_CASE("bad action strings are rejected with a reason", "[runtime]") {
  CHECK_FALSE(parse_action("").ok());
  CHECK_THAT(parse_action("F0").message(), Catch::Contains("stage number"));
  CHECK_THAT(parse_action("1X0").message(), Catch::Contains("unknown kind"));
  CHECK_THAT(parse_action("1F").message(), Catch::Contains("no microbatch"));
  CHECK_THAT(parse_action("1STEP3").message(), Catch::Contains("takes no microbatch"));
  CHECK_THAT(parse_action("1F0x").message(), Catch::Contains("non-negative number"));
  CHECK_THAT(parse_action("1UNSHARD").message(), Catch::Contains("unknown kind"));
}

TEST_CASE("an action holds stages up to max_action_stage in eight bytes", "[runtime]") {
  CHECK(sizeof(action) == 8);
  const std::string top = std::to_string(max_action_stage);
  auto a = parse_action(top + "SEND_B2147483647");
  REQUIRE(a.ok());
  CHECK(a->stage == max_action_stage);
  CHECK(a->microbatch == 2147483647);
  CHECK(to_string(*a) == top + "SEND_B2147483647");
  const action low{-max_action_stage - 1, action_kind::step, -1};
  CHECK(low.stage == -max_action_stage - 1);
  // One past, and past an int: refused with the range, never wrapped.
  for (const std::string big : {std::to_string(max_action_stage + 1) + "F0",
                                std::string("99999999999999999999F0")}) {
    auto r = parse_action(big);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.message(), Catch::Contains("is too large") &&
                                Catch::Contains("0.." + std::to_string(max_action_stage)));
  }
}

TEST_CASE("kind predicates", "[runtime]") {
  CHECK(is_compute(action_kind::input_grad));
  CHECK_FALSE(is_compute(action_kind::send_f));
  CHECK(is_comm(action_kind::recv_b));
  CHECK_FALSE(is_comm(action_kind::step));
  CHECK_FALSE(has_microbatch(action_kind::reduce));
  CHECK(has_microbatch(action_kind::weight_grad));
  CHECK(kind_name(action_kind::send_b) == "SEND_B");
}

TEST_CASE("programs round-trip through text", "[runtime]") {
  const std::string text = "0F0 0SEND_F0 0F1 0RECV_B0 0B0 0REDUCE 0STEP";
  auto p = parse_program(text);
  REQUIRE(p.ok());
  CHECK(p->size() == 7);
  CHECK(to_string(*p) == text);
  auto commas = parse_program("0F0, 0F1,0B0\n0B1");
  REQUIRE(commas.ok());
  CHECK(to_string(*commas) == "0F0 0F1 0B0 0B1");
  CHECK(parse_program("").value().empty());
  CHECK_THAT(parse_program("0F0 0Q1").message(), Catch::Contains("action 1"));
}
