// use_network and connect_worker: the middleman's connect is asked as a request with a timeout,
// so a worker that never answers (a dropped SYN, a frozen process) costs `limit`, not forever.
#include "actors/network.hpp"

#include <set>

#include "actors/messages.hpp"
#include "actors/type_ids.hpp"

namespace pipeworks {

void use_network(caf::actor_system_config& config, std::chrono::milliseconds heartbeat,
                 std::chrono::milliseconds timeout) {
  config.load<caf::io::middleman>();
  config.set("middleman.heartbeat-interval", caf::timespan{heartbeat});
  config.set("middleman.connection-timeout", caf::timespan{timeout});
  // CAF's default work-stealing scheduler has idle threads poll for work (100 aggressive attempts,
  // 500 moderate ones 50 us apart, then every 10 ms): with a driver and workers sharing a host's
  // cores, that polling took the cores the stages compute on (a 2-process gpt-small step cost 1.36x
  // the one-process step), and a message waits for the next poll. The work-sharing scheduler
  // sleeps on a condition variable and wakes a thread as a message comes: the same step costs
  // 1.08x (bench/multiprocess_step.sh) and tensors between two processes went from 4.6 to 6.9 GB/s
  // at 1 MiB (bench/transport_bandwidth.sh).
  config.set("scheduler.policy", caf::atom("sharing"));
}

result<caf::actor> reach(caf::actor_system& sys, const host_port& at, std::chrono::milliseconds limit,
                         const std::string& who) {
  const std::string where = who + " (" + to_string(at) + ")";
  caf::scoped_actor self{sys};
  caf::strong_actor_ptr found;
  std::string error;
  self->request(sys.middleman().actor_handle(), limit, caf::connect_atom::value, at.host, at.port)
      .receive(
          [&](caf::node_id&, caf::strong_actor_ptr& p, std::set<std::string>&) { found = std::move(p); },
          [&](caf::error& e) {
            error = e == caf::sec::request_timeout
                        ? "no answer within " + std::to_string(limit.count()) + " ms"
                        : sys.render(e);
          });
  if (!error.empty()) return make_error("cannot reach " + where + ": " + error);
  if (!found) return make_error("cannot reach " + where + ": a CAF node answers there, but no pipeworks actor is published");
  return caf::actor_cast<caf::actor>(found);
}

result<connected_worker> connect_worker(caf::actor_system& sys, const host_port& at,
                                  std::chrono::milliseconds limit, const std::string& who) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + limit;
  const std::string where = who + " (" + to_string(at) + ")";
  auto worker = reach(sys, at, limit, who);
  if (!worker)
    return make_error(worker.message() + "; is `pipeworks worker --listen " + to_string(at) +
                      "` running there?");
  caf::scoped_actor self{sys};
  std::string error;
  connected_worker out;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  self->request(*worker, std::max(left, std::chrono::milliseconds(1)), hello_msg{remote_protocol_version, "driver", {}, {}, {}})
      .receive(
          [&](const hello_msg& h) {
            out.ucx = h.ucx;
            out.ucx_network = h.ucx_network;
            out.scope = h.scope;
            if (h.protocol != remote_protocol_version)
              error = "its protocol is version " + std::to_string(h.protocol) + ", the driver's " +
                      std::to_string(remote_protocol_version) +
                      "; run the same pipeworks version on every host";
          },
          [&](caf::error& e) {
            error = e == caf::sec::request_timeout
                        ? "no answer to the handshake within " + std::to_string(limit.count()) + " ms"
                        : error_text(sys, e);
          });
  if (!error.empty()) return make_error(where + ": " + error);
  out.actor = *worker;
  return out;
}

}  // namespace pipeworks
