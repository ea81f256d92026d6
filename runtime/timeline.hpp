// A timeline: what ran where and when, in simulated or measured seconds. The simulator and real
// runs both produce one; the trace writers (Chrome JSON, SVG, text) consume it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/action.hpp"

namespace pipeworks {

enum class stream_kind : std::uint8_t { compute = 0, send = 1, recv = 2 };
// "compute", "send" or "recv": a stream's name in traces and the explorer's data.
inline const char* stream_name(stream_kind s) {
  switch (s) {
    case stream_kind::compute: return "compute";
    case stream_kind::send: return "send";
    case stream_kind::recv: return "recv";
  }
  return "compute";
}

struct timeline_event {
  int rank = 0;                 // trace process: rank = replica * p + device
  stream_kind stream = stream_kind::compute;
  action act;                   // what ran (stage, kind, microbatch)
  double start = 0.0;           // seconds from the start of the run
  double end = 0.0;
  int version = -1;             // weight version used by F, B, I, W; -1 otherwise
  std::int64_t flow_id = -1;    // a SEND and its RECV carry the same id; -1 otherwise
  // Bytes a real run measured (-1: not recorded, as in simulated timelines): for F the stash it
  // left for its microbatch; for B and I the microbatch's stash while it ran (more than F's when
  // the backward recomputes it); for W the part I left; for STEP the new weight version's.
  std::int64_t bytes = -1;
};

struct timeline {
  std::string title;            // e.g. "1f1b p=4 m=8 (simulated)"
  std::string version_rule;     // the schedule's rule for people (schedule::version_rule); "": unknown
  int ranks = 0;
  int devices_per_replica = 0;  // p
  std::vector<timeline_event> events;
  double makespan() const {
    double t = 0.0;
    for (const auto& e : events) t = e.end > t ? e.end : t;
    return t;
  }
};

}  // namespace pipeworks
