// DualPipe and DualPipeV (DeepSeek; DualPipeV is DualPipe cut in half, as PyTorch's
// ScheduleDualPipeV builds it): the V placement (device d holds virtual stages d and 2p-1-d), one
// microbatch's forward overlapped with another's backward (OVERLAP_F_B), zero-bubble I and W at
// the ends. Synchronous. DualPipe runs each device's order as DualPipeV's over half the devices.
#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "runtime/schedules/builder.hpp"

namespace pipeworks {

namespace {

// Device d's order (of p) for one step of m microbatches per stage whose ids start at `first`:
// `early` is its stage nearer the start of its route, `late` the other. Each (stage, kind)
// counts its own microbatches; a full B counts as its stage's I and W both, and every I queues
// its W for the next free turn.
class dualpipev_rank {
 public:
  dualpipev_rank(program& out, int early, int late, int first)
      : out_(out), first_(first), s0_(early), s1_(late) {}

  void step(int d, int p, int m) {
    for (int i = 0; i < 2 * (p - d - 1); ++i) add(s0_, action_kind::forward);  // 1: F0
    for (int i = 0; i < d + 1; ++i) {                                           // 2: F0 F1
      add(s0_, action_kind::forward);
      add(s1_, action_kind::forward);
    }
    for (int i = 0; i < p - d - 1; ++i) {  // 3: I1 W F1 (zero bubble)
      add(s1_, action_kind::input_grad);
      pending_w();
      add(s1_, action_kind::forward);
    }
    for (int i = 0; i < m - 2 * p + d + 1; ++i) {  // 4: F0&B1, F1&B0 (the main loop)
      if (i == 0 && d == p - 1) {  // the turn of the V: not overlapped, to shorten the bubble
        add(s0_, action_kind::forward);
        add(s1_, action_kind::backward);
      } else {
        overlap(s0_, s1_);
      }
      overlap(s1_, s0_);
    }
    for (int i = 0; i < p - d - 1; ++i) {  // 5: B1, F1&B0
      add(s1_, action_kind::backward);
      overlap(s1_, s0_);
    }
    bool zero_bubble = false;  // 6: B1 B0, the second half as I (W later)
    const int half = d + 1;
    for (int i = 0; i < half; ++i) {
      if (i == half / 2 && d % 2 == 1) zero_bubble = true;
      add(s1_, zero_bubble ? action_kind::input_grad : action_kind::backward);
      if (i == half / 2 && d % 2 == 0) zero_bubble = true;
      add(s0_, zero_bubble ? action_kind::input_grad : action_kind::backward);
    }
    for (int i = 0; i < p - d - 1; ++i) {  // 7: W B0
      pending_w();
      add(s0_, zero_bubble ? action_kind::input_grad : action_kind::backward);
    }
    for (int i = 0; i < d + 1; ++i) pending_w();  // 8: W
  }

 private:
  // The next microbatch of (stage, kind); B and I share the I count.
  int next(int stage, action_kind k) {
    const action_kind key = k == action_kind::backward ? action_kind::input_grad : k;
    return counts_[{stage, key}]++;
  }
  void add(int stage, action_kind k) {
    const int mb = next(stage, k);
    if (k == action_kind::backward) ++counts_[{stage, action_kind::weight_grad}];
    if (k == action_kind::input_grad) w_queue_.push_back({stage, mb});
    out_.push_back(action{stage, k, first_ + mb});
  }
  void overlap(int forward_stage, int backward_stage) {
    const int f = next(forward_stage, action_kind::forward);
    const int b = next(backward_stage, action_kind::backward);
    ++counts_[{backward_stage, action_kind::weight_grad}];
    out_.push_back(action{forward_stage, action_kind::overlap_f_b, -1});
    out_.push_back(action{forward_stage, action_kind::forward, first_ + f});
    out_.push_back(action{backward_stage, action_kind::backward, first_ + b});
  }
  void pending_w() {
    if (w_queue_.empty()) return;
    const auto [stage, mb] = w_queue_.front();
    w_queue_.pop_front();
    ++counts_[{stage, action_kind::weight_grad}];
    out_.push_back(action{stage, action_kind::weight_grad, first_ + mb});
  }

  program& out_;
  int first_, s0_, s1_;
  std::map<std::pair<int, action_kind>, int> counts_;
  std::deque<std::pair<int, int>> w_queue_;
};

}  // namespace

result<schedule> dualpipev(const schedule_params& params) {
  if (auto ok = schedules::check_v_params("dualpipev", params); !ok) return error{ok.message()};
  const int p = params.stages, m = params.microbatches;
  if (m < 2 * p)
    return make_error("dualpipev needs at least as many microbatches as virtual stages, m >= 2p "
                      "(got m = " + std::to_string(m) + ", p = " + std::to_string(p) +
                      "); use m = " + std::to_string(2 * p) + " or more");
  schedule s = schedules::start_schedule(schedule_kind::dualpipev, params);
  schedules::reserve_programs(s, 8 * static_cast<std::size_t>(m) * params.steps);
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < params.steps; ++t)
      dualpipev_rank(s.programs[d], d, 2 * p - 1 - d, t * m).step(d, p, m);
  schedules::finish_flush_schedule(s);
  return s;
}

// DualPipe over P = 2h devices: route 0 runs the model down the devices (virtual stage k on
// device k), route 1 up them (virtual stage P + k on device P-1-k), each with half the step's
// microbatches. Device r, at distance h_r = min(r, P-1-r) from its nearer end, runs DualPipeV's
// order for device h_r of h devices, its early stage the one at position h_r of its route and
// its late stage the one at position P-1-h_r of the other (DeepSeek's dualpipe.py, step 1 to 8).
result<schedule> dualpipe(const schedule_params& params) {
  if (auto ok = schedules::check_v_params("dualpipe", params); !ok) return error{ok.message()};
  const int p = params.stages, m = params.microbatches;
  if (p % 2 != 0)
    return make_error("dualpipe mirrors the pipeline about its middle, so it needs an even stage "
                      "count p (got p = " + std::to_string(p) + "); use p = " +
                      std::to_string(p + 1) + ", or dualpipev, which takes any p");
  if (m % 2 != 0 || m < 2 * p)
    return make_error("dualpipe feeds half of a step's m microbatches from each end and needs at "
                      "least p of them on each, so m must be even and at least 2p (got m = " +
                      std::to_string(m) + ", p = " + std::to_string(p) + "); use m = " +
                      std::to_string(std::max(2 * p, m + m % 2)));
  schedule_params per_route = params;
  per_route.microbatches = m / 2;
  schedule s = schedules::start_schedule(schedule_kind::dualpipe, per_route);
  schedules::reserve_programs(s, 8 * static_cast<std::size_t>(m) * params.steps);
  const int half = p / 2;
  for (int r = 0; r < p; ++r) {
    const int h = std::min(r, p - 1 - r);
    const int down = r, up = 2 * p - 1 - r;  // route 0's stage on r, and route 1's
    const bool first_half = r < half;
    for (int t = 0; t < params.steps; ++t)
      dualpipev_rank(s.programs[r], first_half ? down : up, first_half ? up : down, t * (m / 2))
          .step(h, half, m / 2);
  }
  schedules::finish_flush_schedule(s);
  return s;
}

}  // namespace pipeworks
