// `pipeworks worker`: a process that hosts the ranks a driver's plan places on it. It listens on
// --listen HOST:PORT (port 0: any free port, printed), serves one run at a time and then waits for
// the next driver; with --once it exits when its run ends (0 if the run succeeded, else 1).
// Started by a launcher (--driver, or torchrun's or Slurm's variables), it joins the driver's
// rendezvous with its rank and address, serves that one run and exits.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

#include "actors/network.hpp"
#include "base/launcher_env.hpp"
#include "actors/type_ids.hpp"
#include "actors/worker_actor.hpp"
#include "base/host_port.hpp"
#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/stop_signals.hpp"
#include "ops/cpu_threads.hpp"
#include "runtime/transport/frame_guard.hpp"
#include "base/cpu_count.hpp"

namespace pipeworks::cli {
namespace {

struct worker_options {
  std::string listen;  // default 127.0.0.1:0, or 0.0.0.0:0 when started by a launcher
  bool once = false;
  int heartbeat_ms = 250, peer_timeout_ms = 2000, connect_timeout_ms = 60000;
  int max_frame_mb = 1024;  // the largest CAF frame the guard passes on
  std::string checkpoint_dir;  // its ranks' checkpoint files go here ("": the driver's directory)
  launch_flags launch;
};

std::optional<std::string> getenv_of(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// What the frame guard refused, for the driver of the run: the frame's kind and size, the bound
// it broke and the --max-frame-mb that would have passed it.
std::string refused_text(const frame_guard::refusal& f) {
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  // --max-frame-mb bounds one frame, and twice it all frames being received at once.
  const std::uint64_t per_mb = f.held ? 2 * mib : mib;
  const std::uint64_t need_mb = (f.need + per_mb - 1) / per_mb;
  std::string text = "refused a frame of " + std::to_string(f.bytes) + " bytes from " + f.peer + ", " +
                     f.kind + ": ";
  text += f.held ? "with the frames it was receiving besides, more than the " + std::to_string(f.limit) +
                       " bytes it holds at once (twice its --max-frame-mb of " +
                       std::to_string(f.limit / per_mb) + ")"
                 : "more than the " + std::to_string(f.limit) + " bytes a frame may hold there (its "
                   "--max-frame-mb of " + std::to_string(f.limit / per_mb) + ")";
  if (need_mb <= 4095)
    return text + "; restart it with `pipeworks worker --max-frame-mb " + std::to_string(need_mb) +
           "` or more";
  return text + "; --max-frame-mb goes to 4095 only: give the run --transport ucx, which sends "
                "tensors beside CAF's frames";
}

// The address the driver should connect to: the listening host, or this host's name when it
// listens on every interface.
std::string advertised(const host_port& at, std::uint16_t port) {
  std::string host = at.host;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) host = name;
  }
  return to_string(host_port{host, port});
}

// Joins the driver's rendezvous as `place` says, retrying while the driver is not up yet; returns
// the rendezvous actor, which lives until the driver's run ends (or it gives up).
caf::actor join(caf::actor_system& sys, const launch_place& place, const std::string& address,
                std::chrono::milliseconds limit, const caf::actor& watcher) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto driver = reach(sys, place.driver, std::max(left, std::chrono::milliseconds(1)), "the driver");
    if (!driver) {
      if (std::chrono::steady_clock::now() + std::chrono::milliseconds(200) >= deadline)
        throw pipeworks_error(driver.message() + "; is `pipeworks train --rendezvous " +
                              to_string(place.driver) + "` running there?");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    caf::scoped_actor self{sys};
    std::string error;
    self->request(*driver, limit,
                  join_msg{remote_protocol_version, place.rank, place.world_size, address, watcher})
        .receive([](const hello_msg&) {},
                 [&](caf::error& e) { error = error_text(sys, e); });
    if (!error.empty()) throw pipeworks_error(error);
    return *driver;
  }
}

// Where the worker's runs end: the main thread waits here for --once or a stop signal.
struct run_ends {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, runs = 0;
  bool last_ok = true;
};

int run_worker(const worker_options& o) {
  const bool joins = !o.launch.driver.empty() || launched(getenv_of);
  if (!joins && (o.launch.rank >= 0 || o.launch.world_size >= 0))
    throw CLI::ValidationError(o.launch.rank >= 0 ? "--rank" : "--world-size",
                               "says where this worker joins a driver's rendezvous: give --driver "
                               "HOST:PORT too (or MASTER_ADDR and MASTER_PORT), or drop it for a "
                               "worker that a driver's --workers names");
  std::optional<launch_place> place;
  if (joins) {
    auto p = find_place(o.launch, getenv_of);
    if (!p) throw CLI::ValidationError(p.message());  // it names the flag or the variable
    place = *p;
  }
  const std::string listen = !o.listen.empty() ? o.listen : joins ? "0.0.0.0:0" : "127.0.0.1:0";
  auto at = parse_host_port(listen, true);
  if (!at) throw CLI::ValidationError("--listen", at.message());
  if (o.heartbeat_ms < 10 || o.heartbeat_ms > 60000)
    throw CLI::ValidationError("--heartbeat-ms", "must be in 10..60000");
  if (o.peer_timeout_ms < 2 * o.heartbeat_ms)
    throw CLI::ValidationError("--peer-timeout-ms", "must be at least twice --heartbeat-ms");
  if (o.max_frame_mb < 1 || o.max_frame_mb > 4095)
    throw CLI::ValidationError("--max-frame-mb", "must be in 1..4095");
  std::string own_dir;
  if (!o.checkpoint_dir.empty()) {
    std::error_code ec;
    own_dir = std::filesystem::absolute(o.checkpoint_dir).lexically_normal().string();
    std::filesystem::create_directories(own_dir, ec);
    if (ec || !std::filesystem::is_directory(own_dir))
      throw CLI::ValidationError("--checkpoint-dir", own_dir + " cannot be made a directory" +
                                                         (ec ? ": " + ec.message() : std::string()));
  }
  // OpenBLAS single-threaded, the kernels' parallelism in each rank's oneTBB arena, as in train.
  set_cpu_threads(0);
  caf::actor_system_config config;
  add_message_types(config);
  // The ranks are pooled actors here (actors/worker_actor.cpp): a thread for each core, and two
  // more so that a rank that sleeps (a throttled device) or computes never starves the others.
  config.set("scheduler.max-threads", usable_cores() + 2);
  use_network(config, std::chrono::milliseconds(o.heartbeat_ms),
              std::chrono::milliseconds(o.peer_timeout_ms));
  // The frame guard goes only after the actor system, which flushes what it still has to send.
  std::unique_ptr<frame_guard> guard;
  caf::actor_system sys{config};
  auto ends = std::make_shared<run_ends>();
  // The guard, once started: a run's end closes the connections whose frames it refused.
  auto guard_at = std::make_shared<std::atomic<frame_guard*>>(nullptr);
  auto spec = std::make_shared<worker_spec>();
  spec->log = [](const std::string& line) { std::fprintf(stderr, "pipeworks worker: %s\n", line.c_str()); };
  spec->checkpoint_dir = own_dir;
  spec->max_frame = static_cast<std::uint64_t>(o.max_frame_mb) << 20;
  const bool once = o.once || place.has_value();  // a launcher's worker serves its one run
  spec->on_run_start = [ends] {
    std::lock_guard lock(ends->mu);
    ++ends->started;
  };
  spec->drop_refused = [guard_at] {
    if (frame_guard* g = guard_at->load()) g->close_refused();
  };
  spec->on_run_end = [ends, once](bool ok, const std::string&) {
    if (!once) std::fprintf(stderr, "pipeworks worker: waiting for the next driver\n");
    std::lock_guard lock(ends->mu);
    ++ends->runs;
    ends->last_ok = ok;
    ends->cv.notify_all();
  };
  caf::actor worker = spawn_worker(sys, spec);
  // CAF listens on loopback only; the network reaches it through the frame guard, which passes a
  // frame on only once all of it has come and only if it is within --max-frame-mb.
  auto inner = sys.middleman().publish(worker, 0, "127.0.0.1", true);
  if (!inner) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    throw pipeworks_error("cannot listen on 127.0.0.1 for the frame guard: " + sys.render(inner.error()));
  }
  frame_guard::limits lim;
  lim.max_frame = static_cast<std::uint32_t>(static_cast<std::uint64_t>(o.max_frame_mb) << 20);
  lim.max_held = std::uint64_t{2} * lim.max_frame;
  // A refused frame goes to the worker, which tells the driver of its run.
  auto started = frame_guard::start(*at, *inner, lim, spec->log, [worker](const frame_guard::refusal& f) {
    caf::send_as(worker, worker, frame_refused_atom::value, refused_text(f), f.to_actor);
  });
  if (!started) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    const bool in_use = started.message().find("in use") != std::string::npos;
    throw pipeworks_error(started.message() + (in_use ? "; choose another port, or 0 for any free one"
                                                      : "; give an address of this machine (or "
                                                        "0.0.0.0 for all of them) in --listen"));
  }
  guard = std::move(*started);
  guard_at->store(guard.get());
  const std::uint16_t port_number = guard->port();
  const auto port = &port_number;
  std::printf("pipeworks worker listening on %s\n", to_string(host_port{at->host, *port}).c_str());
  std::fflush(stdout);
  // A joined worker watches the driver's rendezvous: its end before this worker holds ranks
  // means the driver gave up (a rank did not join, a worker could not be reached) or is gone.
  caf::scoped_actor watcher{sys};
  if (place) {
    try {
      watcher->monitor(join(sys, *place, advertised(*at, *port), std::chrono::milliseconds(o.connect_timeout_ms),
                            caf::actor_cast<caf::actor>(watcher)));
    } catch (...) {
      caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
      throw;
    }
    spec->log("joined the driver at " + to_string(place->driver) + " as RANK " +
              std::to_string(place->rank) + " of WORLD_SIZE " + std::to_string(place->world_size));
  }
  stop_signals signals("pipeworks worker: stopping; further signals are ignored while the ranks "
                       "it hosts end\n");
  int code = exit_ok;
  // A joined worker whose driver never sends its ranks (its rendezvous failed) does not wait on.
  const auto hosting_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.connect_timeout_ms);
  {
    std::unique_lock lock(ends->mu);
    bool abandoned = false;
    std::optional<std::string> gone;  // why the driver's rendezvous ended before any ranks came
    while (!stop_signals::requested() && !(once && ends->runs > 0)) {
      ends->cv.wait_for(lock, std::chrono::milliseconds(50));
      if (place && ends->started == 0) {
        lock.unlock();
        watcher->receive([&](const caf::down_msg& dm) { gone = dm.reason ? error_text(sys, dm.reason)
                                                                          : "it ended"; },
                         [&](const rendezvous_failed& f) {
                           gone = f.why;
                           return true;
                         },
                         caf::after(std::chrono::milliseconds(0)) >> [] {});
        lock.lock();
        if (gone && ends->started == 0) break;
        gone.reset();  // the ranks came meanwhile: the run's own end is what counts now
      }
      if (place && ends->started == 0 && std::chrono::steady_clock::now() > hosting_deadline) {
        abandoned = true;
        break;
      }
    }
    if (stop_signals::requested()) {
      code = exit_interrupted(stop_signals::first());
      std::fprintf(stderr, "pipeworks worker: stopped by %s%s\n", stop_signals::name(stop_signals::first()),
                   ends->started > ends->runs ? " while hosting ranks of a run; its driver will "
                                                "name them as lost" : "");
    }
    else if (gone) {
      std::fprintf(stderr, "pipeworks worker: error: the driver at %s gave up and sent no ranks "
                           "(%s); exiting\n",
                   to_string(place->driver).c_str(), gone->c_str());
      code = exit_failure;
    } else if (abandoned) {
      std::fprintf(stderr, "pipeworks worker: error: the driver at %s sent no ranks within %d ms "
                           "(--connect-timeout-ms) of the join; its rendezvous may have failed\n",
                   to_string(place->driver).c_str(), o.connect_timeout_ms);
      code = exit_failure;
    } else code = ends->last_ok ? exit_ok : exit_failure;
  }
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  return code;
}

const bool registered = register_command(
    "worker", "Host the ranks a driver (pipeworks train --workers) places on this process",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<worker_options>();
      sub.add_option("--listen", o->listen,
                     "HOST:PORT to listen on (port 0: any free port; the port is printed); "
                     "default 127.0.0.1:0, or 0.0.0.0:0 when joining a driver");
      sub.add_option("--driver", o->launch.driver,
                     "join the driver's rendezvous at HOST:PORT (`pipeworks train --rendezvous`), "
                     "serve its run and exit; without it, MASTER_ADDR and MASTER_PORT (torchrun) or "
                     "the first host of SLURM_JOB_NODELIST (srun) are used when RANK or "
                     "SLURM_PROCID is set");
      sub.add_option("--rank", o->launch.rank, "with --driver: this worker's rank (default RANK or SLURM_PROCID)");
      sub.add_option("--world-size", o->launch.world_size,
                     "with --driver: how many workers join (default WORLD_SIZE or SLURM_NTASKS)");
      sub.add_option("--connect-timeout-ms", o->connect_timeout_ms,
                     "with --driver: how long to keep trying to reach the driver, and then to wait "
                     "for its ranks")
          ->capture_default_str();
      sub.add_flag("--once", o->once,
                   "exit when the first run ends: 0 if it succeeded, 1 if it failed or its driver "
                   "was lost (default: wait for the next driver)");
      sub.add_option("--heartbeat-ms", o->heartbeat_ms, "send peers a heartbeat this often")
          ->capture_default_str();
      sub.add_option("--peer-timeout-ms", o->peer_timeout_ms,
                     "a peer silent this long is lost (its ranks here stop)")
          ->capture_default_str();
      sub.add_option("--max-frame-mb", o->max_frame_mb,
                     "the largest message the worker accepts from the network, in MiB (the initial "
                     "weights of its ranks travel in one; with --transport caf, each tensor too)")
          ->capture_default_str();
      sub.add_option("--checkpoint-dir", o->checkpoint_dir,
                     "write the checkpoint files of the ranks hosted here into DIR/run-NAME/ on "
                     "this host (a local disk; the driver's manifest names this host and "
                     "directory); default: into the driver's --checkpoint-dir, which must then be "
                     "the same directory on every host");
      return [o] { return run_worker(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
