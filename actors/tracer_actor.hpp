// The tracer actor: collects the trace_batch events of every rank and, once each rank has said
// it is done, hands the merged timeline (sorted by start time) to whoever asked for it.
#pragma once
#include <caf/all.hpp>
#include <string>

namespace pipeworks {

// ranks: how many trace_done to wait for; p: devices per replica; title: the timeline's title.
// Answers collect_atom with the timeline once all ranks are done.
caf::actor spawn_tracer(caf::actor_system& sys, int ranks, int p, std::string title);

}  // namespace pipeworks
