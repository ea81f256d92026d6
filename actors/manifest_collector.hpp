// The driver's checkpoint manifests: each rank's file as it is reported durable, then, once a
// checkpoint's files are all in and its step is complete, its manifest written last and off the
// driver's thread, the old checkpoints pruned and the steps kept told back to the driver.
#pragma once
#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "actors/messages.hpp"
#include "runtime/checkpoint/background_writer.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/exec/driver_core.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {

class manifest_collector {
 public:
  // The checkpoints the run owes: every multiple of checkpoint.every below its steps, after the
  // step it starts from.
  void start(const run_plan& p);
  // A rank's file of a checkpoint is durable (in `p`'s directory, or its worker's own).
  void add(const checkpoint_written& c, const run_plan& p);
  // Writes the manifest of every checkpoint `core` says is due (its files all in, its step
  // complete). `driver` then hears (manifest_atom, step, checkpoints_kept), or a stage_failure.
  void write_due(driver_core& core, const run_plan& p, double elapsed_s, const caf::actor& driver);
  // The manifest of step n is written: that checkpoint is owed no more.
  void written(std::int64_t n) { left_.erase(n); }
  bool all_written() const { return left_.empty(); }
  // Whether the manifest of a checkpoint of step n or before is still to come.
  bool owes_up_to(std::int64_t n) const { return !left_.empty() && *left_.begin() <= n; }

 private:
  std::unique_ptr<background_writer> writer_;  // joined when the collector goes
  std::map<std::int64_t, std::vector<checkpoint_file>> files_;
  std::set<std::int64_t> left_;
};

}  // namespace pipeworks
