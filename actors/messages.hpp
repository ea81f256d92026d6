// CAF glue for the actor layer: the runtime's move-only messages in a copyable box (one receiver
// moves the payload out), the actor layer's own messages, and the atoms, declared for CAF 0.17.
#pragma once
#include <caf/all.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/executor.hpp"
#include "runtime/exec/messages.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// A runtime message in transit. CAF 0.17 copies message elements, a tensor cannot be copied, so
// the box shares one heap message; each box has exactly one receiver, which moves it out.
struct runtime_box {
  std::shared_ptr<message> msg;
};
inline runtime_box box(message m) { return {std::make_shared<message>(std::move(m))}; }

// Driver → rank: who is who. Sent once; it also starts the rank.
struct rank_wiring {
  std::vector<caf::actor> ranks;     // by rank = replica * p + device
  std::vector<caf::actor> reducers;  // by virtual stage; invalid handles when w = 1
  caf::actor driver;
  caf::actor tracer;                 // invalid when no trace is recorded
};

// Rank or reducer → driver: it failed; `message` names the stage, replica, action and cause.
struct stage_failure {
  std::string message;
};

// Rank → driver: the rank ran its whole program.
struct rank_done {
  int rank = 0;
  std::vector<stage_stats> stats;
};

// Rank → tracer: this rank sends no more trace events.
struct trace_done {
  int rank = 0;
};

// Tracer → driver: the merged timeline (shared, so that CAF copies only the pointer).
struct timeline_box {
  std::shared_ptr<timeline> trace;
};

// Partition actor → driver: the split and the actors it spawned for it.
struct pipeline_wiring {
  std::vector<int> boundaries;
  std::vector<caf::actor> ranks;
  std::vector<caf::actor> reducers;
  std::vector<param_snapshot> initial;  // version 0 of every virtual stage
};

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

}  // namespace pipeworks

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::runtime_box)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::rank_wiring)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::stage_failure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::rank_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::trace_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::timeline_box)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(pipeworks::pipeline_wiring)
