// Hostile input to the wire's decoder: 100,000 random, truncated and oversized wire messages (CAF
// bytes, tickets, tags) go to a receiving actor's wire link, and 100,000 tensors no message
// announces go to its UCX worker. None may crash it, none may make it allocate what a ticket
// claims before a tensor comes, and its memory stays flat. A tensor announced and never sent is
// reported after the run's bound, naming the process, the receiver, the message and its step.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "actors/type_ids.hpp"
#include "actors/wire.hpp"
#include "tests/eventually.hpp"

using namespace pipeworks;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

std::size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// A real message from process 1 whose one tensor travels beside it, as its sender would write it.
wire_msg real_message(caf::actor_system& sys, std::uint64_t tag, int microbatch = 3) {
  activation_msg m;
  m.microbatch = microbatch;
  m.data = *tensor_payload::allocate(dtype::f32, {4, 8});
  transport::wire_outbox out;
  wire_msg w;
  caf::binary_serializer sink(sys, w.bytes);
  transport::outbox = &out;
  caf::message msg = caf::make_message(std::move(m));
  auto err = sink(msg);
  transport::outbox = nullptr;
  REQUIRE_FALSE(err);
  w.tag = tag;
  w.tickets.push_back(wire_ticket{static_cast<std::uint8_t>(dtype::f32), {4, 8}});
  return w;
}

// This process as process 0 of a run whose process 1, of the same scope, is a peer at `other`
// (a UCX worker address).
wire_peers two_processes(const caf::actor_system& sys, const wire_endpoints& eps, const ucx_address& other,
                         std::uint16_t nonce) {
  wire_peers peers;
  peers.nodes = {sys.node(), caf::node_id{}};
  peers.scopes = {eps.scope, eps.scope};
  peers.local_addresses = {eps.local->address(), other};
  peers.network_addresses = {eps.network->address(), other};
  peers.nonce = nonce;
  return peers;
}

using test::eventually;

}  // namespace

TEST_CASE("hostile wire messages never crash a receiver and leave its memory flat", "[wire]") {
  if (!ucx_transport::available()) {
    WARN("skipped: this build has no UCX");
    return;
  }
  caf::actor_system_config cfg;
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  auto eps = process_endpoints();
  REQUIRE(eps);
  // Process 1 is a peer that never sends a tensor: every one announced is awaited in vain.
  const wire_peers peers = two_processes(sys, *eps, eps->local->address(), 0x5eed);
  auto link = std::make_shared<wire_link>(sys, *eps, 0, peers, std::uint64_t{1} << 20,
                                          std::chrono::milliseconds(20));
  // The driver hears of every message refused; count the kinds.
  auto refused = std::make_shared<std::atomic<int>>(0), too_large = std::make_shared<std::atomic<int>>(0),
       never_came = std::make_shared<std::atomic<int>>(0), unreadable = std::make_shared<std::atomic<int>>(0);
  auto driver = sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(caf::drop);
    return {
        [=](const stage_failure& f) {
          ++*refused;
          if (f.message.find("larger than this run allows") != std::string::npos) ++*too_large;
          if (f.message.find("arrived in time") != std::string::npos) ++*never_came;
          if (f.message.find("could not be read") != std::string::npos ||
              f.message.find("did not use all") != std::string::npos)
            ++*unreadable;
        },
        [=](ping_atom) { return ping_atom::value; },
    };
  });
  link->set_driver(driver);
  // Every message the link is handed ends once: refused (to the driver, at once or after the
  // grace) or delivered (an activation, or whatever else flipped bits decode to).
  auto delivered = std::make_shared<std::atomic<int>>(0), arrived = std::make_shared<std::atomic<int>>(0);
  auto rx = sys.spawn([link, delivered, arrived](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler([arrived](caf::scheduled_actor* a, caf::message_view& x) {
      ++*arrived;
      return caf::drop(a, x);
    });
    return {
        [=](wire_msg& w) { link->accept(self, std::move(w)); },
        [=](activation_msg& m) {
          ++*arrived;
          if (!m.data.empty()) ++*delivered;  // a flipped bit may leave a valid, tensorless message
        },
        [=](ping_atom) { return ping_atom::value; },
    };
  });
  caf::scoped_actor me{sys};
  auto sync = [&] {
    me->request(rx, std::chrono::seconds(120), ping_atom::value).receive([](ping_atom) {}, [](caf::error&) {
      FAIL("the receiver stopped answering");
    });
  };
  int handed = 0;  // messages handed to the link
  // Until every message handed over has ended (those awaiting a tensor end after the grace, on a
  // timer): memory is measured when nothing waits, not after a sleep a busy machine outlasts.
  auto settle = [&] {
    sync();
    REQUIRE(eventually([&] { return *refused + *arrived == handed; }));
    sync();
  };

  std::mt19937_64 rng(20261126);
  auto byte = [&] { return static_cast<char>(rng() & 0xFF); };
  const wire_msg good = real_message(sys, (std::uint64_t{1} << 56) | (std::uint64_t{0x5eed} << 40));
  const int inputs = 100000;
  std::size_t rss_warm = 0;
  int decoded = 0;
  for (int i = 0; i < inputs; ++i) {
    if (i == inputs / 5) {
      settle();
      rss_warm = resident_bytes();
    }
    wire_msg w;
    switch (i % 4) {
      case 0: {  // a wire message's bytes, as CAF would hand them over, truncated or flipped
        wire_msg sent = good;
        sent.tag = rng();
        std::vector<char> raw;
        caf::binary_serializer sink(sys, raw);
        REQUIRE_FALSE(sink(sent));
        if (rng() % 2) raw.resize(rng() % raw.size());
        for (int f = static_cast<int>(rng() % 3); f > 0 && !raw.empty(); --f)
          raw[rng() % raw.size()] ^= static_cast<char>(1 << (rng() % 8));
        caf::binary_deserializer source(sys, raw);
        if (source(w)) continue;
        ++decoded;
        break;
      }
      case 1: {  // tickets of any type and shape (negative, huge, many dimensions), random bytes
        w.tag = rng();
        const int tickets = static_cast<int>(rng() % 4);
        for (int t = 0; t < tickets; ++t) {
          wire_ticket k{static_cast<std::uint8_t>(rng() % 6), {}};
          const int dims = static_cast<int>(rng() % 20);
          for (int d = 0; d < dims; ++d)
            k.shape.push_back(static_cast<std::int64_t>(rng() >> (rng() % 64)) * (rng() % 7 == 0 ? -1 : 1));
          w.tickets.push_back(k);
        }
        w.bytes.resize(rng() % 64);
        for (char& c : w.bytes) c = byte();
        break;
      }
      case 2: {  // a real message, truncated or with flipped bits, its tensor never sent
        w = good;
        w.tag = (good.tag & ~((std::uint64_t{1} << 40) - 1)) | (static_cast<std::uint64_t>(i) << 4);
        if (rng() % 2) w.bytes.resize(rng() % w.bytes.size());
        for (int f = static_cast<int>(rng() % 4); f > 0 && !w.bytes.empty(); --f)
          w.bytes[rng() % w.bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
        if (rng() % 2) w.tickets.clear();  // then the mangled bytes are read at once
        break;
      }
      default: {  // a real message whose ticket claims another shape, or far more than allowed
        w = good;
        w.tag = (good.tag & ~((std::uint64_t{1} << 40) - 1)) | (static_cast<std::uint64_t>(i) << 4);
        w.tickets[0].shape = rng() % 2 ? shape_t{1 << 20, 1 << 20} : shape_t{8, 4};
        break;
      }
    }
    caf::anon_send(rx, std::move(w));
    ++handed;
    // What waits (in the receiver's mailbox, the link, the timers and the driver's mailbox) is
    // bounded by a settle every 5,000 inputs, not by how fast this machine drains it; so is the
    // memory it takes at its peak, which the resident size keeps.
    if (i % 5000 == 4999) settle();
    else if (i % 1000 == 999) sync();
  }
  settle();
  const std::size_t rss_end = resident_bytes();
  INFO("resident after a fifth: " << rss_warm << " bytes, at the end: " << rss_end);
  me->request(driver, std::chrono::seconds(120), ping_atom::value).receive([](ping_atom) {}, [](caf::error&) {});
  INFO(*refused << " refused, " << *too_large << " too large, " << *never_came << " never came, "
                << *unreadable << " unreadable");
  CHECK(decoded > 0);        // some mangled bytes did decode, and went on to the link
  CHECK(*too_large > 0);     // refused from the ticket alone, before any allocation
  CHECK(*never_came > 0);    // awaited in vain, then given up
  CHECK(*unreadable > 0);    // mangled bytes refused by the reader, not crashed on
  CHECK(*refused > inputs / 2);
  CHECK(*delivered == 0);    // no message with a tensor that never came was delivered
  CHECK(rss_end < rss_warm + (std::size_t{16} << 20));  // flat: within 16 MiB over 80,000 more
  caf::anon_send_exit(rx, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
}

TEST_CASE("hostile UCX tensors never crash a receiver and leave its memory flat", "[wire]") {
  // A peer that knows the run's nonce sends 100,000 tensors no message announces: empty, of odd
  // lengths, over the run's bound, twice under one tag, eager and rendezvous. The receiver takes
  // in what its budget allows, refuses the rest, drops what nobody claims, and afterwards still
  // delivers a real message whose tensor comes beside it.
  if (!ucx_transport::available()) {
    WARN("skipped: this build has no UCX");
    return;
  }
  caf::actor_system_config cfg;
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  auto eps = process_endpoints();
  REQUIRE(eps);
  auto attacker = ucx_transport::open(ucx_reach::local);
  REQUIRE(attacker);
  const std::uint16_t nonce = 0x5eef;
  const wire_peers peers = two_processes(sys, *eps, (*attacker)->address(), nonce);
  const std::uint64_t bound = std::uint64_t{1} << 20;
  auto link = std::make_shared<wire_link>(sys, *eps, 0, peers, bound, std::chrono::milliseconds(20));
  // The microbatch numbers of the real messages delivered, and how many were.
  auto delivered = std::make_shared<std::atomic<int>>(0);
  auto numbers = std::make_shared<std::vector<int>>();
  auto numbers_mu = std::make_shared<std::mutex>();
  auto rx = sys.spawn([link, delivered, numbers, numbers_mu](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(caf::drop);
    return {
        [=](wire_msg& w) { link->accept(self, std::move(w)); },
        [=](activation_msg& m) {
          if (m.data.shape() != shape_t{4, 8}) return;
          {
            std::lock_guard lock(*numbers_mu);
            numbers->push_back(m.microbatch);
          }
          ++*delivered;
        },
        [=](ping_atom) { return ping_atom::value; },
    };
  });
  const std::uint64_t run_bits = (std::uint64_t{1} << 56) | (std::uint64_t{nonce} << 40);
  auto junk = std::make_shared<std::vector<std::uint8_t>>(bound + 64, 0xA5);
  std::atomic<int> completed{0};
  std::mt19937_64 rng(20261127);
  auto length = [&]() -> std::size_t {
    switch (rng() % 10) {
      case 0: return 0;
      case 1: return 1 + rng() % 7;                    // not a whole number of elements
      case 2: return bound + 4 * (1 + rng() % 16);     // over the run's bound
      case 3: case 4: return 4 * (2048 + rng() % 14000);  // rendezvous, within the bound
      default: return 4 * (1 + rng() % 2000);          // eager
    }
  };
  const int inputs = 100000;
  std::size_t rss_warm = 0;
  std::uint64_t last_tag = run_bits;
  for (int i = 0; i < inputs; ++i) {
    if (i == inputs / 5) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      rss_warm = resident_bytes();
    }
    // Every tenth tensor reuses the tag before it; the rest take fresh ones.
    const std::uint64_t tag = i % 10 == 9 ? last_tag : run_bits | (static_cast<std::uint64_t>(i) + 1);
    last_tag = tag;
    (*attacker)->send(eps->local->address(), tag, junk->data(), length(), junk,
                      [&completed](const std::string&) { ++completed; });
    // At most 2,000 sends outstanding: each completes once the receiver has taken it in,
    // refused it or dropped it.
    if (i + 1 - completed.load() > 2000) REQUIRE(eventually([&] { return i + 1 - completed.load() <= 2000; }));
  }
  REQUIRE(eventually([&] { return completed.load() >= inputs; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // what nobody claimed expires
  const std::size_t rss_end = resident_bytes();
  // A real message after all that: its tensor first, then its announcement. One sent while junk
  // not yet dropped fills the budget waits in UCX past its claim's patience and is given up, as
  // it must be; so one goes every 100 ms, each under a tag and number of its own, until one is
  // delivered (a slow machine takes more tries, and never fails a receiver that is right).
  auto tensor = std::make_shared<std::vector<std::uint8_t>>(4 * 8 * 4, 0x11);
  int tries = 0;
  for (; tries < 1200 && *delivered == 0; ++tries) {
    const std::uint64_t real = run_bits | (0xF0000ull + static_cast<std::uint64_t>(tries));
    (*attacker)->send(eps->local->address(), real, tensor->data(), tensor->size(), tensor, [](const std::string&) {});
    caf::anon_send(rx, real_message(sys, real, tries));
    for (int k = 0; k < 20 && *delivered == 0; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  INFO("resident after a fifth: " << rss_warm << " bytes, at the end: " << rss_end << "; " << tries
                                  << " real messages sent");
  CHECK(*delivered >= 1);
  {
    std::lock_guard lock(*numbers_mu);
    std::vector<int> once = *numbers;
    std::sort(once.begin(), once.end());
    CHECK(std::adjacent_find(once.begin(), once.end()) == once.end());  // none delivered twice
  }
  // Flat: what the receiver holds is bounded by its budget (64 MiB), not by the 80,000 more inputs.
  CHECK(rss_end < rss_warm + (std::size_t{80} << 20));
  caf::anon_send_exit(rx, caf::exit_reason::user_shutdown);
}

// The bound on a tensor's arrival is the run's (the link's grace: --peer-timeout-ms), not a fixed
// one, and what did not arrive is named. The tensor here is never sent, so the outcome does not
// depend on how long anything takes.
TEST_CASE("a tensor that never comes is reported naming the process, the receiver, the message and the wait", "[wire]") {
  if (!ucx_transport::available()) {
    WARN("skipped: this build has no UCX");
    return;
  }
  caf::actor_system_config cfg;
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  auto eps = process_endpoints();
  REQUIRE(eps);
  const wire_peers peers = two_processes(sys, *eps, eps->local->address(), 0x7a11);
  auto link = std::make_shared<wire_link>(sys, *eps, 0, peers, std::uint64_t{1} << 20,
                                          std::chrono::milliseconds(137));
  link->set_microbatches(2);
  caf::scoped_actor driver{sys};
  link->set_driver(caf::actor_cast<caf::actor>(driver));
  auto rx = sys.spawn([link](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(caf::drop);
    return {[=](wire_msg& w) { link->accept(self, std::move(w), "rank 1 (replica 0, stage 1)"); }};
  });
  activation_msg about;
  about.microbatch = 3;
  wire_msg w = real_message(sys, (std::uint64_t{1} << 56) | (std::uint64_t{0x7a11} << 40), 3);
  w.what = wire_what(about, 2);
  REQUIRE(w.what == "pipeworks.activation_msg (microbatch 3, step 2, stage 0, replica 0)");
  driver->send(rx, std::move(w));
  std::string heard;
  driver->receive([&](const stage_failure& f) { heard = f.message; },
                  caf::after(std::chrono::minutes(2)) >> [] {});  // a guard against a hang only
  INFO(heard);
  CHECK(heard == "process 0: rank 1 (replica 0, stage 1) did not get tensor 1 of 1 of pipeworks.activation_msg "
                 "(microbatch 3, step 2, stage 0, replica 0) from process 1 (UCX tag 017a110000000000): "
                 "no message with its tag arrived in time (UCX) (waited 137 ms after its message came)");
  caf::anon_send_exit(rx, caf::exit_reason::user_shutdown);
}
