// Hosts of their own: two network namespaces, each joined to this one by a veth pair, stand in
// for two hosts; a worker runs in each (its only address is its veth's), the driver here. The run
// reaches the in-process weights bit for bit. Where namespaces cannot be made (not root, no
// CAP_NET_ADMIN), the test says so and checks nothing else.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>

#include "fixtures.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

int sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// Two namespaces pwA<pid>, pwB<pid>; namespace k's address is 10.<o>.<k>.2, this side's .1.
class two_hosts {
 public:
  two_hosts() {
    const int pid = static_cast<int>(::getpid());
    octet_ = std::to_string(100 + pid % 150);
    for (int k = 0; k < 2; ++k) {
      const std::string ns = name(k), host = "pw" + std::to_string(pid % 100000) + (k ? "h" : "g");
      const std::string peer = host + "p", net = "10." + octet_ + "." + std::to_string(k + 1);
      if (sh("ip netns add " + ns) != 0) return;
      made_.push_back(ns);
      if (sh("ip link add " + host + " type veth peer name " + peer) != 0 ||
          sh("ip link set " + peer + " netns " + ns) != 0 ||
          sh("ip addr add " + net + ".1/24 dev " + host) != 0 || sh("ip link set " + host + " up") != 0 ||
          sh("ip netns exec " + ns + " ip addr add " + net + ".2/24 dev " + peer) != 0 ||
          sh("ip netns exec " + ns + " ip link set " + peer + " up") != 0 ||
          sh("ip netns exec " + ns + " ip link set lo up") != 0)
        return;
      links_.push_back(host);
    }
    ok_ = true;
  }
  ~two_hosts() {
    for (const auto& l : links_) sh("ip link del " + l);
    for (const auto& ns : made_) sh("ip netns del " + ns);
  }
  bool ok() const { return ok_; }
  std::string name(int k) const { return "pw" + std::to_string(::getpid()) + (k ? "B" : "A"); }
  std::string address(int k) const { return "10." + octet_ + "." + std::to_string(k + 1) + ".2"; }
  std::vector<std::string> launcher(int k) const { return {"/usr/sbin/ip", "netns", "exec", name(k)}; }

 private:
  std::string octet_;
  std::vector<std::string> made_, links_;
  bool ok_ = false;
};

}  // namespace

TEST_CASE("a driver and workers in two network namespaces reach the in-process weights", "[cli][workers]") {
  two_hosts hosts;
  if (!hosts.ok()) {
    WARN("skipped: network namespaces cannot be made here (ip netns add needs root and "
         "CAP_NET_ADMIN)");
    return;
  }
  scratch_dir dir;
  const std::string text = dir / "text.txt";
  write_file(text, small_text(60000));
  worker_cli a({}, hosts.address(0) + ":0", hosts.launcher(0));
  worker_cli b({}, hosts.address(1) + ":0", hosts.launcher(1));
  // Each worker's one address is its namespace's: nothing can pass over 127.0.0.1 between them.
  CHECK(a.address().rfind(hosts.address(0) + ":", 0) == 0);
  CHECK(b.address().rfind(hosts.address(1) + ":", 0) == 0);
  const std::vector<std::string> run{"train", "--model", "gpt-tiny", "--data", text, "--steps", "6",
                                     "--batch", "16", "--microbatches", "4", "--schedule", "2bw",
                                     "--stages", "2", "--replicas", "2", "--sample", "0",
                                     "--eval-windows", "4"};
  auto remote = run;
  remote.insert(remote.end(), {"--workers", a.address() + "," + b.address(), "--save", dir / "remote.safetensors"});
  auto local = run;
  local.insert(local.end(), {"--save", dir / "local.safetensors"});
  const cli_result r = run_cli(remote);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(run_cli(local).exit_code == 0);
  CHECK(read_file(dir / "remote.safetensors") == read_file(dir / "local.safetensors"));
  CHECK(contains(a.process().errors_so_far(), "hosting ranks"));
  CHECK(contains(b.process().errors_so_far(), "hosting ranks"));
}
