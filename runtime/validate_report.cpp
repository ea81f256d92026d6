// The validator's deadlock picture: a step x rank grid of what each rank ran, with the action
// each stuck rank waits at marked; see validate_report.hpp.
#include "runtime/validate_report.hpp"

#include <algorithm>
#include <string>

namespace pipeworks::detail {

namespace {

std::string act(int stage, action_kind kind, int mb) { return to_string(action{stage, kind, mb}); }

}  // namespace

std::string deadlock_report(const deadlock_state& d) {
const std::vector<int>& stuck = d.stuck;
const int ranks = static_cast<int>(d.programs.size());
  constexpr std::size_t max_columns = 16;
  constexpr int max_rows = 48;
  std::vector<int> shown;
  if (static_cast<std::size_t>(ranks) <= max_columns) {
    for (int r = 0; r < ranks; ++r) shown.push_back(r);
  } else {
    for (std::size_t i = 0; i < stuck.size() && i < max_columns; ++i) shown.push_back(stuck[i]);
  }
  int first_stuck_row = 1 << 30, last_stuck_row = 0;
  for (int r : stuck) {
    first_stuck_row = std::min(first_stuck_row, d.last_step[r] + 1);
    last_stuck_row = std::max(last_stuck_row, d.last_step[r] + 1);
  }
  const int lo = std::max(0, first_stuck_row - 8);
  const int hi = std::min(last_stuck_row, lo + max_rows - 1);
  const int rows = hi - lo + 1;
  std::vector<std::vector<std::string>> cells(shown.size(), std::vector<std::string>(rows));
  std::vector<char> row_stuck(rows, 0);
  for (std::size_t c = 0; c < shown.size(); ++c) {
    const int r = shown[c];
    const program& prog = d.programs[r];
    for (std::size_t pos = 0; pos < d.pc[r]; ++pos) {
      const int st = d.step_at[r][pos];
      if (st >= lo && st <= hi) cells[c][st - lo] = to_string(prog[pos]);
    }
    if (d.pc[r] < prog.size()) {
      const int st = d.last_step[r] + 1;
      if (st >= lo && st <= hi) {
        cells[c][st - lo] = "[" + to_string(prog[d.pc[r]]) + "]";
        row_stuck[st - lo] = 1;
      }
    }
  }
  const std::string hi_text = std::to_string(hi);
  auto label = [&](int step) {
    std::string n = std::to_string(step);
    return "step " + std::string(hi_text.size() - n.size(), '0') + n;
  };
  const std::size_t label_width = label(hi).size();
  std::vector<std::size_t> width(shown.size());
  for (std::size_t c = 0; c < shown.size(); ++c) {
    width[c] = ("rank " + std::to_string(shown[c])).size();
    for (const auto& cell : cells[c]) width[c] = std::max(width[c], cell.size());
  }
  auto pad = [](std::string text, std::size_t n) {
    text.resize(std::max(n, text.size()), ' ');
    return text;
  };
  std::string out = "deadlock: " + std::to_string(stuck.size()) + " of " +
                    std::to_string(ranks) +
                    " ranks cannot finish their programs; [..] marks the action each waits at\n";
  if (lo > 0) out += "(steps 0.." + std::to_string(lo - 1) + " not shown)\n";
  std::string header(label_width + 2, ' ');
  for (std::size_t c = 0; c < shown.size(); ++c)
    header += pad("rank " + std::to_string(shown[c]), width[c]) + " ";
  while (header.back() == ' ') header.pop_back();
  out += header + "\n";
  for (int row = 0; row < rows; ++row) {
    std::string line = label(lo + row) + ": ";
    for (std::size_t c = 0; c < shown.size(); ++c) line += pad(cells[c][row], width[c]) + " ";
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (row_stuck[row]) line += "  <-- stuck";
    out += line + "\n";
  }
  if (hi < last_stuck_row) out += "(later steps not shown)\n";
  std::size_t explained = 0;
  for (int r : stuck) {
    if (explained == max_columns) {
      out += "... and " + std::to_string(stuck.size() - explained) + " more stuck ranks\n";
      break;
    }
    out += "rank " + std::to_string(r) + " waits at " + to_string(d.programs[r][d.pc[r]]) +
           " for " + d.why[explained] + "\n";
    ++explained;
  }
  return out;
}

// What the stuck action of rank r waits for, in words.
std::string waits_for(const schedule& sched, const std::vector<std::size_t>& pc, int r) {
  const int p = sched.params.stages, w = sched.params.replicas;
  auto rank_of = [&](int q, int stage) { return q * p + sched.device_of[stage]; };
  const int q = r / p;
  const action& a = sched.programs[r][pc[r]];
  const int s = a.stage, mb = a.microbatch;
  auto other = [&](int stage, const std::string& what) {
    const int o = rank_of(q, stage);
    std::string text = what + " on rank " + std::to_string(o);
    if (pc[o] < sched.programs[o].size())
      text += ", which is itself stuck at " + to_string(sched.programs[o][pc[o]]);
    else
      text += ", which finished without it";
    return text;
  };
  switch (a.kind) {
    case action_kind::forward: return other(s - 1, act(s - 1, action_kind::forward, mb));
    case action_kind::backward:
    case action_kind::input_grad:
      return other(s + 1, "the backward " + act(s + 1, action_kind::backward, mb) + "/" +
                              act(s + 1, action_kind::input_grad, mb));
    case action_kind::recv_f: return other(s - 1, act(s - 1, action_kind::send_f, mb));
    case action_kind::recv_b: return other(s + 1, act(s + 1, action_kind::send_b, mb));
    case action_kind::reduce: {
      std::string text = "the other replicas of stage " + std::to_string(s) + " to reach REDUCE";
      for (int o = 0; o < w; ++o) {
        const int orank = rank_of(o, s);
        if (orank == r) continue;
        text += "; rank " + std::to_string(orank) +
                (pc[orank] < sched.programs[orank].size()
                     ? " is stuck at " + to_string(sched.programs[orank][pc[orank]])
                     : " has finished");
      }
      return text;
    }
    default:
      return "nothing it can get";
  }
}

}  // namespace pipeworks::detail
