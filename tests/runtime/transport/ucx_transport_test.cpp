// The UCX transport between two workers of one process: prefetched payloads reach their claims
// bit for bit whichever comes first; a wrong length, a message that never comes and a stopped
// prefetch fail the claim; a prefetch keeps to its budget and drops what nobody claims.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/transport/ucx_transport.hpp"
#include "tests/eventually.hpp"

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
  REQUIRE(f.wait_for(std::chrono::seconds(120)) == std::future_status::ready);
  return f.get();
}

using test::eventually;

}  // namespace

namespace {

// A prefetch whose buffers are vectors: counts what it was asked for and refuses more than `most`.
struct prefetch_probe {
  std::atomic<int> asked{0};
  std::size_t most = std::size_t{1} << 30;
  ucx_transport::early_into into() {
    return [this](std::size_t n) -> ucx_transport::early_buffer {
      ++asked;
      if (n > most) return {};
      auto v = std::make_shared<std::vector<std::uint8_t>>(n);
      return {v->data(), v};
    };
  }
};

// Claims `tag` of n bytes; the future holds the error ("" once in) and `got` the bytes.
std::future<std::string> claim(ucx_transport& t, std::uint64_t tag, std::size_t n,
                               std::shared_ptr<std::vector<std::uint8_t>>& got,
                               std::chrono::milliseconds patience = std::chrono::seconds(120)) {
  auto done = std::make_shared<std::promise<std::string>>();
  auto f = done->get_future();
  t.claim(tag, n, [done, &got](std::shared_ptr<void> token, const std::string& e) {
    got = std::static_pointer_cast<std::vector<std::uint8_t>>(token);
    done->set_value(e);
  }, patience);
  return f;
}

std::future<std::string> send(ucx_transport& from, const ucx_transport& to, std::uint64_t tag,
                              const std::shared_ptr<std::vector<std::uint8_t>>& bytes) {
  auto done = std::make_shared<std::promise<std::string>>();
  auto f = done->get_future();
  from.send(to.address(), tag, bytes->data(), bytes->size(), bytes,
            [done](const std::string& e) { done->set_value(e); });
  return f;
}

}  // namespace

TEST_CASE("a prefetched UCX payload reaches its claim bit for bit whether the claim or the message comes first", "[ucx]") {
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  prefetch_probe probe;
  b->prefetch(0xFF00000000000000ull, 0x0100000000000000ull, std::size_t{64} << 20, std::chrono::seconds(120),
              probe.into());
  std::uint64_t tag = 0x0100000000000000ull;
  for (std::size_t n : {std::size_t{1}, std::size_t{8191}, std::size_t{8192}, std::size_t{1} << 20,
                        std::size_t{5} << 20}) {
    for (bool claim_first : {true, false}) {
      CAPTURE(n, claim_first);
      ++tag;
      auto sent = pattern(n, static_cast<std::uint8_t>(n + claim_first));
      std::shared_ptr<std::vector<std::uint8_t>> got;
      std::future<std::string> claimed;
      if (claim_first) claimed = claim(*b, tag, n, got);
      auto s_f = send(*a, *b, tag, sent);
      CHECK(wait(s_f) == "");
      if (!claim_first) claimed = claim(*b, tag, n, got);
      CHECK(wait(claimed) == "");
      REQUIRE(got);
      CHECK(*got == *sent);
    }
  }
  // Another length than the claim's fails the claim.
  auto sent = pattern(4096, 9);
  std::shared_ptr<std::vector<std::uint8_t>> got;
  auto s_f = send(*a, *b, ++tag, sent);
  auto claimed = claim(*b, tag, 1024, got);
  CHECK(wait(claimed).find("4096 bytes came, not 1024") != std::string::npos);
  CHECK_FALSE(got);
  wait(s_f);
  // A message that never comes: the claim fails once its patience is spent.
  const auto start = std::chrono::steady_clock::now();
  auto never = claim(*b, ++tag, 64, got, std::chrono::milliseconds(100));
  CHECK(wait(never).find("arrived in time") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(100));
  CHECK_FALSE(a->lanes(b->address()).empty());
  b->stop_prefetch(0xFF00000000000000ull, 0x0100000000000000ull);
}

TEST_CASE("a prefetch holds no more than its budget and drops what nobody claims in time", "[ucx]") {
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  const std::uint64_t mask = 0xFF00000000000000ull, value = 0x0200000000000000ull;
  prefetch_probe probe;
  probe.most = 1 << 20;
  // A budget of 1.5 MiB holds one 1 MiB message (one always), not two. Kept for a minute: none is
  // dropped before this part claims it, however slow the machine.
  b->prefetch(mask, value, (std::size_t{3} << 20) / 2, std::chrono::seconds(60), probe.into());
  std::vector<std::future<std::string>> sends;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> sent;
  for (std::uint64_t k = 0; k < 3; ++k) {
    sent.push_back(pattern(1 << 20, static_cast<std::uint8_t>(k)));
    sends.push_back(send(*a, *b, value | k, sent.back()));
  }
  REQUIRE(eventually([&] { return probe.asked >= 1; }));
  // Time for a second, were it taken (a slow machine can only hide that, not fail a right budget).
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK(probe.asked == 1);
  // Claimed, each gives its bytes back: the next comes in.
  for (std::uint64_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    REQUIRE(eventually([&] { return probe.asked >= static_cast<int>(k) + 1; }));
    CHECK(probe.asked == static_cast<int>(k) + 1);
    std::shared_ptr<std::vector<std::uint8_t>> got;
    auto claimed = claim(*b, value | k, 1 << 20, got);
    CHECK(wait(claimed) == "");
    REQUIRE(got);
    CHECK(*got == *sent[k]);
  }
  for (auto& s : sends) CHECK(wait(s) == "");
  // A message larger than the prefetch takes is refused: its claim fails and nothing is held.
  std::shared_ptr<std::vector<std::uint8_t>> got;
  auto big = pattern((1 << 20) + 4, 5);
  auto s_big = send(*a, *b, value | 3, big);
  auto refused = claim(*b, value | 3, big->size(), got);
  CHECK(wait(refused).find("refused") != std::string::npos);
  wait(s_big);
  // A claim that waits when the prefetch stops fails.
  std::shared_ptr<std::vector<std::uint8_t>> never;
  auto waiting = claim(*b, value | 4, 64, never);
  b->stop_prefetch(mask, value);
  CHECK(wait(waiting).find("cancelled") != std::string::npos);

  // Nobody claims the first of two under a budget of one, kept 300 ms: it is dropped, and only
  // then does the second come in, to the claim that waits for it. The order is the budget's, so
  // no timing decides what this part sees.
  const std::uint64_t value2 = 0x0300000000000000ull;
  prefetch_probe probe2;
  probe2.most = 1 << 20;
  b->prefetch(mask, value2, (std::size_t{3} << 20) / 2, std::chrono::milliseconds(300), probe2.into());
  std::vector<std::future<std::string>> sends2;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> sent2;
  for (std::uint64_t k = 0; k < 2; ++k) {
    sent2.push_back(pattern(1 << 20, static_cast<std::uint8_t>(10 + k)));
    sends2.push_back(send(*a, *b, value2 | k, sent2.back()));
  }
  std::shared_ptr<std::vector<std::uint8_t>> second_got;
  auto second = claim(*b, value2 | 1, 1 << 20, second_got);
  CHECK(wait(second) == "");
  REQUIRE(second_got);
  CHECK(*second_got == *sent2[1]);
  CHECK(probe2.asked == 2);
  std::shared_ptr<std::vector<std::uint8_t>> late;
  auto first = claim(*b, value2 | 0, 1 << 20, late, std::chrono::milliseconds(100));
  CHECK(wait(first).find("arrived in time") != std::string::npos);
  for (auto& s : sends2) CHECK(wait(s) == "");
  b->stop_prefetch(mask, value2);
}

TEST_CASE("a transport whose last owner lets go inside its own callback ends without joining itself", "[ucx]") {
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  std::weak_ptr<ucx_transport> watch = a;
  auto dropped = std::make_shared<std::atomic<bool>>(false);
  auto called = std::make_shared<std::promise<void>>();
  auto called_f = called->get_future();
  auto bytes = pattern(64, 3);
  // The callback holds the last reference once this thread has let go of its own: it is released
  // on a's progress thread when the callback is done (before the fix: std::terminate, a thread
  // joining itself).
  a->send(b->address(), 0x0200000000000001ull, bytes->data(), bytes->size(), bytes,
          [keep = a, dropped, called](const std::string&) {
            while (!dropped->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            called->set_value();
          });
  a.reset();
  dropped->store(true);
  REQUIRE(called_f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(watch.expired());
  ucx_transport::end_process_transports();  // joins the thread that ended it
}

// A wire link let go inside a transfer's callback (its last owner gone) stops its prefetch from
// that callback, on the progress thread inside UCX's progress. Stopping there progressed UCX
// from inside its own callback, which UCX does not allow (found while looking for issue 31's
// item 5, whose cause was another: see the test of retired transports below). The stop now waits
// for the loop's next turn; every message after it arrives whole.
TEST_CASE("a prefetch stopped inside a claim callback leaves every later message whole", "[ucx]") {
  auto a = open_or_skip();
  if (!a) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto b = open_or_skip();
  const std::uint64_t mask = 0xFF00000000000000ull, old_run = 0x0400000000000000ull,
                      new_run = 0x0500000000000000ull;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    prefetch_probe early, later;
    b->prefetch(mask, old_run, std::size_t{64} << 20, std::chrono::seconds(120), early.into());
    b->prefetch(mask, new_run, std::size_t{64} << 20, std::chrono::seconds(120), later.into());
    // The old run's last tensor: its claim ends the old run's prefetch from inside the callback.
    auto stopped = std::make_shared<std::promise<std::string>>();
    auto stopped_f = stopped->get_future();
    // Large, so that it completes inside UCX's progress (a rendezvous), not inside the receive call.
    const std::size_t old_size = std::size_t{1} << 20;
    b->claim(old_run | 1, old_size, [b = b.get(), stopped, mask, old_run](std::shared_ptr<void>, const std::string& e) {
      b->stop_prefetch(mask, old_run);
      stopped->set_value(e);
    }, std::chrono::seconds(120));
    std::vector<std::future<std::string>> sends;
    auto first = pattern(old_size, 1);
    sends.push_back(send(*a, *b, old_run | 1, first));
    // Many of the next run's, small and large, queued behind it.
    std::vector<std::shared_ptr<std::vector<std::uint8_t>>> sent;
    for (std::uint64_t k = 0; k < 24; ++k) {
      sent.push_back(pattern(k % 3 == 0 ? (std::size_t{1} << 16) + 8 * k : 256 + 8 * k,
                             static_cast<std::uint8_t>(round + k)));
      sends.push_back(send(*a, *b, new_run | k, sent.back()));
    }
    CHECK(wait(stopped_f) == "");
    for (std::uint64_t k = 0; k < sent.size(); ++k) {
      CAPTURE(k);
      std::shared_ptr<std::vector<std::uint8_t>> got;
      auto claimed = claim(*b, new_run | k, sent[k]->size(), got);
      REQUIRE(wait(claimed) == "");
      REQUIRE(got);
      CHECK(*got == *sent[k]);
    }
    for (auto& s : sends) CHECK(wait(s) == "");
    b->stop_prefetch(mask, new_run);
  }
}

// Issue 31, item 5: every peer on a host writes into one shared-memory queue of a UCX worker (the
// mm FIFO), reserving a slot and then marking it written; a peer killed in between leaves a slot
// that is never marked, and the queue is read in order, so nothing sent through it afterwards
// arrives. A worker process whose run failed therefore lets go of its transports: the next run
// gets new ones, with new addresses, while what still holds the old ones keeps them.
TEST_CASE("retired process transports are replaced by new ones and the old go on for their holders", "[ucx]") {
  if (!ucx_transport::available()) {
    WARN("skipped: this build has no UCX");
    return;
  }
  auto old_local = ucx_transport::process(ucx_reach::local);
  REQUIRE(old_local);
  std::shared_ptr<ucx_transport> held = *old_local;
  auto again = ucx_transport::process(ucx_reach::local);
  REQUIRE(again);
  CHECK(again->get() == held.get());  // kept for the process until retired
  ucx_transport::retire_process_transports();
  auto fresh = ucx_transport::process(ucx_reach::local);
  REQUIRE(fresh);
  CHECK(fresh->get() != held.get());
  CHECK((*fresh)->address() != held->address());
  // The old one still carries what its holder sends, to the new one.
  const std::uint64_t mask = 0xFF00000000000000ull, value = 0x0600000000000000ull;
  prefetch_probe probe;
  (*fresh)->prefetch(mask, value, std::size_t{1} << 20, std::chrono::seconds(120), probe.into());
  auto bytes = pattern(4096, 6);
  auto sent = send(*held, **fresh, value | 1, bytes);
  std::shared_ptr<std::vector<std::uint8_t>> got;
  auto claimed = claim(**fresh, value | 1, bytes->size(), got);
  CHECK(wait(claimed) == "");
  REQUIRE(got);
  CHECK(*got == *bytes);
  CHECK(wait(sent) == "");
  (*fresh)->stop_prefetch(mask, value);
  held.reset();
  fresh->reset();
  ucx_transport::end_process_transports();
}
