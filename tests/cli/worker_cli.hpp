// Test helper: a `pipeworks worker --listen 127.0.0.1:0` (or another address, or in a network
// namespace) in the background, with the address it printed, for tests that run a driver and
// workers as separate processes.
#pragma once
#include <string>
#include <vector>

#include "background_cli.hpp"

namespace pipeworks::cli_test {

class worker_cli {
 public:
  // `listen`: the address to listen on; `launcher`: what runs it (ip netns exec NS).
  explicit worker_cli(std::vector<std::string> more = {}, const std::string& listen = "127.0.0.1:0",
                      const std::vector<std::string>& launcher = {})
      : proc_(args(std::move(more), listen), launcher) {
    const std::string prefix = "listening on ";
    proc_.wait_for([&] { return contains(proc_.output_so_far(), "\n"); });
    const std::string out = proc_.output_so_far();
    const auto at = out.find(prefix);
    if (at == std::string::npos) throw std::runtime_error("the worker did not start: " + out);
    address_ = out.substr(at + prefix.size());
    address_ = address_.substr(0, address_.find('\n'));
  }
  const std::string& address() const { return address_; }
  background_cli& process() { return proc_; }

 private:
  static std::vector<std::string> args(std::vector<std::string> more, const std::string& listen) {
    std::vector<std::string> a{"worker", "--listen", listen};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  background_cli proc_;
  std::string address_;
};

}  // namespace pipeworks::cli_test
