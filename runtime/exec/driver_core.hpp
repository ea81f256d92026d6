// driver_core: the driver's decisions without CAF, shared by the driver actor and run_local (as
// gradient_reducer is): dealing each step's minibatch into microbatch inputs as the ranks ask,
// summing the stages' squared norms for global clipping, tallying losses and step reports into
// step_metrics in step order, and keeping track of which ranks have written a checkpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "base/result.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/messages.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// The weights of every virtual stage after the same number of steps, in stage order.
using model_weights = std::vector<param_snapshot>;

// A step that every stage has made and whose losses have all arrived.
struct completed_step {
  step_metrics metrics;
  std::shared_ptr<const model_weights> weights;  // when the ranks published this step's weights
};

class driver_core {
 public:
  // programs: the lowered schedule. first_step: the steps done before this run (a resumed run's
  // position); samples: the samples seen in them. clock: seconds since the run started.
  driver_core(std::shared_ptr<const schedule> programs, minibatch_fn data,
              std::function<double()> clock, std::int64_t first_step = 0,
              std::int64_t samples = 0);

  // A message from a rank (input_request, loss_report, step_report, norm_request). Appends the
  // answers to `out` (inputs for a rank, global norms for a replica's ranks). An error (bad data,
  // a non-finite loss, a message that makes no sense) ends the run; it names what went wrong.
  status receive(message msg, std::vector<outgoing>& out);

  // Steps completed since the last call, in order.
  std::vector<completed_step> take_completed();

  std::int64_t steps_done() const { return steps_done_; }
  std::int64_t steps() const { return steps_; }
  std::int64_t samples() const { return samples_; }
  const step_metrics& last() const { return last_; }
  bool all_steps_done() const { return steps_done_ >= steps_; }

  // Checkpoints: rank `rank` has written its file of the checkpoint after `step`. A checkpoint
  // is due (its manifest may be written) once every rank's file is written and its step is
  // complete; due_checkpoints returns each such step once, in order.
  status file_written(int rank, std::int64_t step);
  std::vector<std::int64_t> due_checkpoints();
  // The samples seen after `step` steps (known once the step completed).
  std::int64_t samples_at(std::int64_t step) const;

 private:
  struct step_tally {
    int reports = 0;  // replica 0's virtual stages that made this version
    std::vector<bool> reported;
    std::vector<param_snapshot> weights;
    int published = 0;
    std::vector<double> grad_sq;  // per stage, added in stage order once all are in
    double lr = 0;
    int losses = 0;
    double loss_sum = 0;
    std::int64_t samples = 0;
  };
  struct dealt_step {
    std::vector<std::vector<microbatch>> parts;  // [replica][k], handed out (moved) as asked
    int left = 0;
  };
  struct norm_tally {
    std::vector<std::vector<double>> by_stage;
    int arrived = 0;
  };

  status on_input(const input_request& req, std::vector<outgoing>& out);
  status on_loss(const loss_report& r);
  status on_step_report(step_report rep);
  status on_norm(norm_request req, std::vector<outgoing>& out);
  void complete_steps();

  std::shared_ptr<const schedule> plan_;
  minibatch_fn data_;
  std::function<double()> clock_;
  int p_ = 1, m_ = 1, w_ = 1, V_ = 1;
  std::int64_t steps_ = 1;
  std::int64_t first_step_ = 0;
  std::map<std::int64_t, dealt_step> inputs_;
  std::map<std::int64_t, step_tally> tallies_;
  std::map<std::pair<int, int>, norm_tally> norms_;  // (replica, step)
  // Steps whose minibatch has been dealt. A set, not a high-water mark: a resumed run deals out of
  // order (a rank's first request skips the microbatches it held at the cut, so one replica can
  // ask for step N+1 before another asks for step N).
  std::set<std::int64_t> dealt_;
  std::int64_t steps_done_ = 0, samples_ = 0;
  double last_step_end_ = 0;
  step_metrics last_;
  std::vector<completed_step> completed_;
  std::map<std::int64_t, std::vector<bool>> files_;  // step -> which ranks wrote theirs
  std::map<std::int64_t, std::int64_t> samples_at_;
};

}  // namespace pipeworks
