// frame_guard's connection slots: a connection that never handshakes is closed once its deadline
// passes (and the log names why), so silent connections cannot hold every slot for ever.
#include "runtime/transport/frame_guard.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

using namespace pipeworks;

TEST_CASE("a connection that never handshakes is closed by the frame guard at its deadline", "[transport]") {
  // The inner port: a listener the guard relays to (nothing needs to answer there).
  const int inner = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(inner >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(inner, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(inner, 16) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(inner, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::mutex mu;
  std::vector<std::string> heard;
  frame_guard::limits lim;
  lim.max_connections = 2;
  lim.handshake_ms = 200;
  auto guard = frame_guard::start(host_port{"127.0.0.1", 0}, ntohs(addr.sin_port), lim,
                                  [&](const std::string& line) {
                                    std::lock_guard lock(mu);
                                    heard.push_back(line);
                                  });
  REQUIRE(guard);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons((*guard)->port());
  std::vector<int> silent;
  for (int i = 0; i < 2; ++i) {
    silent.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    REQUIRE(::connect(silent.back(), reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  }
  for (int fd : silent) {  // each is closed by the guard: an end of stream, well before 20 s
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20000) == 1);
    char c;
    CHECK(::recv(fd, &c, 1, 0) <= 0);
    ::close(fd);
  }
  {
    std::lock_guard lock(mu);
    REQUIRE(heard.size() == 2);
    CHECK(heard[0].find("no handshake within 200 ms") != std::string::npos);
  }
  guard->reset();
  ::close(inner);
}
