// Hostile frames to a worker's port: 100,000 truncated, random, oversized, empty and never-finished
// BASP frames over 2,000 connections. The worker's frame guard refuses what claims too much or
// breaks BASP's order (CAF 0.17.6 crashed on an empty handshake), and passes nothing unfinished
// on; the worker stays alive, its memory flat, and hosts a run after.
#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "fixtures.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

long resident_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> value;
      return value;
    }
    in.ignore(1 << 16, '\n');
  }
  return -1;
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval limit{0, 200000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  return fd;
}

// A BASP header (32 bytes): operation, padding, flags, payload length (big-endian), the rest.
std::string header(std::mt19937_64& rng, std::uint32_t payload, int op = -1) {
  std::string h(32, '\0');
  for (char& c : h) c = static_cast<char>(rng());
  h[0] = static_cast<char>(op >= 0 ? op : static_cast<int>(rng() % 9));
  const std::uint32_t be = htonl(payload);
  std::memcpy(h.data() + 4, &be, 4);
  return h;
}

}  // namespace

TEST_CASE("a worker survives 100000 hostile frames with flat memory and hosts a run after", "[cli][workers]") {
  worker_cli w({"--max-frame-mb", "16"});
  const int port = std::stoi(w.address().substr(w.address().rfind(':') + 1));
  std::mt19937_64 rng(1126);
  const long before = resident_kib(w.process().pid());
  REQUIRE(before > 0);
  int frames = 0, connections = 0;
  while (frames < 100000) {
    const int fd = connect_to(port);
    REQUIRE(fd >= 0);
    ++connections;
    std::string burst;
    if (rng() % 2) {  // half the connections open with a client handshake of random content
      const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng() % 64);
      burst += header(rng, n, 1);
      for (std::uint32_t i = 0; i < n; ++i) burst += static_cast<char>(rng());
    }
    for (int k = 0; k < 50; ++k, ++frames) {
      switch (rng() % 6) {
        case 5:  // an empty frame of any kind (CAF 0.17.6 crashed on an empty handshake)
          burst += header(rng, 0, static_cast<int>(rng() % 7));
          break;
        case 0:  // shorter than a header
          burst += header(rng, 0).substr(0, rng() % 31);
          break;
        case 1:  // claims almost 4 GiB
          burst += header(rng, 0xFFFFFFF0u);
          break;
        case 2:  // claims 16 MiB (allowed) and never sends it
          burst += header(rng, 16u << 20);
          break;
        case 3: {  // a whole frame of random bytes
          const std::uint32_t n = static_cast<std::uint32_t>(rng() % 256);
          burst += header(rng, n);
          for (std::uint32_t i = 0; i < n; ++i) burst += static_cast<char>(rng());
          break;
        }
        default:  // random bytes
          for (int i = static_cast<int>(rng() % 64); i > 0; --i) burst += static_cast<char>(rng());
      }
    }
    [[maybe_unused]] ssize_t sent = ::send(fd, burst.data(), burst.size(), MSG_NOSIGNAL);
    ::close(fd);
  }
  // The worker refused what claimed too much (waited for, however long the worker takes to read
  // the frames), is alive, and its memory did not grow with what the frames claimed.
  const std::string refusal = "more than the 16777216 a frame may hold";
  CHECK(w.process().wait_for([&] { return contains(w.process().errors_so_far(), refusal); }));
  // A moment for a crash or a growth to show; a slow machine can only hide one, never fail a
  // worker that is right.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE_FALSE(w.process().wait_exit(std::chrono::milliseconds(0)));
  const long after = resident_kib(w.process().pid());
  INFO(connections << " connections; resident " << before << " KiB before, " << after << " KiB after");
  CHECK(after < before + 64 * 1024);
  // And it still hosts a run (its ranks with another worker's), reaching the in-process weights.
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  worker_cli other;
  std::vector<std::string> run{"train", "--model", "gpt-tiny", "--data", text, "--steps", "4",
                               "--batch", "16", "--microbatches", "4", "--schedule", "1f1b",
                               "--stages", "2", "--sample", "0", "--eval-windows", "4"};
  auto remote = run;
  remote.insert(remote.end(), {"--workers", w.address() + "," + other.address(), "--save",
                               dir / "remote.safetensors"});
  auto local = run;
  local.insert(local.end(), {"--save", dir / "local.safetensors"});
  const cli_result r = run_cli(remote);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(run_cli(local).exit_code == 0);
  CHECK(read_file(dir / "remote.safetensors") == read_file(dir / "local.safetensors"));
}
