// Chrome trace-event JSON writer: metadata names each rank and stream, then one complete event per
// action and a flow event pair per matched SEND/RECV.
#include "runtime/trace_chrome.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/checkpoint/atomic_file.hpp"

namespace pipeworks {
namespace {

using nlohmann::json;

constexpr double us_per_s = 1e6;

int rank_count(const timeline& t) {
  int n = t.ranks;
  for (const auto& e : t.events) n = e.rank + 1 > n ? e.rank + 1 : n;
  return n;
}

json metadata(const char* name, int pid, int tid, json args) {
  return json{{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

bool is_send(action_kind k) { return k == action_kind::send_f || k == action_kind::send_b; }
bool is_recv(action_kind k) { return k == action_kind::recv_f || k == action_kind::recv_b; }

// Flows are matched by category, name and id, so both ends must name the payload the same way.
const char* flow_name(action_kind k) {
  return k == action_kind::send_f || k == action_kind::recv_f ? "activation" : "gradient";
}

// Appends `key` and then the number, in the shortest form that reads back exactly.
template <class Number>
void append_field(std::string& buf, std::string_view key, Number value) {
  buf += key;
  if constexpr (std::is_floating_point_v<Number>) {
    if (!std::isfinite(value)) value = 0;  // JSON has no inf or nan
  }
  char digits[32];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  buf.append(digits, end);
}

// Perfetto drops slices that overlap on one track without nesting, and sends in flight can
// overlap. So each event gets a lane: the first on its (rank, stream) that is free at its start.
// Lane 0 is tid = stream; lane k is tid = stream + streams * k.
constexpr int streams = 3;

std::vector<int> assign_lanes(const timeline& t) {
  std::vector<std::size_t> order(t.events.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = t.events[a];
    const auto& y = t.events[b];
    if (x.rank != y.rank) return x.rank < y.rank;
    if (x.stream != y.stream) return x.stream < y.stream;
    return x.start < y.start;
  });
  std::vector<int> lane(t.events.size(), 0);
  std::vector<double> lane_end;  // per lane of the current (rank, stream): when it is free
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& e = t.events[order[i]];
    if (i == 0 || t.events[order[i - 1]].rank != e.rank ||
        t.events[order[i - 1]].stream != e.stream)
      lane_end.clear();
    // Ends that pass the start by rounding noise (1e-9 relative) do not count as overlaps.
    const double start = e.start + 1e-9 * std::max(1.0, std::abs(e.start));
    std::size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > start) ++l;
    if (l == lane_end.size()) lane_end.push_back(e.end);
    lane_end[l] = std::max(e.end, e.start);
    lane[order[i]] = static_cast<int>(l);
  }
  return lane;
}

// Writes the trace event by event, so a long timeline never becomes one JSON tree in memory.
// The keys come in nlohmann's sorted order, as json::dump would write the whole document.
void write_trace(const timeline& t, std::ostream& out) {
  const int ranks = rank_count(t);
  const int p = t.devices_per_replica > 0 ? t.devices_per_replica : (ranks > 0 ? ranks : 1);
  json other{{"title", t.title}, {"ranks", ranks}, {"devices_per_replica", p}};
  if (!t.version_rule.empty()) other["version_rule"] = t.version_rule;
  out << R"({"displayTimeUnit":"ms","otherData":)" << other.dump() << R"(,"traceEvents":[)";
  bool first = true;
  const auto emit = [&](const json& event) {  // metadata: few, so nlohmann is fine
    if (!first) out << ',';
    first = false;
    out << event.dump();
  };

  const std::vector<int> lane = assign_lanes(t);
  std::vector<int> lanes(static_cast<std::size_t>(ranks) * streams, 1);  // per (rank, stream)
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.rank < 0) continue;
    int& n = lanes[static_cast<std::size_t>(e.rank) * streams + static_cast<int>(e.stream)];
    n = std::max(n, lane[i] + 1);
  }

  for (int r = 0; r < ranks; ++r) {
    const std::string label = "rank " + std::to_string(r) + " (replica " + std::to_string(r / p) +
                              ", device " + std::to_string(r % p) + ")";
    emit(metadata("process_name", r, 0, {{"name", label}}));
    emit(metadata("process_sort_index", r, 0, {{"sort_index", r}}));
    for (stream_kind s : {stream_kind::compute, stream_kind::send, stream_kind::recv}) {
      const int n = lanes[static_cast<std::size_t>(r) * streams + static_cast<int>(s)];
      for (int l = 0; l < n; ++l) {
        const int tid = static_cast<int>(s) + streams * l;
        std::string name = stream_name(s);
        if (l > 0) name += " (" + std::to_string(l + 1) + ")";
        emit(metadata("thread_name", r, tid, {{"name", name}}));
        const int sort_index = static_cast<int>(s) * 1000 + l;
        emit(metadata("thread_sort_index", r, tid, {{"sort_index", sort_index}}));
      }
    }
  }

  // A flow is drawn only when both its SEND and its RECV are in the timeline.
  std::unordered_map<std::int64_t, int> flow_ends;  // bit 1: SEND seen, bit 2: RECV seen
  for (const auto& e : t.events) {
    if (e.flow_id < 0) continue;
    if (is_send(e.act.kind)) flow_ends[e.flow_id] |= 1;
    if (is_recv(e.act.kind)) flow_ends[e.flow_id] |= 2;
  }

  // Actions and flows, formatted by hand: nlohmann costs microseconds per event, and a long
  // simulation has millions of them. The strings here are action text and fixed names.
  std::string buf;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    const int tid = static_cast<int>(e.stream) + streams * lane[i];
    const double ts = e.start * us_per_s;
    buf.clear();
    buf += first ? "" : ",";
    first = false;
    buf += R"({"args":{)";
    if (e.bytes >= 0) {
      append_field(buf, R"("bytes":)", e.bytes);
      buf += ',';
    }
    buf += R"("kind":")";
    buf += kind_name(e.act.kind);
    if (e.flow_id >= 0) append_field(buf, R"(","flow_id":)", e.flow_id);
    else buf += '"';
    append_field(buf, R"(,"microbatch":)", e.act.microbatch);
    append_field(buf, R"(,"stage":)", e.act.stage);
    append_field(buf, R"(,"version":)", e.version);
    buf += is_comm(e.act.kind) ? R"(},"cat":"comm")" : R"(},"cat":"compute")";
    append_field(buf, R"(,"dur":)", (e.end - e.start) * us_per_s);
    buf += R"(,"name":")";
    buf += to_string(e.act);
    append_field(buf, R"(","ph":"X","pid":)", e.rank);
    append_field(buf, R"(,"tid":)", tid);
    append_field(buf, R"(,"ts":)", ts);
    buf += '}';
    if (e.flow_id >= 0 && flow_ends[e.flow_id] == 3) {
      // "bp":"e" binds the flow's end to the enclosing slice: the RECV itself.
      buf += is_send(e.act.kind) ? R"(,{"cat":"flow")" : R"(,{"bp":"e","cat":"flow")";
      append_field(buf, R"(,"id":)", e.flow_id);
      buf += R"(,"name":")";
      buf += flow_name(e.act.kind);
      buf += is_send(e.act.kind) ? R"(","ph":"s")" : R"(","ph":"f")";
      append_field(buf, R"(,"pid":)", e.rank);
      append_field(buf, R"(,"tid":)", tid);
      append_field(buf, R"(,"ts":)", ts);
      buf += '}';
    }
    out << buf;
  }
  out << "]}";
}

}  // namespace

std::string to_chrome_trace(const timeline& t) {
  std::ostringstream out;
  write_trace(t, out);
  return std::move(out).str();
}

status write_chrome_trace(const timeline& t, const std::string& path) {
  std::ostringstream out;
  write_trace(t, out);
  out << '\n';
  if (status s = write_text_atomic(path, std::move(out).str()); !s)
    return make_error("cannot write the trace: " + s.message());
  return status::success();
}

}  // namespace pipeworks
