// frame_guard's connection slots: a connection that never handshakes is closed once its deadline
// passes (and the log names why), so silent connections cannot hold every slot for ever; a frame
// too large from a peer that handshook is reported, and its connection still carries replies.
#include "runtime/transport/frame_guard.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
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

namespace {

// A BASP frame: a 32-byte header (its kind, its payload length big-endian at offset 4), then
// `payload`, padded with zeros to `length`.
std::string basp_frame(unsigned char kind, std::uint32_t length, const std::string& payload) {
  std::string f(32, '\0');
  f[0] = static_cast<char>(kind);
  const std::uint32_t be = htonl(length);
  std::memcpy(f.data() + 4, &be, 4);
  std::string body = payload;
  body.resize(length, '\0');
  return f + body;
}

// Reads from `fd` until `n` bytes came or it ends; what came.
std::string read_some(int fd, std::size_t n) {
  std::string got;
  char buf[256];
  while (got.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) break;
    const ssize_t k = ::recv(fd, buf, std::min(sizeof buf, n - got.size()), 0);
    if (k <= 0) break;
    got.append(buf, static_cast<std::size_t>(k));
  }
  return got;
}

}  // namespace

TEST_CASE("a frame too large from a peer that handshook is reported and its connection still answers", "[transport]") {
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
  std::condition_variable cv;
  std::vector<std::string> heard;
  std::vector<frame_guard::refusal> refused;
  frame_guard::limits lim;
  lim.max_frame = 1024;
  auto guard = frame_guard::start(
      host_port{"127.0.0.1", 0}, ntohs(addr.sin_port), lim,
      [&](const std::string& line) {
        std::lock_guard lock(mu);
        heard.push_back(line);
      },
      [&](const frame_guard::refusal& r) {
        std::lock_guard lock(mu);
        refused.push_back(r);
        cv.notify_all();
      });
  REQUIRE(guard);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons((*guard)->port());
  const int peer = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(peer, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  const int process = ::accept(inner, nullptr, nullptr);  // the guard's relay to "CAF"
  REQUIRE(process >= 0);
  // The handshake passes whole; then a message of 2000 bytes, whose payload names its type as
  // CAF 0.17.6 writes it (a one-byte length, then "@<>+" and the type's name).
  const std::string handshake = basp_frame(1, 8, "12345678");
  const std::string types = "@<>+pipeworks::activation_msg";
  std::string big = basp_frame(2, 2000, std::string(1, '\0') + static_cast<char>(types.size()) + types);
  big[30] = 0x01;  // its destination actor, big-endian at offset 24: 0x0102
  big[31] = 0x02;
  const std::string sent = handshake + big + basp_frame(6, 0, "");
  REQUIRE(::send(peer, sent.data(), sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(sent.size()));
  CHECK(read_some(process, handshake.size()) == handshake);
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return !refused.empty(); }));
    REQUIRE(refused.size() == 1);
    CHECK(refused[0].kind == "a CAF message of type pipeworks::activation_msg");
    CHECK(refused[0].bytes == 2000);
    CHECK(refused[0].limit == 1024);
    CHECK_FALSE(refused[0].held);
    CHECK(refused[0].need == 2000);
    CHECK(refused[0].to_actor == 0x0102);
    REQUIRE(!heard.empty());
    CHECK(heard.back().find("a frame claims 2000 bytes, more than the 1024 a frame may hold") != std::string::npos);
  }
  // The process can still answer its peer (to say what it refused)...
  const std::string reply = "the reply";
  REQUIRE(::send(process, reply.data(), reply.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(reply.size()));
  CHECK(read_some(peer, reply.size()) == reply);
  // ...and nothing of the refused frame, nor after it, reached the process; once the run has
  // ended, the process closes such connections.
  (*guard)->close_refused();
  CHECK(read_some(peer, 1).empty());     // the peer's end: closed
  CHECK(read_some(process, 1).empty());  // the process's end: closed, nothing more came
  ::close(peer);
  ::close(process);
  guard->reset();
  ::close(inner);
}
