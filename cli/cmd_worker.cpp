// `pipeworks worker`: a process that hosts the ranks a driver's plan places on it. It listens on
// --listen HOST:PORT (port 0: any free port, printed), serves one run at a time and then waits for
// the next driver; with --once it exits when its run ends (0 if the run succeeded, else 1).
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "actors/network.hpp"
#include "actors/type_ids.hpp"
#include "actors/worker_actor.hpp"
#include "base/host_port.hpp"
#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/stop_signals.hpp"

namespace pipeworks::cli {
namespace {

struct worker_options {
  std::string listen = "127.0.0.1:0";
  bool once = false;
  int heartbeat_ms = 250, peer_timeout_ms = 2000;
};

// Where the worker's runs end: the main thread waits here for --once or a stop signal.
struct run_ends {
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0;
  bool last_ok = true;
};

int run_worker(const worker_options& o) {
  auto at = parse_host_port(o.listen, true);
  if (!at) throw CLI::ValidationError("--listen", at.message());
  if (o.heartbeat_ms < 10 || o.heartbeat_ms > 60000)
    throw CLI::ValidationError("--heartbeat-ms", "must be in 10..60000");
  if (o.peer_timeout_ms < 2 * o.heartbeat_ms)
    throw CLI::ValidationError("--peer-timeout-ms", "must be at least twice --heartbeat-ms");
  caf::actor_system_config config;
  add_message_types(config);
  use_network(config, std::chrono::milliseconds(o.heartbeat_ms),
              std::chrono::milliseconds(o.peer_timeout_ms));
  caf::actor_system sys{config};
  auto ends = std::make_shared<run_ends>();
  auto spec = std::make_shared<worker_spec>();
  spec->log = [](const std::string& line) { std::fprintf(stderr, "pipeworks worker: %s\n", line.c_str()); };
  spec->on_run_end = [ends](bool ok, const std::string&) {
    std::lock_guard lock(ends->mu);
    ++ends->runs;
    ends->last_ok = ok;
    ends->cv.notify_all();
  };
  caf::actor worker = spawn_worker(sys, spec);
  auto port = sys.middleman().publish(worker, at->port, at->host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    throw pipeworks_error("cannot listen on " + to_string(*at) + ": " + sys.render(port.error()) +
                          "; choose another port, or 0 for any free one");
  }
  std::printf("pipeworks worker listening on %s\n", to_string(host_port{at->host, *port}).c_str());
  std::fflush(stdout);
  stop_signals signals;
  int code = exit_ok;
  {
    std::unique_lock lock(ends->mu);
    while (!stop_signals::requested() && !(o.once && ends->runs > 0))
      ends->cv.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_signals::requested()) code = exit_interrupted(stop_signals::first());
    else code = ends->last_ok ? exit_ok : exit_failure;
  }
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  return code;
}

const bool registered = register_command(
    "worker", "Host the ranks a driver (pipeworks train --workers) places on this process",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<worker_options>();
      sub.add_option("--listen", o->listen,
                     "HOST:PORT to listen on (port 0: any free port; the port is printed)")
          ->capture_default_str();
      sub.add_flag("--once", o->once,
                   "exit when the first run ends: 0 if it succeeded, 1 if it failed or its driver "
                   "was lost (default: wait for the next driver)");
      sub.add_option("--heartbeat-ms", o->heartbeat_ms, "send peers a heartbeat this often")
          ->capture_default_str();
      sub.add_option("--peer-timeout-ms", o->peer_timeout_ms,
                     "a peer silent this long is lost (its ranks here stop)")
          ->capture_default_str();
      return [o] { return run_worker(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
