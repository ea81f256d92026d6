// V-Half and V-Min (Qi et al., 2024, "Pipeline Parallelism with Controllable Memory"): V schedules
// whose activation memory is 1/2 and 1/3 of 1F1B's, built as the paper's reference code does.
#include <algorithm>
#include <array>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// A device's plan in slot times: times[type][k] is the slot of the k-th action of that type. The
// types, as the paper's code names them: 0 F of chunk 0, 1 F of chunk 1, 2 I of chunk 1 (the
// backward enters the V at its end, device 0), 3 I of chunk 0, then W: 4 (one list of both
// chunks' W while reordering), or 4 W of chunk 1 and 5 W of chunk 0 once split.
using device_times = std::vector<std::vector<int>>;

int last_slot(const device_times& d) {
  int bound = 0;
  for (const auto& t : d)
    if (!t.empty()) bound = std::max(bound, t.back());
  return bound;
}

// The repeating block of each device, one slot per action, 6 slots per microbatch (F, f, B, b and
// two W): V-Min holds about a third of 1F1B's activations, V-Half about half.
device_times stable_pattern(bool half, int p, int d) {
  if (half) {
    const int gap = p % 2 == 0 ? 3 : 0;
    return {{2 * d}, {3 * p - d - 2}, {3 * p + gap + 2 * d - 1}, {6 * p + gap - d - 2}};
  }
  const int gap = p % 3 == 0 ? 2 : 0;
  return {{d}, {2 * p - d - 1}, {2 * p + gap + d}, {4 * p + gap - d - 1}};
}

// Puts the W of a device into its free slots, each after its I, oldest first; those left go after
// the last slot. `split`: one W list per chunk (types 4 and 5) instead of one (type 4).
void put_w(device_times& d, bool split) {
  const int bound = last_slot(d), inf = bound + 1;
  d.resize(split ? 6 : 5);
  std::array<int, 2> pending{0, 0};
  std::array<std::size_t, 4> next{0, 0, 0, 0};
  int i = 0;
  for (; i <= bound; ++i) {
    int when = inf, type = 0;
    for (int t = 0; t < 4; ++t) {
      const int at = next[t] < d[t].size() ? d[t][next[t]] : inf;
      if (at < when) when = at, type = t;
    }
    if (when == i) {
      ++next[type];
      if (type >= 2) ++pending[split ? type - 2 : 0];
      continue;
    }
    for (int w = 0; w < 2; ++w)
      if (pending[w] > 0) {
        d[4 + w].push_back(i);
        --pending[w];
        break;
      }
  }
  --i;
  for (int w = 0; w < 2; ++w)
    for (; pending[w] > 0; --pending[w]) d[4 + w].push_back(++i);
}

// A device's peak activation count in its slot order: F and f hold one, W frees one (without W in
// the plan, each free slot after an I frees one). A device's actions hold distinct slots. The
// reordering asks this once per slot it tries, so it reads the slots from one array.
int peak_memory(const device_times& d) {
  const bool has_w = d.size() > 4;
  thread_local std::vector<signed char> type_at;  // the type in each slot; -1: free
  type_at.assign(static_cast<std::size_t>(last_slot(d)) + 1, -1);
  for (std::size_t t = 0; t < d.size(); ++t)
    for (int slot : d[t]) type_at[static_cast<std::size_t>(slot)] = static_cast<signed char>(t);
  int pending = 0, now = 0, peak = 0;
  for (const signed char type : type_at) {
    if (type >= 0) {
      if (type < 2) ++now;
      if (type >= 4) --now;
      if (type == 2 || type == 3) ++pending;
    } else if (!has_w && pending > 0) {
      --now;
      --pending;
    }
    peak = std::max(peak, now);
  }
  return peak;
}

// The next action of all devices in slot order (ties: lower device, then lower type). Only an
// action already taken has its slot changed (reorder moves it), so each (device, type)'s next
// action waits in a heap under the slot it had when its predecessor was taken.
struct cursor {
  using due = std::array<int, 3>;  // {slot, device, type}
  std::vector<std::vector<std::size_t>> next;  // [device][type]
  std::priority_queue<due, std::vector<due>, std::greater<due>> heap;
  explicit cursor(const std::vector<device_times>& plan)
      : next(plan.size(), std::vector<std::size_t>(plan[0].size(), 0)) {
    for (std::size_t d = 0; d < plan.size(); ++d)
      for (std::size_t t = 0; t < plan[d].size(); ++t)
        if (!plan[d][t].empty()) heap.push({plan[d][t][0], static_cast<int>(d), static_cast<int>(t)});
  }
  // {slot, device, type, k}; slot is -1 when every action is taken.
  std::array<int, 4> take(const std::vector<device_times>& plan) {
    if (heap.empty()) return {-1, 0, 0, 0};
    const auto [slot, d, t] = heap.top();
    heap.pop();
    std::size_t& k = next[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)];
    const auto& times = plan[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)];
    const int taken = static_cast<int>(k++);
    if (k < times.size()) heap.push({times[k], d, t});
    return {slot, d, t, taken};
  }
};

// Runs every action as early as its dependences allow, in the plan's order per device, each
// taking one slot: the new slot times, and each device's order of (type, k).
result<std::vector<device_times>> squeeze(const std::vector<device_times>& plan,
                                          std::vector<std::vector<std::pair<int, int>>>* order) {
  const int devices = static_cast<int>(plan.size());
  std::vector<std::pair<int, int>> last(devices, {-1, -1});
  std::vector<device_times> start(devices), end(devices);  // end: -1 until the action is placed
  for (int d = 0; d < devices; ++d) {
    start[d].resize(plan[d].size());
    end[d].resize(plan[d].size());
    for (std::size_t t = 0; t < plan[d].size(); ++t) {
      start[d][t].resize(plan[d][t].size());
      end[d][t].assign(plan[d][t].size(), -1);
    }
  }
  if (order) order->assign(devices, {});
  cursor c(plan);
  for (auto a = c.take(plan); a[0] >= 0; a = c.take(plan)) {
    const int d = a[1], type = a[2], k = a[3];
    int ready = 0;
    auto after = [&](int dd, int tt, int kk) {
      const auto& ends = end[static_cast<std::size_t>(dd)];
      if (static_cast<std::size_t>(tt) >= ends.size() ||
          static_cast<std::size_t>(kk) >= ends[static_cast<std::size_t>(tt)].size())
        return false;
      const int e = ends[static_cast<std::size_t>(tt)][static_cast<std::size_t>(kk)];
      if (e < 0) return false;
      ready = std::max(ready, e);
      return true;
    };
    bool ok = true;
    if ((type == 0 || type == 2) && d > 0) ok = ok && after(d - 1, type, k);
    if ((type == 1 || type == 3) && d + 1 < devices) ok = ok && after(d + 1, type, k);
    if (type > 0 && type < 4) ok = ok && after(d, type - 1, k);
    if (k > 0) ok = ok && after(d, type, k - 1);
    if (last[d].first >= 0) ok = ok && after(d, last[d].first, last[d].second);
    if (!ok)
      return make_error("V schedule: the slot plan runs an action before its dependence (device " +
                        std::to_string(d) + ", type " + std::to_string(type) + ", microbatch " +
                        std::to_string(k) + ")");
    end[d][type][k] = ready + 1;
    start[d][type][k] = ready;
    last[d] = {type, k};
    if (order) (*order)[d].push_back({type, k});
  }
  return start;
}

// The paper's greedy reordering: moves each action to the earliest free slot after its
// dependences that keeps the device's peak memory, except in the steady phase (from device 0's
// first I of chunk 0 to its last F of chunk 0) and, without W, in the warm-up.
result<std::vector<device_times>> reorder(std::vector<device_times> plan, bool with_w) {
  if (with_w)
    for (auto& d : plan) put_w(d, false);
  int memory = 0;
  for (const auto& d : plan) memory = std::max(memory, peak_memory(d));
  const int devices = static_cast<int>(plan.size());
  const int m = static_cast<int>(plan[0][0].size());
  std::vector<std::vector<bool>> taken(devices);
  for (int d = 0; d < devices; ++d) taken[d].assign(static_cast<std::size_t>(last_slot(plan[d])) + 1, false);
  int phase = 0;
  cursor c(plan);
  for (auto a = c.take(plan); a[0] >= 0; a = c.take(plan)) {
    const int when = a[0], d = a[1], type = a[2], k = a[3];
    int& slot = plan[d][type][k];
    if (type == 3 && d == 0 && phase == 0) phase = 1;
    const bool keep = phase == 1 || (phase == 0 && !with_w);
    if (phase == 1 && type == 0 && k == m - 1) phase = 2;
    if (!keep) {
      int ready = -1;
      if ((type == 0 || type == 2) && d > 0) ready = std::max(ready, plan[d - 1][type][k]);
      if ((type == 1 || type == 3) && d + 1 < devices) ready = std::max(ready, plan[d + 1][type][k]);
      if (type > 0 && type < 4) ready = std::max(ready, plan[d][type - 1][k]);
      if (type == 4) {
        std::vector<int> inputs = plan[d][2];
        inputs.insert(inputs.end(), plan[d][3].begin(), plan[d][3].end());
        std::sort(inputs.begin(), inputs.end());
        ready = std::max(ready, inputs[static_cast<std::size_t>(k)]);
      }
      if (k > 0) ready = std::max(ready, plan[d][type][k - 1]);
      ++ready;
      if (ready > when)
        return make_error("V schedule: reordering found an action after its own slot (device " +
                          std::to_string(d) + ")");
      bool moved = false;
      for (int at = ready; at < when && !moved; ++at) {
        if (taken[d][at]) continue;
        slot = at;
        moved = peak_memory(plan[d]) <= memory;
      }
      if (!moved) slot = when;
    }
    if (static_cast<std::size_t>(slot) >= taken[d].size()) taken[d].resize(slot + 1, false);
    taken[d][slot] = true;
  }
  if (!with_w)
    for (auto& d : plan) put_w(d, false);
  return squeeze(plan, nullptr);
}

// Each device's order of (type, k) for m microbatches on p devices.
result<std::vector<std::vector<std::pair<int, int>>>> controllable_order(bool half, int p, int m) {
  std::vector<device_times> plan(p);
  for (int d = 0; d < p; ++d) {
    const device_times pattern = stable_pattern(half, p, d);
    plan[d].resize(4);
    for (int t = 0; t < 4; ++t)
      for (int k = 0; k < m; ++k) plan[d][t].push_back(pattern[t][0] + 6 * k);
  }
  auto first = reorder(std::move(plan), true);
  if (!first) return error{first.message()};
  for (auto& d : *first) d.resize(4);
  auto second = reorder(std::move(*first), false);
  if (!second) return error{second.message()};
  for (auto& d : *second) {
    d.resize(4);
    put_w(d, true);
  }
  std::vector<std::vector<std::pair<int, int>>> order;
  if (auto ok = squeeze(*second, &order); !ok) return error{ok.message()};
  return order;
}

// The most p²·m the greedy reordering is given: its work grows about so (each of its 6·p·m
// actions tries slots of a device's plan, p·m long); 2^26 is p = m = 406, or p = 64 with
// m = 16384, and takes seconds.
constexpr double max_reorder_work = double{1 << 26};

result<schedule> v_schedule(schedule_kind kind, const schedule_params& params) {
  const std::string name(schedule_name(kind));
  if (auto ok = schedules::check_v_params(name, params); !ok) return error{ok.message()};
  const int p = params.stages, m = params.microbatches;
  if (const double work = double{1.0} * p * p * m; work > max_reorder_work)
    return error{name + ": p=" + std::to_string(p) + " m=" + std::to_string(m) +
                 " is too large for its generator (the paper's greedy reordering), whose work grows "
                 "as p*p*m: at most 2^26 = 67108864, here " + std::to_string(static_cast<long long>(work)) +
                 "; lower --stages or --microbatches, or use zbv, whose V has no reordering"};
  auto order = controllable_order(kind == schedule_kind::v_half, p, m);
  if (!order) return error{name + ": " + order.message()};
  schedule s = schedules::start_schedule(kind, params);
  schedules::reserve_programs(s, 6 * static_cast<std::size_t>(m) * params.steps);
  // Types to actions: chunk 0 is virtual stage d, chunk 1 is 2p-1-d.
  constexpr std::array<action_kind, 6> kinds{action_kind::forward,    action_kind::forward,
                                             action_kind::input_grad, action_kind::input_grad,
                                             action_kind::weight_grad, action_kind::weight_grad};
  constexpr std::array<bool, 6> chunk_one{false, true, true, false, true, false};
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < params.steps; ++t)
      for (const auto& [type, k] : (*order)[d])
        s.programs[d].push_back(action{chunk_one[type] ? 2 * p - 1 - d : d, kinds[type], t * m + k});
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace

result<schedule> v_half(const schedule_params& params) {
  return v_schedule(schedule_kind::v_half, params);
}

result<schedule> v_min(const schedule_params& params) {
  return v_schedule(schedule_kind::v_min, params);
}

}  // namespace pipeworks
