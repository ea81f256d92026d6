// The worker actor: what a worker process (`pipeworks worker`) publishes. It answers a driver's
// hello, hosts the ranks a driver's plan places on it (one run at a time), and goes back to
// waiting for the next driver when the run ends or its driver is lost.
#pragma once
#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <string>

namespace pipeworks {

struct worker_spec {
  std::function<void(const std::string&)> log;  // one line for people (stderr in the CLI)
  // Absolute: the worker's own checkpoint directory (local to its host), where its ranks write
  // their files; "" to write them into the driver's (which must then be shared).
  std::string checkpoint_dir;
  // The largest CAF frame this worker's frame guard passes on (--max-frame-mb), told to drivers.
  std::uint64_t max_frame = 0;
  // It has started hosting a run's ranks.
  std::function<void()> on_run_start;
  // Closes the connections whose frames its frame guard refused: when the run they belonged to
  // has ended, or at once when there is no run whose driver could be told.
  std::function<void()> drop_refused;
  // The run it hosted ended: ok, or why not (the driver's error, or the driver was lost).
  std::function<void(bool ok, const std::string& why)> on_run_end;
};

// Its process's frame guard → the worker (sent as the worker itself, from its own process): a
// frame from a peer to the actor with this id was refused, `what` says which and the limit to
// raise. When that actor is one of the run's, the worker tells the driver of the run, which ends
// the run with that cause rather than a lost worker; a frame for no actor of the run (garbage from
// a stranger) does not stop it.
using frame_refused_atom = caf::atom_constant<caf::atom("frrefused")>;

caf::actor spawn_worker(caf::actor_system& sys, std::shared_ptr<worker_spec> spec);

}  // namespace pipeworks
