// check_memory_limit: resolves the split as the run will (resolve_plan), lowers the schedule,
// measures each stage's bytes at the run's microbatch and replays the programs.
#include "cli/memory_limit.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "partition/plan_resolve.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "runtime/memory_plan.hpp"

namespace pipeworks::cli {
namespace {

// "97.7 MiB", "612.0 KiB", "1.5 GiB", "800 bytes".
std::string mib(std::int64_t bytes) {
  char s[48];
  const double x = static_cast<double>(bytes);
  if (x >= double(1 << 30)) std::snprintf(s, sizeof s, "%.1f GiB", x / double(1 << 30));
  else if (x >= double(1 << 20)) std::snprintf(s, sizeof s, "%.1f MiB", x / double(1 << 20));
  else if (x >= double(1 << 10)) std::snprintf(s, sizeof s, "%.1f KiB", x / double(1 << 10));
  else std::snprintf(s, sizeof s, "%lld bytes", static_cast<long long>(bytes));
  return s;
}

// Per device (rank of replica 0): its stages' predicted memory summed, and which stages.
// `host`: what of them offload keeps in host memory (a GPU rank's); total() is the rest, what
// the device holds and the limit is about.
struct rank_figure {
  std::int64_t weights = 0, gradients = 0, moments = 0, activations = 0, transient = 0, host = 0;
  std::string stages;
  std::int64_t total() const {
    return weights + gradients + moments + activations + transient - host;
  }
};

// Whether rank r (replica * p + device) is placed on a GPU.
bool on_gpu(const run_plan& plan, int r) {
  return static_cast<std::size_t>(r) < plan.ranks.size() &&
         plan.ranks[static_cast<std::size_t>(r)].device.on_gpu();
}

bool all_on_gpu(const run_plan& plan) {
  for (int r = 0; r < plan.rank_count(); ++r)
    if (!on_gpu(plan, r)) return false;
  return true;
}

// One microbatch of the plan's size.
minibatch plan_microbatch(const run_plan& plan) {
  const std::int64_t samples = plan.data.batch / (plan.train.microbatches * (plan.schedule ? plan.replicas : 1));
  return example_microbatch(plan.model, std::max<std::int64_t>(1, samples));
}

// Each virtual stage's prediction, and the device each is on, for a resolved pipeline plan.
std::pair<std::vector<stage_memory>, std::vector<int>> predict_resolved(const run_plan& plan,
                                                                        const model<float>& net) {
  auto lowered = lower_run(plan, net.size());
  if (!lowered) throw pipeworks_error(lowered.message());
  auto bytes = measure_stage_bytes(net, plan_microbatch(plan), lowered->boundaries, plan.recompute,
                                   plan.train.optim.kind, plan.zero > 0 ? plan.replicas : 1);
  if (!bytes) throw pipeworks_error(bytes.message());
  std::vector<stage_memory> stages =
      predict_memory(*lowered->programs, *bytes, plan.recompute, lowered->credit_window);
  const std::vector<int>& device_of = lowered->programs->device_of;
  for (stage_memory& s : stages)  // offload moves a GPU rank's bytes to the host
    if (on_gpu(plan, device_of[static_cast<std::size_t>(s.stage)]))
      offload_to_host(s, (*bytes)[static_cast<std::size_t>(s.stage)], plan.offload, plan.recompute);
  return {std::move(stages), device_of};
}

std::map<int, rank_figure> predict_ranks(run_plan plan, const model<float>& net, recompute_mode mode,
                                         int zero, offload_spec offload) {
  plan.recompute = mode;
  plan.zero = zero;
  plan.offload = offload;
  auto resolved = resolve_plan(std::move(plan), net, nullptr);  // the split the run will have
  if (!resolved) throw CLI::ValidationError("--memory-limit", resolved.message());
  plan = std::move(resolved->plan);
  std::map<int, rank_figure> out;
  if (!plan.schedule) {  // one device: the whole model, one microbatch's stash at a time
    auto bytes = measure_stage_bytes(net, plan_microbatch(plan), {0, net.size()},
                                     recompute_mode::none, plan.train.optim.kind);
    if (!bytes) throw pipeworks_error(bytes.message());
    const stage_bytes& b = bytes->front();
    stage_memory m;
    m.activations = b.whole_stash;  // one microbatch in flight at a time
    m.moments = b.moments;
    if (on_gpu(plan, 0)) offload_to_host(m, b, plan.offload, recompute_mode::none);
    out[0] = {b.weights, b.weights, b.moments, b.whole_stash, b.workspace, m.host, "0"};
    return out;
  }
  const auto [stages, device_of] = predict_resolved(plan, net);
  for (const stage_memory& s : stages) {
    rank_figure& r = out[device_of[static_cast<std::size_t>(s.stage)]];
    r.weights += s.weights;
    r.gradients += s.gradients;
    r.moments += s.moments;
    r.activations += s.activations;
    r.transient += s.workspace + s.messages;
    r.host += s.host;
    r.stages += (r.stages.empty() ? "" : ", ") + std::to_string(s.stage);
  }
  return out;
}

}  // namespace

result<std::int64_t> parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 1;
  if (unit == "K" || unit == "KiB") scale = 1 << 10;
  else if (unit == "M" || unit == "MiB") scale = 1 << 20;
  else if (unit == "G" || unit == "GiB") scale = double(1 << 30);
  else if (!unit.empty()) used = 0;
  const double bytes = x * scale;
  if (used == 0 || !std::isfinite(bytes) || bytes < 1 || bytes > 9.0e18)
    return make_error("'" + text + "' is not a byte count: give bytes or a number with K, M or G "
                      "(powers of 1024), e.g. 512M");
  return static_cast<std::int64_t>(bytes);
}

std::vector<stage_memory> predict_stages(const run_plan& plan) {
  if (!plan.schedule) return {};
  const model<float> net = build_model<float>(plan.model);
  return predict_resolved(plan, net).first;
}

void check_memory_limit(const run_plan& plan, const model<float>& net, std::int64_t limit) {
  if (plan.auto_partition) return;
  const auto figures = predict_ranks(plan, net, plan.recompute, plan.zero, plan.offload);
  for (const auto& [device, r] : figures) {
    if (r.total() <= limit) continue;
    std::string advice;
    auto would = [&](const std::string& flags, recompute_mode mode, int zero, offload_spec offload) {
      const rank_figure other = predict_ranks(plan, net, mode, zero, offload).at(device);
      advice += std::string(advice.empty() ? "" : "; ") + flags + " would make it " +
                mib(other.total()) + (other.total() <= limit ? " (fits)" : " (does not fit)");
    };
    const std::string at_recompute = " (with --recompute " + std::string(recompute_name(plan.recompute)) + ")";
    if (plan.schedule && plan.replicas > 1 && plan.zero == 0)
      would("--zero 1" + at_recompute, plan.recompute, 1, plan.offload);
    if (plan.schedule)
      for (recompute_mode mode : {recompute_mode::selective, recompute_mode::full}) {
        if (mode == plan.recompute) continue;
        would("--recompute " + std::string(recompute_name(mode)), mode, plan.zero, plan.offload);
        if (plan.replicas > 1 && plan.zero == 0)
          would("--recompute " + std::string(recompute_name(mode)) + " --zero 1", mode, 1,
                plan.offload);
      }
    // Offload only on GPU ranks (a CPU rank's memory is host memory already), every rank's: the
    // plan refuses it when any rank is on the CPU.
    if (all_on_gpu(plan)) {
      std::vector<offload_spec> named;  // each more than the plan offloads, once
      for (offload_spec o : {offload_spec{true, false}, offload_spec{false, true},
                             offload_spec{true, true}}) {
        const offload_spec more{o.optimizer || plan.offload.optimizer,
                                o.activations || plan.offload.activations};
        if (more == plan.offload || std::find(named.begin(), named.end(), more) != named.end() ||
            (more.activations && !plan.schedule))  // one microbatch at a time: no stash waits
          continue;
        named.push_back(more);
        would("--offload " + offload_name(more) + at_recompute, plan.recompute, plan.zero, more);
      }
    }
    if (advice.empty())
      advice = plan.schedule ? "more stages, a smaller --batch or more --microbatches would lower it"
                             : "a pipeline schedule with --stages, or a smaller --batch, would lower it";
    throw CLI::ValidationError(
        "--memory-limit",
        "rank " + std::to_string(device) + " (virtual stages " + r.stages + ") is predicted to hold " +
            mib(r.total()) + " at its peak, over the limit of " + mib(limit) + ": weights " +
            mib(r.weights) + ", gradients " + mib(r.gradients) + ", optimizer moments " +
            mib(r.moments) + ", stashed activations " + mib(r.activations) +
            ", messages and scratch " + mib(r.transient) +
            (r.host > 0 ? ", less " + mib(r.host) + " offloaded to host memory" : "") +
            " (--recompute " + std::string(recompute_name(plan.recompute)) + ", --zero " +
            std::to_string(plan.zero) +
            (plan.offload.any() ? ", --offload " + offload_name(plan.offload) : "") + "); " +
            advice);
  }
}

}  // namespace pipeworks::cli
