// use_network and connect_worker: the middleman's connect is asked as a request with a timeout,
// so a worker that never answers (a dropped SYN, a frozen process) costs `limit`, not forever.
#include "actors/network.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

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

namespace {

// Whether a TCP connection to `at` can be made within `limit`: a non-blocking connect of our own,
// waited for with poll. CAF's middleman connects with a blocking connect(), which a dropped SYN
// (a full backlog, a firewall) holds for the kernel's two minutes of retries whatever the
// request's timeout, and the actor system's shutdown with it; so it is asked only once the
// address has answered. "" when it did, else why not.
std::string probe_tcp(const host_port& at, std::chrono::milliseconds limit) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + limit;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &found); e != 0)
    return std::string("cannot resolve ") + at.host + ": " + ::gai_strerror(e);
  std::string why = "no address of " + at.host;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
      socklen_t len = sizeof err;
      if (n == 1) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      else err = ETIMEDOUT;
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(found);
      return "";
    }
    why = err == ETIMEDOUT ? std::string("no answer to a TCP connect (a full backlog, or a firewall?)")
                           : std::string(std::strerror(err));
  }
  ::freeaddrinfo(found);
  return why;
}

}  // namespace

result<caf::actor> reach(caf::actor_system& sys, const host_port& at, std::chrono::milliseconds limit,
                         const std::string& who) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + limit;
  const std::string where = who + " (" + to_string(at) + ")";
  // Until the deadline, as torchrun's rendezvous does: a peer still starting (or briefly stopped)
  // refuses or drops a first connection and takes a later one.
  std::string error;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) break;
    error = probe_tcp(at, left);
    if (error.empty()) {
      caf::scoped_actor self{sys};
      caf::strong_actor_ptr found;
      const auto rest = std::max(std::chrono::milliseconds(1),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
      self->request(sys.middleman().actor_handle(), rest, caf::connect_atom::value, at.host, at.port)
          .receive(
              [&](caf::node_id&, caf::strong_actor_ptr& p, std::set<std::string>&) { found = std::move(p); },
              [&](caf::error& e) {
                error = e == caf::sec::request_timeout
                            ? "no answer within " + std::to_string(limit.count()) + " ms"
                            : sys.render(e);
              });
      if (error.empty()) {
        if (!found)
          return make_error("cannot reach " + where +
                            ": a CAF node answers there, but no pipeworks actor is published");
        return caf::actor_cast<caf::actor>(found);
      }
    }
    std::this_thread::sleep_for(std::min(std::chrono::milliseconds(200),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::max(deadline - clock::now(), clock::duration::zero()))));
  }
  if (error.empty()) error = "no answer within " + std::to_string(limit.count()) + " ms";
  return make_error("cannot reach " + where + ": " + error + " (tried for " +
                    std::to_string(limit.count()) + " ms, --connect-timeout-ms)");
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
  // A worker reached late in the window still gets a moment for the handshake.
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                             std::chrono::milliseconds(2000));
  self->request(*worker, left, hello_msg{remote_protocol_version, "driver", {}, {}, {}})
      .receive(
          [&](const hello_msg& h) {
            out.ucx = h.ucx;
            out.ucx_network = h.ucx_network;
            out.scope = h.scope;
            out.max_frame = h.max_frame;
            if (h.protocol != remote_protocol_version)
              error = "its protocol is version " + std::to_string(h.protocol) + ", the driver's " +
                      std::to_string(remote_protocol_version) +
                      "; run the same pipeworks version on every host";
          },
          [&](caf::error& e) {
            error = e == caf::sec::request_timeout
                        ? "no answer to the handshake within " + std::to_string(left.count()) + " ms"
                        : error_text(sys, e);
          });
  if (!error.empty()) return make_error(where + ": " + error);
  out.actor = *worker;
  return out;
}

}  // namespace pipeworks
