// Benchmark: a heterogeneous cluster (examples/clusters/hetero-2fast-2slow.json) on this CPU:
// the automatic plan against an even split, simulated and measured with throttled ranks.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "partition/auto_partition.hpp"
#include "actors/pipeline.hpp"
#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/data/text.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/train/sources.hpp"
#include "base/cpu_count.hpp"
#include "partition/even_split.hpp"

using namespace pipeworks;

namespace {

struct bench_options {
  std::string model = "gpt-small", cluster = "examples/clusters/hetero-2fast-2slow.json";
  std::string data;  // empty: the model's default (fortunes for gpt, Fashion-MNIST for mlp)
  std::int64_t batch = 16;
  int microbatches = 8, steps = 8;
};

// One configuration: stages cut at boundaries, w replicas, m per replica, rank speeds.
struct config {
  std::string name;
  int p = 1, w = 1, m = 1;
  std::vector<int> boundaries;
  std::vector<double> rank_speed;     // per rank (replica · p + stage)
  std::vector<std::string> rank_names;
  double simulated_ms = 0, measured_ms = 0;
};

template <class X>
X must(result<X> r, const std::string& what) {
  if (!r) {
    std::fprintf(stderr, "bench_hetero: %s: %s\n", what.c_str(), r.message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

// The simulated step: the profile's costs over each stage's slowest replica's speed.
double simulate(const config& c, const model_profile& prof, std::int64_t microbatch) {
  const double scale = double(microbatch) / double(prof.microbatch);
  return must(simulate_step_ms(schedule_kind::one_f_one_b, c.p, c.m, c.w,
                               profile_costs(prof, c.boundaries,
                                             slowest_replica_speeds(c.rank_speed, c.p), scale)),
              c.name + ": simulate");
}

// The measured step: train_pipeline with throttled ranks; the mean step after the first two.
double measure(const config& c, const model<float>& net, const minibatch_fn& data,
               const bench_options& o) {
  run_plan po;
  po.schedule = schedule_kind::one_f_one_b;
  po.stages = c.p;
  po.replicas = c.w;
  po.train.microbatches = c.m;
  po.split.assign(c.boundaries.begin(), c.boundaries.end() - 1);
  for (double speed : c.rank_speed) po.ranks.push_back(rank_placement{"cpu", speed, "", 0});
  po.threads_per_stage = 1;
  po.train.steps = o.steps;
  po.train.warmup_steps = 1;
  po.train.optim = default_optimizer_config(optimizer_kind::adamw);
  po.train.min_lr = po.train.optim.lr;
  po.data.batch = o.batch;
  std::vector<double> at;  // elapsed_s after each step
  pipeline_callbacks cb;
  cb.on_step = [&](const step_metrics& m) { at.push_back(m.elapsed_s); };
  auto r = train_pipeline<float>(net, net.init_params(1), po, data, cb);
  must(std::move(r), c.name + ": train_pipeline");
  const std::size_t skip = at.size() > 3 ? 2 : 0;
  const double first = skip ? at[skip - 1] : 0.0;
  return 1000.0 * (at.back() - first) / double(at.size() - skip);
}

std::string shape(const config& c) {
  std::string split, devs;
  for (int s = 0; s < c.p; ++s) split += (s ? "," : "") + std::to_string(c.boundaries[s]);
  for (std::size_t r = 0; r < c.rank_names.size(); ++r) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %g", r ? ", " : "", c.rank_names[r].c_str(), c.rank_speed[r]);
    devs += buf;
  }
  return std::to_string(c.p) + " x " + std::to_string(c.w) + " | " + split + " | " + devs;
}

}  // namespace

int main(int argc, char** argv) {
  run_with_best_blas_kernels(argv);
  bench_options o;
  CLI::App app{"bench_hetero: auto plan against an even split on a throttled heterogeneous cluster"};
  app.add_option("--model", o.model, "mlp, gpt-tiny, gpt-small or a model JSON")->capture_default_str();
  app.add_option("--cluster", o.cluster, "a cluster.json with a devices list (speeds <= 1)")
      ->capture_default_str();
  app.add_option("--data", o.data,
                 "a text file or directory (gpt) or the Fashion-MNIST directory (mlp); default "
                 "the Debian package's location");
  app.add_option("--batch", o.batch, "samples per step")->capture_default_str();
  app.add_option("--microbatches", o.microbatches, "microbatches per step")->capture_default_str();
  app.add_option("--steps", o.steps, "measured steps per configuration")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the error
    return code == 0 ? 0 : 2;
  }
  // Flags CLI11 does not check: bad values exit 2, as pipeworks' usage errors do.
  auto usage = [](const std::string& why) {
    std::fprintf(stderr, "bench_hetero: %s\n", why.c_str());
    return 2;
  };
  if (o.batch < 1) return usage("--batch must be at least 1");
  if (o.microbatches < 1) return usage("--microbatches must be at least 1");
  if (o.batch % o.microbatches != 0)
    return usage("--batch " + std::to_string(o.batch) + " is not divisible by --microbatches " +
                 std::to_string(o.microbatches));
  if (o.steps < 1) return usage("--steps must be at least 1");

  set_cpu_threads(0);
  const model_spec spec = must(parse_model_spec(o.model), "--model");
  if (o.data.empty()) o.data = spec.is_gpt() ? fortunes_default_dir : fashion_mnist_default_dir;
  const model<float> net = build_model<float>(spec);
  const cluster cl = must(load_cluster(o.cluster), "--cluster");
  minibatch_fn data;
  text_corpus text;
  std::shared_ptr<const image_dataset> images;
  if (spec.is_gpt()) {
    text = must(load_text(o.data), "--data");
    data = text_minibatches(text.view(), o.batch, spec.gpt().context, 1);
  } else {
    images = std::make_shared<const image_dataset>(
        must(load_fashion_mnist(dataset_split::train, o.data), "--data"));
    data = image_minibatches(images, o.batch, 1);
  }
  const std::int64_t b = o.batch / o.microbatches;
  const minibatch sample = must(spec.is_gpt() ? text_minibatches(text.view(), b, spec.gpt().context, 7)(0)
                                              : image_minibatches(images, b, 7)(0),
                                "sample");
  const model_profile prof = must(profile_on_one_core(net, sample), "profile");

  auto_partition_request rq;
  rq.batch = o.batch;
  rq.microbatches = o.microbatches;
  rq.cores = usable_cores();
  const auto_partition ap = must(plan_auto_partition(prof, cl, rq), "plan");
  std::fputs(format_auto_partition(ap, prof, o.cluster).c_str(), stdout);

  config autoc{"auto", ap.p, ap.w, ap.m, ap.boundaries, ap.device_speed, ap.device_names};
  config even{"even", cl.device_count(), 1, o.microbatches,
              must(even_split(net.costs(), cl.device_count()), "even split"), {}, {}};
  for (int d = 0; d < cl.device_count(); ++d) {
    even.rank_speed.push_back(cl.speed(d));
    even.rank_names.push_back(device_label(cl, d));
  }
  for (config* c : {&autoc, &even}) {
    c->simulated_ms = simulate(*c, prof, b);
    c->measured_ms = measure(*c, net, data, o);
  }
  std::printf("\n%s, batch %lld in %d microbatches of %lld, 1f1b, %d steps measured per plan, on %s\n\n",
              spec.name.c_str(), static_cast<long long>(o.batch), o.microbatches,
              static_cast<long long>(b), o.steps, o.cluster.c_str());
  std::printf("| plan | p x w | split | devices (speed) | simulated step ms | measured step ms | measured / simulated |\n");
  std::printf("|---|---|---|---|---:|---:|---:|\n");
  for (const config* c : {&autoc, &even})
    std::printf("| %s | %s | %.1f | %.1f | %.2f |\n", c->name.c_str(), shape(*c).c_str(),
                c->simulated_ms, c->measured_ms, c->measured_ms / c->simulated_ms);
  std::printf("| even / auto | | | | %.2f | %.2f | |\n", even.simulated_ms / autoc.simulated_ms,
              even.measured_ms / autoc.measured_ms);
  return 0;
}
