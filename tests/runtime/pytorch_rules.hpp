// PyTorch's rules for a pipeline CSV, ported for tests: _Action.from_str, _load_csv's row
// reading, _validate_schedule, the compute_only / compute_comms checks and _simulate_comms_compute.
#pragma once
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace pipeworks::test {

struct torch_action {
  int stage = 0;
  std::string type;  // "F", "SEND_F", "REDUCE_GRAD", ...
  std::optional<int> mb;
  bool operator<(const torch_action& o) const {
    return std::tie(stage, type, mb) < std::tie(o.stage, o.type, o.mb);
  }
};

// The first rule of PyTorch's loading that `csv` breaks, or "" when it loads. num_stages is the
// pipeline's stage count (p * v), pp_group_size its ranks (p), n the microbatches of one step.
inline std::string pytorch_load_error(const std::string& csv, int pp_group_size, int num_stages,
                                      int n, bool compute_only) {
  // _Action.from_str: re.match (a prefix) of this pattern, after strip(); "" is None.
  static const std::regex pattern(
      R"((\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*))");
  std::map<int, std::vector<std::optional<torch_action>>> actions;
  std::istringstream in(csv);
  std::string line;
  for (int rank = 0; std::getline(in, line); ++rank) {
    auto& row = actions[rank];
    std::size_t start = 0;
    while (start <= line.size()) {
      std::size_t comma = line.find(',', start);
      if (comma == std::string::npos) comma = line.size();
      std::string cell = line.substr(start, comma - start);
      start = comma + 1;
      const auto b = cell.find_first_not_of(" \t\r\n");
      if (b == std::string::npos) {
        if (!line.empty()) row.push_back(std::nullopt);
        continue;
      }
      cell = cell.substr(b, cell.find_last_not_of(" \t\r\n") - b + 1);
      std::smatch m;
      if (!std::regex_search(cell, m, pattern, std::regex_constants::match_continuous))
        return "Invalid action string: " + cell;
      torch_action a{std::stoi(m[1]), m[2], std::nullopt};
      if (m[3].length() > 0) a.mb = std::stoi(m[3]);
      row.push_back(a);
    }
  }
  // _validate_schedule
  if (static_cast<int>(actions.size()) != pp_group_size)
    return "Schedule has incorrect number of ranks - expected " + std::to_string(pp_group_size) +
           ", actual " + std::to_string(actions.size());
  std::map<int, std::map<std::string, std::set<int>>> stage_actions;
  std::map<int, int> stage_to_rank;
  for (auto& [rank, row] : actions)
    for (std::size_t step = 0; step < row.size(); ++step) {
      if (!row[step]) continue;
      const torch_action& a = *row[step];
      if (a.stage < 0 || a.stage >= num_stages) return "KeyError: stage " + std::to_string(a.stage);
      auto& sa = stage_actions[a.stage];
      const int mb = a.mb.value_or(-1);
      if (a.type == "F") sa["F"].insert(mb);
      if ((a.type == "B" || a.type == "I") && !sa["F"].count(mb))
        return "Running backward for stage " + std::to_string(a.stage) + " without Forward";
      if (a.type == "B" || a.type == "I") sa[a.type].insert(mb);
      if (a.type == "W" && !sa["I"].count(mb))
        return "Running Backward Weight without Backward Input";
      if (a.type == "W") sa["W"].insert(mb);
      auto [it, fresh] = stage_to_rank.emplace(a.stage, rank);
      if (!fresh && it->second != rank)
        return "Stage " + std::to_string(a.stage) + " is assigned to both rank " +
               std::to_string(rank) + " and rank " + std::to_string(it->second);
    }
  for (int s = 0; s < num_stages; ++s) {
    auto& sa = stage_actions[s];
    const int f = static_cast<int>(sa["F"].size()), b = static_cast<int>(sa["B"].size());
    const int i = static_cast<int>(sa["I"].size()), w = static_cast<int>(sa["W"].size());
    if (f != n)
      return "Got " + std::to_string(f) + " F microbatches for stage " + std::to_string(s) +
             ", expected " + std::to_string(n);
    if (i != w) return "I and W must have equal counts";
    if (b + (i + w) / 2 != n) return "expected " + std::to_string(n) + " total backwards";
  }
  // arg_mbs[mb_index]: ids index the step's microbatches.
  for (auto& [s, sa] : stage_actions)
    for (int mb : sa["F"])
      if (mb < 0 || mb >= n) return "microbatch " + std::to_string(mb) + " out of range";
  const std::set<std::string> compute{"F", "B", "I", "W", "OVERLAP_F_B"};
  for (auto& [rank, row] : actions)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (compute_only && row[i] && !compute.count(row[i]->type))
        return "Expected compute-only schedule but found communication action at rank " +
               std::to_string(rank);
      if (!compute_only && !row[i]) return "Expected action to be not None";
    }
  if (compute_only) return "";
  // _simulate_comms_compute: rounds over the ranks in order until every rank is done.
  std::map<int, std::set<torch_action>> done;
  std::map<int, std::size_t> pc;
  auto has = [&](int stage, const std::string& type, std::optional<int> mb) {
    return done[stage_to_rank.at(stage)].count(torch_action{stage, type, mb}) > 0;
  };
  auto ready = [&](const torch_action& a) {
    const int s = a.stage;
    if (a.type == "F") return s == 0 || has(s, "RECV_F", a.mb) || has(s - 1, "F", a.mb);
    if (a.type == "I" || a.type == "B")
      return s == num_stages - 1 || has(s, "RECV_B", a.mb) || has(s + 1, "I", a.mb) ||
             has(s + 1, "B", a.mb);
    if (a.type == "SEND_F") return has(s, "F", a.mb);
    if (a.type == "RECV_F") return has(s - 1, "SEND_F", a.mb);
    if (a.type == "SEND_B") return has(s, "I", a.mb) || has(s, "B", a.mb);
    if (a.type == "RECV_B") return has(s + 1, "SEND_B", a.mb);
    return true;  // W, REDUCE_GRAD
  };
  for (bool left = true; left;) {
    left = false;
    bool progress = false;
    for (auto& [rank, row] : actions) {
      if (pc[rank] >= row.size()) continue;
      const torch_action& a = *row[pc[rank]];
      if (!ready(a)) continue;
      done[rank].insert(a);
      ++pc[rank];
      progress = true;
    }
    for (auto& [rank, row] : actions) left = left || pc[rank] < row.size();
    if (left && !progress) return "Schedule is not progressing";
  }
  return "";
}

}  // namespace pipeworks::test
