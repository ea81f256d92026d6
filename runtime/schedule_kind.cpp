// Schedule kinds by name ("gpipe", "1f1b", ..., "cyclic", "zbv") and their properties, and
// make_schedule, which dispatches to the generator of a kind.
#include <array>
#include <string>
#include <vector>

#include "runtime/schedule.hpp"

namespace pipeworks {

namespace {

struct kind_entry {
  schedule_kind kind;
  std::string_view name;
};

constexpr std::array<kind_entry, 15> kind_entries{{
    {schedule_kind::gpipe, "gpipe"},
    {schedule_kind::one_f_one_b, "1f1b"},
    {schedule_kind::interleaved, "interleaved"},
    {schedule_kind::zb_h1, "zb-h1"},
    {schedule_kind::zb_h2, "zb-h2"},
    {schedule_kind::bfs, "bfs"},
    {schedule_kind::pipedream, "pipedream"},
    {schedule_kind::pipedream_vs, "pipedream-vs"},
    {schedule_kind::two_bw, "2bw"},
    {schedule_kind::cyclic, "cyclic"},
    {schedule_kind::zbv, "zbv"},
    {schedule_kind::v_half, "v-half"},
    {schedule_kind::v_min, "v-min"},
    {schedule_kind::dualpipev, "dualpipev"},
    {schedule_kind::dualpipe, "dualpipe"},
}};

}  // namespace

std::string_view schedule_name(schedule_kind k) {
  for (const auto& e : kind_entries)
    if (e.kind == k) return e.name;
  return "?";
}

const std::vector<schedule_kind>& every_schedule_kind() {
  static const std::vector<schedule_kind> kinds = [] {
    std::vector<schedule_kind> out;
    for (const auto& e : kind_entries) out.push_back(e.kind);
    return out;
  }();
  return kinds;
}

std::string schedule_names(bool flush) {
  std::string out;
  for (const auto& e : kind_entries)
    if (is_flush(e.kind) == flush) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

result<schedule_kind> parse_schedule_kind(std::string_view name) {
  for (const auto& e : kind_entries)
    if (e.name == name) return e.kind;
  std::string known;
  for (const auto& e : kind_entries) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return make_error("unknown schedule '" + std::string(name) + "'; known schedules are " + known);
}

bool is_flush(schedule_kind k) {
  switch (k) {
    case schedule_kind::gpipe:
    case schedule_kind::one_f_one_b:
    case schedule_kind::interleaved:
    case schedule_kind::zb_h1:
    case schedule_kind::zb_h2:
    case schedule_kind::bfs:
    case schedule_kind::zbv:
    case schedule_kind::v_half:
    case schedule_kind::v_min:
    case schedule_kind::dualpipev:
    case schedule_kind::dualpipe:
      return true;
    default:
      return false;
  }
}

bool is_v_shape(schedule_kind k) {
  return k == schedule_kind::zbv || k == schedule_kind::v_half || k == schedule_kind::v_min ||
         k == schedule_kind::dualpipev;
}

int default_chunks(schedule_kind k) {
  return is_v_shape(k) || k == schedule_kind::dualpipe ? 2 : 1;
}

bool splits_backward(schedule_kind k) {
  return k == schedule_kind::zb_h1 || k == schedule_kind::zb_h2 || is_v_shape(k) ||
         k == schedule_kind::dualpipe;
}

int default_routes(schedule_kind k) { return k == schedule_kind::dualpipe ? 2 : 1; }

std::string_view reduce_mode_name(reduce_mode m) {
  return m == reduce_mode::p2p ? "p2p" : "collective";
}

result<schedule> make_schedule(schedule_kind kind, const schedule_params& params) {
  if (params.reduce == reduce_mode::p2p && (kind != schedule_kind::cyclic || params.replicas < 2))
    return make_error("the point-to-point reduce (p2p) is cyclic data parallelism's: it needs the "
                      "cyclic schedule and at least 2 replicas (got " +
                      std::string(schedule_name(kind)) + " with " +
                      std::to_string(params.replicas) + "); use the collective reduce");
  switch (kind) {
    case schedule_kind::gpipe: return gpipe(params);
    case schedule_kind::one_f_one_b: return one_f_one_b(params);
    case schedule_kind::interleaved: return interleaved(params);
    case schedule_kind::zb_h1: return zero_bubble_h1(params);
    case schedule_kind::zb_h2: return zero_bubble_h2(params);
    case schedule_kind::bfs: return breadth_first(params);
    case schedule_kind::pipedream: return pipedream(params);
    case schedule_kind::pipedream_vs: return pipedream_vertical_sync(params);
    case schedule_kind::two_bw: return pipedream_2bw(params);
    case schedule_kind::cyclic: return cyclic(params);
    case schedule_kind::zbv: return zbv(params);
    case schedule_kind::v_half: return v_half(params);
    case schedule_kind::v_min: return v_min(params);
    case schedule_kind::dualpipev: return dualpipev(params);
    case schedule_kind::dualpipe: return dualpipe(params);
  }
  return make_error("make_schedule: unknown schedule kind " +
                    std::to_string(static_cast<int>(kind)));
}

}  // namespace pipeworks
