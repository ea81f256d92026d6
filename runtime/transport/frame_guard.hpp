// A guard in front of a CAF node's port: it accepts connections on the public address and relays
// each to CAF on 127.0.0.1, passing on a BASP frame from the network only once all of it has come
// and only if its length is within bounds. CAF 0.17.6 allocates whatever length a frame header
// claims (up to 4 GiB) before checking anything; behind the guard a peer must send the bytes it
// claims, and the guard holds at most a bounded total for all connections, and a bounded number
// of connections, each of which must handshake within a deadline (or it is closed). A frame of a
// peer that has handshaken which is refused for its size is told to the process (on_refused) and
// the connection carries nothing more inbound, but stays open: the process can still answer the
// peer, naming what it refused, instead of looking lost to it.
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
    int refused_linger_ms = 30000;  // a connection whose frame was refused is closed by then
  };

  // A frame refused for its size on a connection that had handshaken.
  struct refusal {
    std::string peer;       // "host:port" of the connection
    std::string kind;       // what the frame held: "pipeworks::activation_msg", or its BASP kind
    std::uint64_t bytes = 0;  // the frame's payload
    std::uint64_t limit = 0;  // the bound it broke
    bool held = false;        // the bound is on all frames being received at once (max_held)
    std::uint64_t need = 0;   // the bound that would have passed it
    std::uint64_t to_actor = 0;  // the actor it was for (its BASP header's destination)
  };

  // Listens on `at` (port 0: any free one) and relays every connection to 127.0.0.1:inner_port.
  // `log` hears each refused connection and why; `on_refused` (on the guard's thread) each frame
  // refused for its size from a peer that had handshaken, once the frame's first bytes have come
  // (they name its kind). Without `on_refused` such a connection is closed at once.
  static result<std::unique_ptr<frame_guard>> start(const host_port& at, std::uint16_t inner_port,
                                                   limits lim,
                                                   std::function<void(const std::string&)> log,
                                                   std::function<void(const refusal&)> on_refused = {});
  ~frame_guard();
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;

  std::uint16_t port() const { return port_; }

  // Closes every connection whose frame was refused (the process has told its peers and its run
  // ended), so that no later run finds a connection that passes nothing on.
  void close_refused();

 private:
  frame_guard() = default;
  void loop();

  int listener_ = -1, wake_[2] = {-1, -1};
  std::uint16_t port_ = 0, inner_port_ = 0;
  limits lim_;
  std::function<void(const std::string&)> log_;
  std::function<void(const refusal&)> on_refused_;
  std::atomic<bool> stop_{false}, close_refused_{false};
  std::thread thread_;
};

}  // namespace pipeworks
