// cut_recorder: where a rank's checkpoint cuts fall, and the markers, messages and credits that
// decide what each cut records (runtime/checkpoint/cut.hpp proves the cuts consistent).
#include "runtime/exec/cut_recorder.hpp"

#include <algorithm>

namespace pipeworks {

message on_host(message m) {
  if (auto* a = std::get_if<activation_msg>(&m)) a->data = a->data.on_host();
  if (auto* g = std::get_if<gradient_msg>(&m)) g->data = g->data.on_host();
  if (auto* r = std::get_if<reduce_result>(&m)) r->sum = pipeworks::on_host(r->sum);
  return m;
}

void cut_recorder::plan(const program& prog, std::int64_t every, std::int64_t steps) {
  cut_before_.assign(prog.size() + 1, 0);
  if (every > 0) {
    std::map<int, std::vector<std::size_t>> step_at;  // stage -> positions of its STEPs
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (prog[i].kind == action_kind::step) step_at[prog[i].stage].push_back(i);
    for (std::int64_t n = every; n < steps; n += every) {
      std::size_t cut = 0;
      for (const auto& [stage, at] : step_at)
        if (static_cast<std::int64_t>(at.size()) >= n) cut = std::max(cut, at[n - 1] + 1);
      if (cut > 0) cut_before_[cut] = static_cast<int>(n);
    }
  }
  keeps_input_.assign(prog.size(), false);
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < cut_before_.size(); ++i)
    if (cut_before_[i] > 0) cuts.push_back(i);
  if (cuts.empty()) return;
  std::map<message_key, std::size_t> backward_at;
  for (std::size_t i = 0; i < prog.size(); ++i)
    if (prog[i].kind == action_kind::backward || prog[i].kind == action_kind::input_grad)
      backward_at[{prog[i].stage, prog[i].microbatch}] = i;
  for (std::size_t i = 0; i < prog.size(); ++i) {
    if (prog[i].kind != action_kind::forward) continue;
    const auto next_cut = std::upper_bound(cuts.begin(), cuts.end(), i);
    auto b = backward_at.find({prog[i].stage, prog[i].microbatch});
    keeps_input_[i] = next_cut != cuts.end() && b != backward_at.end() && b->second >= *next_cut;
  }
}

int cut_recorder::due(std::size_t pc) const {
  const int n = cut_before_[pc];
  return n > recorded_step_ ? n : 0;
}

void cut_recorder::note_arrival(int from, const message& msg) {
  const int marker = marker_from_[from];
  for (auto& [step, snap] : open_)
    if (marker < step && snap.waiting.count(from)) snap.state.deliver.push_back(on_host(msg));
  if (auto* c = std::get_if<credit_msg>(&msg); c && marker > recorded_step_)
    ++credits_after_marker_[{{c->stage, c->forward}, marker}];
}

std::map<link_key, int> cut_recorder::credits_at(std::map<link_key, int> credits, int n) {
  for (const auto& [key, count] : credits_after_marker_)
    if (key.second >= n) credits[key.first] -= count;
  std::erase_if(credits_after_marker_, [n](const auto& kv) { return kv.first.second <= n; });
  return credits;
}

void cut_recorder::open(int n, rank_state state) {
  open_snapshot o{std::move(state), {}};
  for (int q : peers)
    if (marker_from_[q] < n) o.waiting.insert(q);
  const bool complete = o.waiting.empty();
  open_.emplace(n, std::move(o));
  if (complete) finish(n);
  recorded_step_ = n;
}

std::string cut_recorder::on_marker(const marker_msg& mk) {
  if (!peers.count(mk.from_rank))
    return "a checkpoint marker from rank " + std::to_string(mk.from_rank) +
           ", which sends this rank nothing";
  int& seen = marker_from_[mk.from_rank];
  seen = std::max(seen, mk.step);
  std::vector<int> complete;
  for (auto& [step, snap] : open_)
    if (step <= mk.step && snap.waiting.erase(mk.from_rank) && snap.waiting.empty())
      complete.push_back(step);
  for (int step : complete) finish(step);
  return "";
}

void cut_recorder::restored(int n) {
  recorded_step_ = n;
  for (int q : peers) marker_from_[q] = n;
}

void cut_recorder::finish(int n) {
  auto it = open_.find(n);
  complete_.push_back(std::move(it->second.state));
  open_.erase(it);
}

}  // namespace pipeworks
