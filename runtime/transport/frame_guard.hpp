// A guard in front of a CAF node's port: it accepts connections on the public address and relays
// each to CAF on 127.0.0.1, passing on a BASP frame from the network only once all of it has come
// and only if its length is within bounds. CAF 0.17.6 allocates whatever length a frame header
// claims (up to 4 GiB) before checking anything; behind the guard a peer must send the bytes it
// claims, and the guard holds at most a bounded total for all connections, and a bounded number
// of connections, each of which must handshake within a deadline (or it is closed).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/host_port.hpp"
#include "base/result.hpp"

namespace pipeworks {

class frame_guard {
 public:
  struct limits {
    std::uint32_t max_frame = 1u << 30;        // payload bytes of one BASP frame
    std::uint64_t max_held = std::uint64_t{2} << 30;  // frames being received, all connections
    int max_connections = 256;
    int handshake_ms = 10000;  // a connection must have sent its whole handshake by then
  };

  // Listens on `at` (port 0: any free one) and relays every connection to 127.0.0.1:inner_port.
  // `log` hears each refused connection and why.
  static result<std::unique_ptr<frame_guard>> start(const host_port& at, std::uint16_t inner_port,
                                                   limits lim,
                                                   std::function<void(const std::string&)> log);
  ~frame_guard();
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  frame_guard() = default;
  void loop();

  int listener_ = -1, wake_[2] = {-1, -1};
  std::uint16_t port_ = 0, inner_port_ = 0;
  limits lim_;
  std::function<void(const std::string&)> log_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pipeworks
