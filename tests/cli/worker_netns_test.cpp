// Hosts of their own: two network namespaces on a bridge with this one stand in for two hosts; a
// worker runs in each (its only address is its veth's), the driver here. Runs reach the in-process
// weights bit for bit, with the tensors over TCP. Where namespaces cannot be made (not root, no
// CAP_NET_ADMIN), the test says so and checks nothing else.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "fixtures.hpp"
#include "worker_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

int sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Two namespaces pw<pid>A, pw<pid>B on one bridge (a switch) with this namespace: namespace k
// is 10.<o>.0.<k + 2>, this side 10.<o>.0.1, so the workers reach each other and the driver.
class two_hosts {
 public:
  two_hosts() {
    const int pid = static_cast<int>(::getpid());
    octet_ = std::to_string(100 + pid % 150);
    bridge_ = "pw" + std::to_string(pid % 100000) + "br";
    if (sh("ip link add " + bridge_ + " type bridge") != 0) return;
    links_.push_back(bridge_);
    if (sh("ip addr add 10." + octet_ + ".0.1/24 dev " + bridge_) != 0 ||
        sh("ip link set " + bridge_ + " up") != 0)
      return;
    for (int k = 0; k < 2; ++k) {
      const std::string ns = name(k), host = "pw" + std::to_string(pid % 100000) + (k ? "h" : "g");
      const std::string peer = host + "p";
      if (sh("ip netns add " + ns) != 0) return;
      made_.push_back(ns);
      if (sh("ip link add " + host + " type veth peer name " + peer) != 0) return;
      links_.push_back(host);
      if (sh("ip link set " + peer + " netns " + ns) != 0 ||
          sh("ip link set " + host + " master " + bridge_) != 0 || sh("ip link set " + host + " up") != 0 ||
          sh("ip netns exec " + ns + " ip addr add " + address(k) + "/24 dev " + peer) != 0 ||
          sh("ip netns exec " + ns + " ip link set " + peer + " up") != 0 ||
          sh("ip netns exec " + ns + " ip link set lo up") != 0)
        return;
    }
    ok_ = true;
  }
  ~two_hosts() {
    for (auto l = links_.rbegin(); l != links_.rend(); ++l) sh("ip link del " + *l);
    for (const auto& ns : made_) sh("ip netns del " + ns);
  }
  bool ok() const { return ok_; }
  std::string name(int k) const { return "pw" + std::to_string(::getpid()) + (k ? "B" : "A"); }
  std::string address(int k) const { return "10." + octet_ + ".0." + std::to_string(k + 2); }
  std::vector<std::string> launcher(int k) const { return {"/usr/sbin/ip", "netns", "exec", name(k)}; }

 private:
  std::string octet_, bridge_;
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
  // 2bw w = 2: each worker holds a replica and talks to the driver; 1f1b p = 2: the workers
  // pass activations and gradients to each other.
  for (const std::vector<std::string>& shape :
       {std::vector<std::string>{"--schedule", "2bw", "--replicas", "2"},
        std::vector<std::string>{"--schedule", "1f1b"}}) {
    INFO(shape[1]);
    std::vector<std::string> run{"train", "--model", "gpt-tiny", "--data", text, "--steps", "6",
                                 "--batch", "16", "--microbatches", "4", "--stages", "2",
                                 "--sample", "0", "--eval-windows", "4"};
    run.insert(run.end(), shape.begin(), shape.end());
    auto remote = run;
    remote.insert(remote.end(), {"--workers", a.address() + "," + b.address(), "--save", dir / "remote.safetensors"});
    auto local = run;
    local.insert(local.end(), {"--save", dir / "local.safetensors"});
    const cli_result r = run_cli(remote);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(run_cli(local).exit_code == 0);
    CHECK(read_file(dir / "remote.safetensors") == read_file(dir / "local.safetensors"));
  }
  // Between namespaces UCX used TCP, never shared memory (which would stall: its wake-ups go
  // through sockets of one namespace). A worker logs its transports when a run ends.
  for (worker_cli* w : {&a, &b}) {
    w->process().wait_for([&] { return count_of(w->process().errors_so_far(), "the run ended") >= 2; });
    const std::string log = w->process().errors_so_far();
    INFO(log);
    CHECK(count_of(log, "hosting ranks of a run for its driver (tensors over UCX)") == 2);
    CHECK(count_of(log, "the run ended") == 2);
    CHECK(count_of(log, " over tcp/") >= 2);  // each run sent over TCP
    CHECK_FALSE(contains(log, "posix"));
    CHECK_FALSE(contains(log, "sysv"));
  }
  // Both runs had the workers send to each other (2bw: the all-reduce of the two replicas; 1f1b:
  // the activations and gradients between the stages).
  CHECK(contains(a.process().errors_so_far(), "to process 2 over tcp"));
  CHECK(contains(b.process().errors_so_far(), "to process 1 over tcp"));
}
