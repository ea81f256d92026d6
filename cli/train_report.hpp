// What `pipeworks train` tells its user: the header, a line (or JSON object) per step and the
// metrics file while it trains, and at the end the weights saved, the evaluation and the report.
#pragma once
#include <cstdint>
#include <string>

#include "actors/pipeline.hpp"
#include "cli/metrics_stream.hpp"
#include "cli/progress.hpp"
#include "cli/train_plan.hpp"
#include "ops/train/microbatches.hpp"

namespace pipeworks::cli {

// run.json -> run.sim.json: where --compare-sim writes the simulated trace.
std::string sim_trace_path(std::string path);

// The run's first lines: the model, data, steps, batch and optimizer; where the ranks run; the
// step a resumed run continues from.
void print_train_header(const run_plan& plan, const model<float>& net);

// While the run trains: the planner's table, a step's line or JSON object, the metrics file and
// the progress line, through the run's callbacks.
class train_reporter {
 public:
  train_reporter(const train_options& o, const run_plan& plan, const model<float>& net);
  // on_plan (the planner's table; 2BW's microbatches checked against memory), on_step and
  // stop_requested (a stop signal); they refer to this reporter.
  pipeline_callbacks callbacks();
  // Ends the progress line.
  void finish_progress() { progress_.finish(); }
  // The samples per second over the steps of this run.
  double samples_per_s() const { return total_samples_s_; }
  metrics_stream& metrics() { return metrics_file_; }

 private:
  const train_options& o_;
  const run_plan& plan_;
  const model<float>& net_;
  metrics_stream metrics_file_;
  progress_line progress_;
  double total_samples_s_ = 0;
  std::int64_t first_samples_ = -1;
};

// After the run: the weights checked (all there, finite) and saved, the trace (and --compare-sim)
// written, the held-out set evaluated, a sample drawn, then the summary (JSON, or lines for
// people). An interrupted run saves what it has and says how to continue. Returns the exit code.
int report_run(const train_options& o, const run_plan& plan, const model<float>& net,
               const minibatch& held_out, const pipeline_result& run, train_reporter& reporter);

}  // namespace pipeworks::cli
