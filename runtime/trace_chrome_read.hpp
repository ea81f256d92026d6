// Reads back a Chrome trace that pipeworks wrote (runtime/trace_chrome.hpp: train --trace,
// simulate --trace) as a timeline, for the explorer; refuses other traces, truncated or huge ones.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "runtime/timeline.hpp"

namespace pipeworks {

// The largest trace read_chrome_trace reads: checked from the file's size before it is read.
constexpr std::uint64_t max_trace_read_bytes = std::uint64_t{256} << 20;

// The timeline of a trace's text: "otherData" with "ranks" and "devices_per_replica", and one
// complete event ("ph":"X") per action with args kind, stage, microbatch, version (and flow_id
// for SEND and RECV; "bytes" where the run recorded them, else timeline_event::bytes is -1).
// `name` (the file) starts every message. Errors: not JSON (a file that ends early says it looks
// truncated), not a pipeworks trace (naming what is missing), an event that does not read back
// (naming its index and field).
result<timeline> parse_chrome_trace(std::string_view text, const std::string& name);

// The file read with read_input_text (a regular file of at most max_bytes, refused by its size
// before any of it is read), then parse_chrome_trace.
result<timeline> read_chrome_trace(const std::string& path,
                                   std::uint64_t max_bytes = max_trace_read_bytes);

}  // namespace pipeworks
