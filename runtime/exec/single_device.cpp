// train_single: the trainer's loop with checkpoints, resume and the run's callbacks.
#include "runtime/exec/single_device.hpp"

#include <chrono>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_file.hpp"
#include "runtime/checkpoint/rank_identity.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

template <class T>
result<pipeline_result> train_single(const model<T>& net, const param_set& initial,
                                     const run_plan& plan, const data_factory& make_data,
                                     const pipeline_callbacks& cb,
                                     const std::optional<resume_point>& resume) {
  const auto t0 = clock_type::now();
  if (cb.on_plan)
    if (status s = cb.on_plan(plan, ""); !s) return make_error(s.message());
  auto data = make_data(plan);
  if (!data) return make_error("the data: " + data.message());
  // The one rank's device: the plan's (cpu, or cuda:N for --device).
  const device where = plan.ranks.empty() ? device::cpu() : plan.ranks.at(0).device.where;
  const device_context dev = device_context::open(where, gpu_math_of(plan.tf32, plan.bf16), 0);
  trainer<T> t(net, initial.clone(), plan.train, dev);
  if (plan.offload.optimizer) t.offload_moments();  // a GPU's moments in page-locked host memory
  std::int64_t samples = 0;
  const std::vector<int> whole{0, net.size()};
  if (resume) {
    auto state = load_rank_checkpoint(step_dir(plan.checkpoint.dir, resume->manifest.step),
                                      file_of_rank(resume->manifest, 0), net, whole,
                                      rank_identity(plan, 0), resume->manifest.step);
    if (!state) return state.err();
    stage_state& st = state->stages.at(0);
    std::vector<optimizer_state<T>> opt(st.updates.size());
    for (std::size_t e = 0; e < opt.size(); ++e) {
      auto copy = [](const tensor& x) {
        if (x.empty()) return std::vector<T>{};
        auto s = x.span<T>();
        return std::vector<T>(s.begin(), s.end());
      };
      opt[e].m = copy(st.moment1.at(e));
      opt[e].v = copy(st.moment2.at(e));
      opt[e].step = st.updates[e];
    }
    t.restore(st.versions.at(st.latest), std::move(opt), resume->manifest.step);
    samples = resume->samples;
  }
  pipeline_result res;
  res.plan = plan;
  res.boundaries = whole;
  while (t.steps_done() < plan.train.steps) {
    if (cb.stop_requested && cb.stop_requested()) {
      res.interrupted = true;
      break;
    }
    auto mb = (*data)(t.steps_done());
    if (!mb) return make_error("the data for step " + std::to_string(t.steps_done() + 1) + ": " +
                               mb.message());
    auto r = t.step(*mb);
    if (!r) return r.err();
    samples += mb->inputs.dim(0);
    res.last = *r;
    res.last.samples = samples;
    res.last.elapsed_s = since(t0);
    if (cb.on_step) cb.on_step(res.last);
    const std::int64_t n = t.steps_done();
    const bool publish = plan.weights_every > 0 && (n % plan.weights_every == 0 || n == plan.train.steps);
    if (publish && cb.on_weights)
      cb.on_weights(std::make_shared<const model_weights>(model_weights{on_host(t.weights())}));
    if (plan.checkpoint.every > 0 && n % plan.checkpoint.every == 0 && n < plan.train.steps) {
      rank_state s;
      s.step = n;
      stage_state st;
      st.latest = static_cast<int>(n);
      st.versions[st.latest] = on_host(t.weights());
      for (const optimizer_state<T>& o : t.optimizer_state_now()) {
        auto make = [](const std::vector<T>& v) {
          if (v.empty()) return tensor{};
          tensor x({static_cast<std::int64_t>(v.size())}, dtype_of<T>());
          std::copy(v.begin(), v.end(), x.data<T>());
          return x;
        };
        st.moment1.push_back(make(o.m));
        st.moment2.push_back(make(o.v));
        st.updates.push_back(o.step);
      }
      s.stages.push_back(std::move(st));
      const std::string dir = step_dir(plan.checkpoint.dir, n);
      if (status p = prepare_step_dir(plan.checkpoint.dir, n); !p) return make_error(p.message());
      const std::string file = rank_file_name(0);
      auto written = write_rank_file(dir + "/" + file, s, rank_identity(plan, 0));
      if (!written) return make_error("writing the checkpoint of step " + std::to_string(n) + ": " + written.message());
      if (status w = write_manifest(plan.checkpoint.dir,
                                    manifest_of(plan, n, samples, since(t0),
                                                {checkpoint_file{0, file, written->bytes, written->sha256, {}, {}}}));
          !w)
        return make_error(w.message());
      if (status pr = prune_checkpoints(plan.checkpoint.dir, plan.checkpoint.keep); !pr)
        return make_error(pr.message());
      if (cb.on_checkpoint) cb.on_checkpoint(n, dir);
    }
  }
  res.weights = {on_host(t.weights())};
  res.weight_steps = {static_cast<int>(t.steps_done())};
  res.steps_done = t.steps_done();
  stage_stats st;
  st.peak_versions = 1;
  st.steps = static_cast<int>(t.steps_done());
  st.device_peak_bytes = static_cast<std::int64_t>(dev.memory_stats().peak_in_use);
  res.stages = {st};
  res.wall_s = since(t0);
  return res;
}

template result<pipeline_result> train_single<float>(const model<float>&, const param_set&,
                                                     const run_plan&, const data_factory&,
                                                     const pipeline_callbacks&,
                                                     const std::optional<resume_point>&);
template result<pipeline_result> train_single<double>(const model<double>&, const param_set&,
                                                      const run_plan&, const data_factory&,
                                                      const pipeline_callbacks&,
                                                      const std::optional<resume_point>&);

}  // namespace pipeworks
