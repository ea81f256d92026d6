// costs_from_timeline: mean measured compute times per virtual stage and action kind.
#include "runtime/exec/measured_costs.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace pipeworks {

namespace {

struct mean_time {
  double sum = 0;
  long long count = 0;
  void add(double d) {
    sum += d;
    ++count;
  }
  double value() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

struct stage_means {
  mean_time f, b, i, w, step;
  mean_time paired_f, paired_b, paired_i;  // of OVERLAP_F_B pairs: the pair's time, not their own
};

}  // namespace

cost_model costs_from_timeline(const timeline& measured, const schedule& plan) {
  const int stages = std::max(plan.virtual_stages, 0);
  std::vector<stage_means> means(static_cast<std::size_t>(stages));
  // An OVERLAP_F_B pair's F and B are recorded with the pair's one start and end: two compute
  // events of a rank with the same times. Their time is the pair's, so it stands for a kind only
  // where the stage has no event of that kind of its own.
  std::map<std::tuple<int, double, double>, int> at;
  for (const timeline_event& e : measured.events)
    if (e.stream == stream_kind::compute && is_compute(e.act.kind)) ++at[{e.rank, e.start, e.end}];
  for (const timeline_event& e : measured.events) {
    if (e.stream != stream_kind::compute || e.act.stage < 0 || e.act.stage >= stages) continue;
    stage_means& s = means[static_cast<std::size_t>(e.act.stage)];
    const double d = std::max(e.end - e.start, 0.0);
    if (is_compute(e.act.kind) && at[{e.rank, e.start, e.end}] > 1) {
      if (e.act.kind == action_kind::forward) s.paired_f.add(d);
      if (e.act.kind == action_kind::backward) s.paired_b.add(d);
      if (e.act.kind == action_kind::input_grad) s.paired_i.add(d);
      continue;
    }
    switch (e.act.kind) {
      case action_kind::forward:
        s.f.add(d);
        break;
      case action_kind::backward:
        s.b.add(d);
        break;
      case action_kind::input_grad:
        s.i.add(d);
        break;
      case action_kind::weight_grad:
        s.w.add(d);
        break;
      case action_kind::step:
        s.step.add(d);
        break;
      default:
        break;  // REDUCE and communication are free in the replay
    }
  }
  cost_model c;
  c.stages.clear();
  for (stage_means& s : means) {
    if (s.f.count == 0) s.f = s.paired_f;
    if (s.b.count == 0) s.b = s.paired_b;
    if (s.i.count == 0) s.i = s.paired_i;
    stage_cost sc;
    sc.forward = s.f.value();
    const bool split = s.i.count > 0 || s.w.count > 0;
    sc.backward = split ? s.i.value() + s.w.value() : s.b.value();
    sc.weight_grad = s.w.value();
    sc.step = s.step.value();
    sc.reduce = 0.0;
    c.stages.push_back(sc);
  }
  if (c.stages.empty()) c.stages.push_back(stage_cost{0, 0, 0, 0, 0});
  return c;
}

}  // namespace pipeworks
