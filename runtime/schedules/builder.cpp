// Helpers every schedule generator shares; see builder.hpp.
#include "runtime/schedules/builder.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "runtime/version_rule.hpp"

namespace pipeworks::schedules {

status check_params(std::string_view name, const schedule_params& params, bool allows_chunks) {
  const std::string n(name);
  if (params.stages < 1)
    return make_error(n + ": the stage count p must be at least 1 (got " +
                      std::to_string(params.stages) + ")");
  if (params.microbatches < 1)
    return make_error(n + ": the microbatch count m must be at least 1 (got " +
                      std::to_string(params.microbatches) + ")");
  if (params.chunks < 1)
    return make_error(n + ": the chunk count v must be at least 1 (got " +
                      std::to_string(params.chunks) + ")");
  if (!allows_chunks && params.chunks != 1)
    return make_error(n + " runs one chunk per device, so v must be 1 (got " +
                      std::to_string(params.chunks) +
                      "); use interleaved or bfs for several chunks per device");
  if (params.replicas < 1)
    return make_error(n + ": the replica count w must be at least 1 (got " +
                      std::to_string(params.replicas) + ")");
  if (params.steps < 1)
    return make_error(n + ": the step count must be at least 1 (got " +
                      std::to_string(params.steps) + ")");
  // An action names its virtual stage in 24 bits (runtime/action.hpp).
  if (static_cast<long long>(params.stages) * params.chunks > max_action_stage + 1LL)
    return make_error(n + ": p * v = " +
                      std::to_string(static_cast<long long>(params.stages) * params.chunks) +
                      " virtual stages, more than the " + std::to_string(max_action_stage + 1) +
                      " an action can name; use fewer stages or chunks");
  // Microbatch ids are ints, and every rank holds about 2 * v * m * steps actions.
  const long long ids = static_cast<long long>(params.microbatches) * params.steps;
  const long long actions = 2LL * ids * params.chunks * params.stages * params.replicas;
  if (ids > INT_MAX / 2 || actions > (1LL << 34))
    return make_error(n + ": p * v * w * m * steps is too large to hold as programs (" +
                      std::to_string(actions) + " actions); use fewer microbatches or steps");
  return status::success();
}

status check_v_params(std::string_view name, const schedule_params& params) {
  if (auto ok = check_params(name, params, true); !ok) return ok;
  if (params.chunks != 2)
    return make_error(std::string(name) +
                      " places two virtual stages on each device (d and 2p-1-d, a V), so the "
                      "chunk count v must be 2 (got " + std::to_string(params.chunks) + ")");
  return status::success();
}

schedule start_schedule(schedule_kind kind, const schedule_params& params) {
  schedule s;
  s.kind = kind;
  s.params = params;
  s.virtual_stages = params.stages * params.chunks;
  s.routes = default_routes(kind);
  s.device_of.resize(s.virtual_stages);
  const int p = params.stages;
  const bool v_placement = is_v_shape(kind) || kind == schedule_kind::dualpipe;
  for (int v = 0; v < s.virtual_stages; ++v)
    s.device_of[v] = v_placement ? (v < p ? v : 2 * p - 1 - v) : v % p;
  s.programs.assign(static_cast<std::size_t>(params.stages) * params.replicas, program{});
  return s;
}

void add_one_f_one_b(program& p, int stage, int stages, int first, int count) {
  const int warmup = std::min(stages - stage - 1, count);
  for (int k = 0; k < warmup; ++k) add(p, stage, action_kind::forward, first + k);
  // Steady state: F(k + warmup) then B(k), so that warmup + 1 microbatches are in flight.
  for (int k = 0; k + warmup < count; ++k) {
    add(p, stage, action_kind::forward, first + k + warmup);
    add(p, stage, action_kind::backward, first + k);
  }
  for (int k = count - warmup; k < count; ++k) add(p, stage, action_kind::backward, first + k);
}

void reserve_programs(schedule& s, std::size_t compute) {
  const std::size_t per_update = s.reduce_group_size() > 1 ? 2 : 1;
  const std::size_t updates =
      per_update * static_cast<std::size_t>(s.params.steps) * s.params.chunks;
  for (int d = 0; d < s.params.stages; ++d) s.programs[d].reserve(3 * compute + updates);
}

void add_updates(schedule& s) {
  const int m = s.params.microbatches;
  const int steps = s.params.steps;
  const bool reduce = s.reduce_group_size() > 1;
  std::vector<std::size_t> after;  // positions that close a step of their stage, in order
  for (int d = 0; d < s.params.stages; ++d) {
    program& prog = s.programs[d];
    // done[s * steps + t]: backwards of step t that stage s has finished so far (a microbatch's
    // backward ends with its B, or with its W when it is split into I and W).
    std::vector<int> done(static_cast<std::size_t>(s.virtual_stages) * steps, 0);
    after.clear();
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const action& a = prog[i];
      if (a.kind != action_kind::backward && a.kind != action_kind::weight_grad) continue;
      const int t = a.microbatch / m;
      if (++done[static_cast<std::size_t>(a.stage) * steps + t] == m) after.push_back(i);
    }
    // Grow once, then move each tail back past the updates inserted before it, last first.
    const std::size_t per = reduce ? 2 : 1;
    std::size_t end = prog.size();
    prog.resize(end + per * after.size());
    std::size_t dst = prog.size();
    for (std::size_t k = after.size(); k-- > 0;) {
      const std::size_t pos = after[k];
      const int stage = prog[pos].stage;
      dst -= end - (pos + 1);
      std::move_backward(prog.begin() + static_cast<std::ptrdiff_t>(pos + 1),
                         prog.begin() + static_cast<std::ptrdiff_t>(end),
                         prog.begin() + static_cast<std::ptrdiff_t>(dst + end - (pos + 1)));
      prog[--dst] = action{stage, action_kind::step, -1};
      if (reduce) prog[--dst] = action{stage, action_kind::reduce, -1};
      end = pos + 1;
    }
  }
}

void replicate(schedule& s) {
  const int p = s.params.stages;
  for (int q = 1; q < s.params.replicas; ++q)
    for (int d = 0; d < p; ++d) {
      program& copy = s.programs[s.rank_of(q, d)];
      copy.reserve(s.programs[d].capacity());
      copy.assign(s.programs[d].begin(), s.programs[d].end());
    }
}

void finish_flush_schedule(schedule& s) {
  add_updates(s);
  replicate(s);
  s.versions = flush_versions(s.virtual_stages, s.params.microbatches, s.params.steps);
  s.version_rule = "synchronous: every microbatch of step t uses version t on every stage";
}

}  // namespace pipeworks::schedules
