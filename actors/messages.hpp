// The actor layer's own messages (wiring, failures, the end of a rank, checkpoint files, the
// run's outcome) and atoms, each with an `inspect`, so that every message between actors can be
// serialised (their CAF type IDs are in actors/type_ids.hpp). The runtime's messages are in
// runtime/exec/messages.hpp, their inspects in runtime/transport/caf_inspect.hpp.
#pragma once
#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/exec/rank_setup.hpp"
#include "runtime/transport/caf_inspect.hpp"

namespace pipeworks {

// Driver → rank: who is who. Sent once; it also starts the rank.
struct rank_wiring {
  std::vector<caf::actor> ranks;     // by rank = replica * p + device
  // By virtual stage; invalid handles when w = 1. With `shard_stride` > 0 (an all-reduce across
  // processes) one share per replica and stage: replica r's of stage s at r * shard_stride + s
  // (with dualpipe's routes, per member r * w + q of the reduce and piece of the model).
  std::vector<caf::actor> reducers;
  caf::actor driver;
  caf::actor tracer;                 // invalid when no trace is recorded
  int shard_stride = 0;
};

// Driver → each all-reduce share of a stage (runs across processes with w > 1): the shares of
// that stage, by replica. Sent once, before the ranks are wired.
struct shard_wiring {
  std::vector<caf::actor> shards;
};

// Rank or reducer → driver: it failed; `message` names the stage, replica, action and cause.
struct stage_failure {
  std::string message;
};

// Rank → driver: the rank ran its whole program (finished), or answers a weights request; with
// the latest weights of its virtual stages when it belongs to replica 0.
struct rank_done {
  int rank = 0;
  bool finished = true;
  std::vector<stage_stats> stats;
  std::vector<int> stages;   // its virtual stages
  std::vector<int> steps;    // per stage: STEPs done
  std::vector<param_snapshot> weights;  // per stage (replica 0), else empty
};

// Rank → driver: the rank has waited `stall_after` with nothing arriving and nothing to run
// (stalled, with what it waits for: its action, the message it needs and the step), or it moves
// again (not stalled). The driver ends the run once every rank that has not finished is stalled.
struct rank_stalled {
  int rank = 0;
  bool stalled = true;
  std::string waiting;  // "at step 16, 1RECV_F63: waiting for the activation from stage 0"
};

// Rank → tracer: this rank sends no more trace events.
struct trace_done {
  int rank = 0;
};

// Rank → driver: its file of the checkpoint after `step` is written and durable.
struct checkpoint_written {
  int rank = 0;
  std::int64_t step = 0;
  std::string file;  // the name in the step directory
  std::uint64_t bytes = 0;
  std::string sha256;
  std::string dir;  // absolute, when its process has a checkpoint directory of its own; else ""
};

// Driver → each worker, after a checkpoint is complete and the old ones pruned: the complete
// checkpoints kept. A worker with a checkpoint directory of its own removes the step directories
// of this run older than the newest of them that are not among them.
struct checkpoints_kept {
  std::vector<std::int64_t> steps;  // ascending
};

// Partition actor → driver: the run, resolved, checked and lowered once (the driver is handed
// it), what the planner said, and the actors it spawned for it.
struct pipeline_wiring {
  std::shared_ptr<const lowered_run> run;
  std::string report;
  std::string summary;  // the planner's plan as JSON, or ""
  std::vector<caf::actor> ranks;
  std::vector<caf::actor> reducers;
};

// Driver → whoever started the run: how it ended.
struct run_outcome {
  bool ok = true;
  std::string error;       // why it failed
  bool interrupted = false;
  std::shared_ptr<const lowered_run> run;  // the run as lowered once (null if it failed before)
  std::string report;      // the planner's report, when it planned
  std::string summary;     // the planner's plan as JSON, when it planned
  std::vector<param_snapshot> weights;  // every virtual stage's latest (replica 0)
  std::vector<int> weight_steps;        // per stage: the steps its weights have seen
  std::vector<stage_stats> stages;      // per virtual stage, the max over the ranks
  step_metrics last;                    // the last completed step
  std::int64_t steps_done = 0;
  timeline trace;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_wiring& x) {
  return f(caf::meta::type_name("pipeworks.rank_wiring"), x.ranks, x.reducers, x.driver, x.tracer,
           x.shard_stride);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_wiring& x) {
  return f(caf::meta::type_name("pipeworks.shard_wiring"), x.shards);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_failure& x) {
  return f(caf::meta::type_name("pipeworks.stage_failure"), x.message);
}

namespace transport {

// A list of weight versions (null entries allowed).
template <class Inspector>
typename Inspector::result_type inspect_param_list(Inspector& f, std::vector<param_snapshot>& xs) {
  if constexpr (!serial<Inspector>) {
    std::size_t n = xs.size();
    return f(caf::meta::type_name("pipeworks.param_list"), n);
  } else {
    std::uint32_t n = static_cast<std::uint32_t>(xs.size());
    if (auto err = f(n)) return err;
    if constexpr (loads<Inspector>) {
      if (n > 1u << 20) return bad("a list of " + std::to_string(n) + " weight versions");
      xs.assign(n, nullptr);
    }
    for (auto& x : xs)
      if (auto err = inspect_params(f, x)) return err;
    return caf::none;
  }
}

}  // namespace transport

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_done& x) {
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.rank_done"), x.rank, x.finished, x.stages, x.steps);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.rank_done"), x.rank, x.finished, x.stats,
                     x.stages, x.steps))
      return err;
    return transport::inspect_param_list(f, x.weights);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_stalled& x) {
  return f(caf::meta::type_name("pipeworks.rank_stalled"), x.rank, x.stalled, x.waiting);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trace_done& x) {
  return f(caf::meta::type_name("pipeworks.trace_done"), x.rank);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_written& x) {
  return f(caf::meta::type_name("pipeworks.checkpoint_written"), x.rank, x.step, x.file, x.bytes,
           x.sha256, x.dir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoints_kept& x) {
  return f(caf::meta::type_name("pipeworks.checkpoints_kept"), x.steps);
}

// A lowered run crosses a process as its plan's JSON ("" for none), which the reader parses,
// checks and lowers (read_lowered_run); inside one process it is handed over as it is.
template <class Inspector>
caf::error inspect_lowered_run(Inspector& f, std::shared_ptr<const lowered_run>& run) {
  std::string text;
  if constexpr (transport::saves<Inspector>)
    if (run) text = to_json_text(run->plan);
  if (auto err = f(text)) return err;
  if constexpr (transport::loads<Inspector>) {
    run.reset();
    if (text.empty()) return caf::none;
    auto read = read_lowered_run(text, "the plan in a message");
    if (!read) return transport::bad(read.message());
    run = std::make_shared<const lowered_run>(std::move(*read));
  }
  return caf::none;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pipeline_wiring& x) {
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.pipeline_wiring"), x.report, x.summary, x.ranks,
             x.reducers);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.pipeline_wiring"), x.report, x.summary,
                     x.ranks, x.reducers))
      return err;
    return inspect_lowered_run(f, x.run);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_outcome& x) {
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.run_outcome"), x.ok, x.error, x.interrupted,
             x.steps_done);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.run_outcome"), x.ok, x.error, x.interrupted,
                     x.report, x.summary, x.weight_steps, x.stages, x.last, x.steps_done, x.trace))
      return err;
    if (auto err = inspect_lowered_run(f, x.run)) return err;
    return transport::inspect_param_list(f, x.weights);
  }
}

// The text of an error made with caf::make_error(code, std::string), else CAF's rendering.
inline std::string error_text(caf::actor_system& sys, const caf::error& e) {
  const caf::message& ctx = e.context();
  if (ctx.size() >= 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return sys.render(e);
}

using run_atom = caf::atom_constant<caf::atom("run")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;
using collect_atom = caf::atom_constant<caf::atom("collect")>;
using weights_atom = caf::atom_constant<caf::atom("weights")>;
using manifest_atom = caf::atom_constant<caf::atom("manifest")>;
using stall_atom = caf::atom_constant<caf::atom("stall")>;

// How long a rank waits with nothing arriving and nothing to run before it tells the driver, and
// how long the driver then waits, with every unfinished rank so and nothing sent, before it ends
// the run. A rank inside a long action is not waiting; a healthy run keeps some rank busy or some
// message moving, so only a run whose ranks all wait for each other comes this far.
inline constexpr std::chrono::seconds stall_after{10};
inline constexpr std::chrono::seconds stall_confirm{5};

}  // namespace pipeworks
