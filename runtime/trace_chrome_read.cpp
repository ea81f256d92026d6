// parse_chrome_trace and read_chrome_trace: the inverse of trace_chrome.cpp's writer, checked
// field by field so that a trace from elsewhere is refused by name rather than misread.
#include "runtime/trace_chrome_read.hpp"

#include <nlohmann/json.hpp>

#include "base/input_file.hpp"
#include "base/json_read.hpp"

namespace pipeworks {
namespace {

using nlohmann::json;

constexpr double s_per_us = 1e-6;
constexpr std::int64_t max_trace_ranks = 1 << 16;
constexpr const char* advice =
    "; give a trace that pipeworks wrote (train --trace or simulate --trace)";

bool whole(const json& j, const char* key, std::int64_t& out, std::int64_t min = 0) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  out = it->get<std::int64_t>();
  return out >= min && out < (std::int64_t{1} << 31);
}

}  // namespace

result<timeline> parse_chrome_trace(std::string_view text, const std::string& name) {
  auto doc = parse_json(text, name);
  if (!doc) {
    // A pipeworks trace starts with '{' and ends with "]}": one that fails to parse and starts so
    // but ends otherwise was cut short; one that does not start so is no trace at all.
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || text[first] != '{')
      return make_error(name + " is not a trace: a trace is a JSON object, and this file " +
                        (first == std::string_view::npos ? std::string("is empty")
                                                         : "does not start with '{'") +
                        advice);
    const auto last = text.find_last_not_of(" \t\r\n");
    if (text[last] != '}')
      return make_error(name + " ends before its JSON does after " + std::to_string(text.size()) +
                        " bytes (a truncated trace? the run may have stopped while writing it)" +
                        advice);
    return make_error(doc.message() + advice);
  }
  const json& j = *doc;
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    return make_error(name + " is not a Chrome trace (no \"traceEvents\" array)" + advice);
  const auto other = j.find("otherData");
  std::int64_t ranks = 0, p = 0;
  if (other == j.end() || !other->is_object() || !whole(*other, "ranks", ranks) ||
      !whole(*other, "devices_per_replica", p, 1))
    return make_error(name +
                      " is not a pipeworks trace (its \"otherData\" has no whole \"ranks\" and "
                      "\"devices_per_replica\")" + advice);
  if (ranks > max_trace_ranks)
    return make_error(name + ": otherData.ranks " + std::to_string(ranks) + " is more than the " +
                      std::to_string(max_trace_ranks) + " ranks a trace may name" + advice);
  timeline t;
  t.ranks = static_cast<int>(ranks);
  t.devices_per_replica = static_cast<int>(p);
  if (other->contains("title") && (*other)["title"].is_string()) t.title = (*other)["title"];
  if (other->contains("version_rule") && (*other)["version_rule"].is_string())
    t.version_rule = (*other)["version_rule"];
  const json& events = j["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const auto bad = [&](const std::string& what) {
      return make_error(name + ": traceEvents[" + std::to_string(i) + "] " + what +
                        ", which a pipeworks trace has" + advice);
    };
    if (!e.is_object()) return bad("is not an object");
    const auto ph = e.find("ph");
    if (ph == e.end() || *ph != "X") continue;  // metadata and flows: the actions carry it all
    const auto args = e.find("args");
    const auto nm = e.find("name");
    if (args == e.end() || !args->is_object()) return bad("has no \"args\" object");
    if (nm == e.end() || !nm->is_string()) return bad("has no \"name\" string");
    auto act = parse_action(nm->get<std::string>());
    if (!act) return bad("is named \"" + nm->get<std::string>() + "\", not an action (" + act.message() + ")");
    std::int64_t pid = 0, tid = 0, version = 0, flow = -1;
    if (!whole(e, "pid", pid) || pid >= ranks) return bad("has no \"pid\" in 0.." + std::to_string(ranks - 1));
    if (!whole(e, "tid", tid)) return bad("has no whole \"tid\" >= 0");
    if (!whole(*args, "version", version, -1)) return bad("has no whole args.version >= -1");
    if (args->contains("flow_id") && !whole(*args, "flow_id", flow)) return bad("has an args.flow_id that is not a whole number >= 0");
    // Bytes are optional: traces written before runs recorded them, and simulated ones, have none.
    std::int64_t bytes = -1;
    if (const auto it = args->find("bytes"); it != args->end()) {
      if (!it->is_number_integer() || it->get<std::int64_t>() < 0)
        return bad("has an args.bytes that is not a whole number >= 0");
      bytes = it->get<std::int64_t>();
    }
    const auto ts = e.find("ts"), dur = e.find("dur");
    if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number() ||
        dur->get<double>() < 0)
      return bad("has no numbers \"ts\" and \"dur\" >= 0");
    timeline_event ev;
    ev.rank = static_cast<int>(pid);
    ev.stream = static_cast<stream_kind>(tid % 3);
    ev.act = *act;
    ev.start = ts->get<double>() * s_per_us;
    ev.end = ev.start + dur->get<double>() * s_per_us;
    ev.version = static_cast<int>(version);
    ev.flow_id = flow;
    ev.bytes = bytes;
    t.events.push_back(ev);
  }
  return t;
}

result<timeline> read_chrome_trace(const std::string& path, std::uint64_t max_bytes) {
  auto text = read_input_text(path, max_bytes, "the trace");
  if (!text) return make_error(text.message());
  return parse_chrome_trace(*text, path);
}

}  // namespace pipeworks
