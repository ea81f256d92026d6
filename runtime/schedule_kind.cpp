// Schedule kinds by name ("gpipe", "1f1b", ..., "cyclic") and make_schedule, which dispatches to
// the generator of a kind.
#include <array>
#include <string>

#include "runtime/schedule.hpp"

namespace pipeworks {

namespace {

struct kind_entry {
  schedule_kind kind;
  std::string_view name;
};

constexpr std::array<kind_entry, 10> kind_entries{{
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
}};

}  // namespace

std::string_view schedule_name(schedule_kind k) {
  for (const auto& e : kind_entries)
    if (e.kind == k) return e.name;
  return "?";
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
      return true;
    default:
      return false;
  }
}

result<schedule> make_schedule(schedule_kind kind, const schedule_params& params) {
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
  }
  return make_error("make_schedule: unknown schedule kind " +
                    std::to_string(static_cast<int>(kind)));
}

}  // namespace pipeworks
