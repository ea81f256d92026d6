// parse_host_port: host:port and [v6]:port read back exactly; every malformed address is refused
// with a message that says what is wrong.
#include "base/host_port.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

TEST_CASE("host and port addresses parse and print back") {
  auto a = parse_host_port("127.0.0.1:7000");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 7000);
  CHECK(to_string(*a) == "127.0.0.1:7000");
  auto v6 = parse_host_port("[::1]:65535");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(to_string(*v6) == "[::1]:65535");
  CHECK(parse_host_port("node-3.cluster:1").ok());
  CHECK(parse_host_port("h:0", true).ok());
}

TEST_CASE("malformed addresses are refused saying why") {
  auto message = [](const char* text) {
    auto r = parse_host_port(text);
    REQUIRE_FALSE(r.ok());
    return r.message();
  };
  CHECK(message("localhost").find("HOST:PORT") != std::string::npos);
  CHECK(message(":7000").find("no host") != std::string::npos);
  CHECK(message("h:0").find("1..65535") != std::string::npos);
  CHECK(message("h:65536").find("1..65535") != std::string::npos);
  CHECK(message("h:-1").find("port") != std::string::npos);
  CHECK(message("h:7x").find("port") != std::string::npos);
  CHECK(message("::1:7000").find("brackets") != std::string::npos);
  CHECK(message("a b:7").find("host") != std::string::npos);
  CHECK(message("h:").find("port") != std::string::npos);
}
