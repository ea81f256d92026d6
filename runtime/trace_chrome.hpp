// Chrome trace-event JSON from a timeline, for Perfetto and chrome://tracing: a process per rank,
// a thread per stream, complete events per action and flow arrows from each SEND to its RECV.
#pragma once
#include <string>

#include "base/result.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// The trace as a JSON object {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
// pid = rank, tid = stream (0 compute, 1 send, 2 recv); events that overlap on one stream (sends
// in flight) spill onto extra threads, tid = stream + 3 * lane. ts and dur are in microseconds.
// Each action is a complete event ("ph":"X") named by its text ("1F3") with args microbatch,
// stage, version and kind, and "bytes" where a real run measured them (timeline_event::bytes).
// A SEND and the RECV with the same flow_id are joined by a flow ("ph":"s" on the SEND, "ph":"f"
// with "bp":"e" on the RECV, id = flow_id).
std::string to_chrome_trace(const timeline& t);

// Writes to_chrome_trace(t) to `path` with write_text_atomic, so a reader never sees half a trace
// and a symbolic link or a device is refused rather than replaced.
status write_chrome_trace(const timeline& t, const std::string& path);

}  // namespace pipeworks
