// The UCX transport between two workers of one process: tagged payloads arrive bit for bit
// whichever side posts first, a wrong length and a cancelled receive end with an error, and
// completions run once each.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <vector>

#include "runtime/transport/ucx_transport.hpp"

using namespace pipeworks;

namespace {

std::shared_ptr<ucx_transport> open_or_skip() {
  if (!ucx_transport::available()) return nullptr;
  auto t = ucx_transport::open();
  REQUIRE(t);
  return *t;
}

std::shared_ptr<std::vector<std::uint8_t>> pattern(std::size_t n, std::uint8_t seed) {
  auto v = std::make_shared<std::vector<std::uint8_t>>(n);
  for (std::size_t i = 0; i < n; ++i) v->at(i) = static_cast<std::uint8_t>(seed + i * 31);
  return v;
}

std::string wait(std::future<std::string>& f) {
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("a UCX payload arrives bit for bit whether the receive or the send is posted first", "[ucx]") {
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  for (std::size_t n : {std::size_t{1}, std::size_t{8191}, std::size_t{1} << 20, std::size_t{5} << 20}) {
    for (bool receive_first : {true, false}) {
      CAPTURE(n, receive_first);
      const std::uint64_t tag = (n << 1) | (receive_first ? 1 : 0);
      auto sent = pattern(n, static_cast<std::uint8_t>(n));
      auto got = std::make_shared<std::vector<std::uint8_t>>(n, 0);
      std::promise<std::string> s_done, r_done;
      auto s_f = s_done.get_future();
      auto r_f = r_done.get_future();
      auto post_receive = [&] {
        b->receive(tag, n, [got](std::size_t) -> void* { return got->data(); },
                   [&](const std::string& e) { r_done.set_value(e); }, std::chrono::seconds(20));
      };
      if (receive_first) post_receive();
      a->send(b->address(), tag, sent->data(), n, sent, [&](const std::string& e) { s_done.set_value(e); });
      if (!receive_first) post_receive();
      CHECK(wait(s_f) == "");
      CHECK(wait(r_f) == "");
      CHECK(*got == *sent);
    }
  }
  CHECK_FALSE(a->lanes(b->address()).empty());
}

TEST_CASE("a UCX receive of the wrong length fails and a cancelled one reports the end of the run", "[ucx]") {
  // Nothing is allocated for a message of the wrong length: the allocator is never called.
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  {
    auto sent = pattern(4096, 1);
    auto got = std::make_shared<std::vector<std::uint8_t>>(1024);
    std::promise<std::string> r_done, s_done;
    auto r_f = r_done.get_future();
    auto s_f = s_done.get_future();
    bool allocated = false;
    b->receive(7, got->size(), [got, &allocated](std::size_t) -> void* {
      allocated = true;
      return got->data();
    }, [&](const std::string& e) { r_done.set_value(e); }, std::chrono::seconds(20));
    a->send(b->address(), 7, sent->data(), sent->size(), sent, [&](const std::string& e) { s_done.set_value(e); });
    CHECK(wait(r_f).find("4096 bytes came, not 1024") != std::string::npos);
    CHECK_FALSE(allocated);
    wait(s_f);
  }
  {
    auto got = std::make_shared<std::vector<std::uint8_t>>(64);
    std::promise<std::string> r_done;
    auto r_f = r_done.get_future();
    b->receive(0xAB00000000000001ull, got->size(), [got](std::size_t) -> void* { return got->data(); },
               [&](const std::string& e) { r_done.set_value(e); }, std::chrono::seconds(20));
    b->cancel_receives(0xFF00000000000000ull, 0xAB00000000000000ull);
    CHECK(wait(r_f).find("cancelled") != std::string::npos);
  }
  {
    // A message that never comes: the receive fails once its patience is spent, having allocated
    // nothing.
    bool allocated = false;
    std::promise<std::string> r_done;
    auto r_f = r_done.get_future();
    const auto start = std::chrono::steady_clock::now();
    b->receive(0x42, 64, [&allocated](std::size_t) -> void* {
      allocated = true;
      return nullptr;
    }, [&](const std::string& e) { r_done.set_value(e); }, std::chrono::milliseconds(100));
    CHECK(wait(r_f).find("arrived in time") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(100));
    CHECK_FALSE(allocated);
  }
}
