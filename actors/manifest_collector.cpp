// manifest_collector: a checkpoint's files gathered from the ranks, and its manifest written last
// on a background thread, which reports back to the driver by message.
#include "actors/manifest_collector.hpp"

#include <string>
#include <utility>

#include "base/host_port.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"

namespace pipeworks {
namespace {

// The host of the worker that holds rank r, as the plan addresses it.
std::string host_of(const run_plan& p, int r) {
  const int process = p.ranks.empty() ? 0 : p.ranks.at(static_cast<std::size_t>(r)).process;
  if (process < 1 || process > static_cast<int>(p.processes.workers.size())) return "localhost";
  const std::string& address = p.processes.workers[static_cast<std::size_t>(process - 1)];
  auto at = parse_host_port(address);
  return at ? at->host : address;
}

}  // namespace

void manifest_collector::start(const run_plan& p) {
  for (std::int64_t n = p.checkpoint.every; p.checkpoint.every > 0 && n < p.train.steps;
       n += p.checkpoint.every)
    if (n > p.data.position) left_.insert(n);
}

void manifest_collector::add(const checkpoint_written& c, const run_plan& p) {
  const std::string host = c.dir.empty() ? std::string() : host_of(p, c.rank);
  files_[c.step].push_back(checkpoint_file{c.rank, c.file, c.bytes, c.sha256, host, c.dir});
}

void manifest_collector::write_due(driver_core& core, const run_plan& p, double elapsed_s,
                                   const caf::actor& driver) {
  for (std::int64_t n : core.due_checkpoints()) {
    checkpoint_manifest m = manifest_of(p, n, core.samples_at(n), elapsed_s, std::move(files_[n]));
    files_.erase(n);
    // The manifest's fsync can wait for the whole file system's journal: off the driver's
    // thread, which keeps feeding the ranks meanwhile.
    if (!writer_) writer_ = std::make_unique<background_writer>();
    const std::string dir = p.checkpoint.dir;
    const int keep = p.checkpoint.keep;
    writer_->post([me = driver, dir, keep, m = std::move(m)] {
      status s = write_manifest(dir, m);
      if (!s) {
        caf::anon_send(me, stage_failure{"writing the checkpoint of step " +
                                         std::to_string(m.step) + ": " + s.message()});
        return;
      }
      if (status pr = prune_checkpoints(dir, keep); !pr) {
        caf::anon_send(me, stage_failure{"removing old checkpoints: " + pr.message()});
        return;
      }
      checkpoints_kept kept;
      if (keep > 0)
        if (auto steps = complete_steps(dir)) kept.steps = std::move(*steps);
      caf::anon_send(me, manifest_atom::value, m.step, std::move(kept));
    });
  }
}

}  // namespace pipeworks
