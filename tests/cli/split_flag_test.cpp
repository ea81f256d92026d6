// Tests for cli/split_flag: the --split flag read into boundaries, and its errors.
#include "cli/split_flag.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

TEST_CASE("parse_split reads first blocks and appends the end", "[cli]") {
  REQUIRE(parse_split("0,3,6", 8).value() == std::vector<int>{0, 3, 6, 8});
  REQUIRE(parse_split("0,3,6", 8, 3).value() == std::vector<int>{0, 3, 6, 8});
  REQUIRE(parse_split("0", 5).value() == std::vector<int>{0, 5});
  REQUIRE(parse_split("0, 2 ,4", 5).value() == std::vector<int>{0, 2, 4, 5});
}

TEST_CASE("parse_split names the bad entry and what would work", "[cli]") {
  auto late = parse_split("1,3", 8);
  REQUIRE_FALSE(late.ok());
  REQUIRE_THAT(late.message(), Catch::Contains("entry 1") && Catch::Contains("block 0"));
  auto repeat = parse_split("0,3,3", 8);
  REQUIRE_FALSE(repeat.ok());
  REQUIRE_THAT(repeat.message(), Catch::Contains("entry 3") && Catch::Contains("after 3"));
  auto down = parse_split("0,4,2", 8);
  REQUIRE_FALSE(down.ok());
  REQUIRE_THAT(down.message(), Catch::Contains("entry 3"));
  auto past = parse_split("0,8", 8);
  REQUIRE_FALSE(past.ok());
  REQUIRE_THAT(past.message(),
               Catch::Contains("entry 2") && Catch::Contains("past the last block, 7"));
  auto word = parse_split("0,x", 8);
  REQUIRE_FALSE(word.ok());
  REQUIRE_THAT(word.message(), Catch::Contains("'x'") && Catch::Contains("not a block number"));
  REQUIRE_FALSE(parse_split("", 8).ok());
  REQUIRE_FALSE(parse_split("0,", 8).ok());
  REQUIRE_FALSE(parse_split("0,-2", 8).ok());
  REQUIRE_FALSE(parse_split("0,2.5", 8).ok());
  auto count = parse_split("0,3,6", 8, 2);
  REQUIRE_FALSE(count.ok());
  REQUIRE_THAT(count.message(), Catch::Contains("3 stage(s)") && Catch::Contains("has 2"));
  REQUIRE_THAT(late.message(), Catch::Contains("for example"));
}
