// CAF's network layer for runs across processes: the middleman with heartbeats on (CAF 0.17 has
// them off), connecting to a worker within a deadline (remote_actor has none), the handshake.
#pragma once
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <string>

#include "base/host_port.hpp"
#include "base/result.hpp"
#include "runtime/transport/ucx_transport.hpp"

namespace pipeworks {

// Loads the middleman: every `heartbeat` a heartbeat to each peer; a peer silent for `timeout`
// is disconnected, and every actor of it is then down (remote_link_unreachable).
void use_network(caf::actor_system_config& config, std::chrono::milliseconds heartbeat,
                 std::chrono::milliseconds timeout);

// The actor published at `at`, within `limit`; errors name `who` and the address.
result<caf::actor> reach(caf::actor_system& sys, const host_port& at, std::chrono::milliseconds limit,
                         const std::string& who);

// A worker connected and greeted: its actor and its UCX address (empty where it has no UCX).
struct connected_worker {
  caf::actor actor;
  ucx_address ucx, ucx_network;
  std::string scope;
  std::uint64_t max_frame = 0;  // the largest CAF frame it accepts (0: no bound)
};

// Connects to the worker actor published at `at` and exchanges hellos, all within `limit`.
// Errors name `who` ("worker 1 at 127.0.0.1:7001"), the address and what to check.
result<connected_worker> connect_worker(caf::actor_system& sys, const host_port& at,
                                  std::chrono::milliseconds limit, const std::string& who);

}  // namespace pipeworks
