// One rank's measured timeline while it runs: an event per action (when tracing is on), and the
// flow ids that pair a SEND with its RECV in the trace writers.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/action.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

class trace_recorder {
 public:
  trace_recorder(bool enabled, int rank, int replica, int virtual_stages, int total_microbatches)
      : enabled_(enabled),
        rank_(rank),
        replica_(replica),
        stages_(virtual_stages),
        total_(total_microbatches) {}

  // `bytes`: what timeline_event::bytes says for the action's kind, -1 for none.
  void record(stream_kind stream, const action& a, double start, double end, int version,
              std::int64_t flow = -1, std::int64_t bytes = -1) {
    if (enabled_)
      events_.push_back(timeline_event{rank_, stream, a, start, end, version, flow, bytes});
  }

  // The id a SEND to `consumer` and the consumer's RECV of microbatch mb share (per direction).
  std::int64_t flow_id(int consumer, int mb, bool forward) const {
    const std::int64_t key = (static_cast<std::int64_t>(replica_) * stages_ + consumer) * total_ + mb;
    return 2 * key + (forward ? 0 : 1);
  }

  // The events recorded since the last call.
  std::vector<timeline_event> take() { return std::exchange(events_, {}); }

 private:
  bool enabled_;
  int rank_, replica_, stages_, total_;
  std::vector<timeline_event> events_;
};

}  // namespace pipeworks
