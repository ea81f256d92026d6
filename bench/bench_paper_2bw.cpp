// PipeDream-2BW's setting on paper (Narayanan et al., ICML 2021): GPT models on 64 simulated
// V100 16 GB in servers of 8; the plan plan_two_bw picks against the best GPipe, model
// parallelism without pipelining and pure data parallelism, as markdown tables.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "partition/baselines.hpp"
#include "partition/cluster.hpp"
#include "partition/gpt_profile.hpp"
#include "partition/two_bw_planner.hpp"

using namespace pipeworks;

namespace {

// GPT sizes for the paper's experiments. The counts 2.2B and 3.8B are the ones the issue names for
// the throughput experiments and ~30B the largest the paper reports training on 64 GPUs (by a
// summary of it; the paper's own tables were not at hand). The shapes (hidden, heads, layers) are
// this bench's choice to reach those counts; sequence 512 and GPT-2's vocabulary padded to
// 51,200 (as Megatron pads it) are assumptions too.
std::vector<gpt_config> paper_models() {
  return {
      {"GPT 2.2B", 18, 3072, 32, 512, 51200},
      {"GPT 3.8B", 32, 3072, 32, 512, 51200},
      {"GPT 30B", 148, 4096, 32, 512, 51200},
  };
}

// Profiles are taken at b = 4, so the planners try b in {1, 2, 4, 8, 16}.
constexpr std::int64_t profile_b = 4;

struct choice {
  bool recompute = false;
  std::optional<two_bw_plan> two_bw;
  std::optional<baseline_plan> base;
  std::string error;
  double throughput() const {
    if (two_bw) return two_bw->throughput_samples_per_s;
    if (base) return base->throughput_samples_per_s;
    return 0;
  }
};

// The better of planning with and without activation recomputation (the paper's planner decides
// whether to recompute; GPipe and the others get the same choice).
template <class F>
choice best_of(const model_profile& plain, const model_profile& re, F plan) {
  choice a = plan(plain), b = plan(re);
  b.recompute = true;
  if (a.throughput() == 0 && b.throughput() == 0) return a;  // both failed: the plain error
  return b.throughput() > a.throughput() ? b : a;
}

std::string gb(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// Layers per stage (the embedding and the head count as layers), run-length: "3×6 2×2".
std::string layers_per_stage(const std::vector<planned_stage>& stages) {
  std::string out;
  std::size_t i = 0;
  while (i < stages.size()) {
    const int n = stages[i].last_layer - stages[i].first_layer + 1;
    std::size_t j = i;
    while (j < stages.size() && stages[j].last_layer - stages[j].first_layer + 1 == n) ++j;
    if (!out.empty()) out += " ";
    out += std::to_string(n);
    if (j - i > 1) out += "×" + std::to_string(j - i);
    i = j;
  }
  return out;
}

void row(const std::string& model, const std::string& approach, const choice& c, double two_bw_tp) {
  if (c.throughput() == 0) {
    std::printf("| %s | %s | – | – | – | – | – | – | – | – | %s | – |\n", model.c_str(), approach.c_str(),
                c.error.c_str());
    return;
  }
  int p, w, m;
  std::int64_t b, mem = 0;
  const std::vector<planned_stage>* stages;
  if (c.two_bw) {
    const two_bw_plan& x = *c.two_bw;
    p = x.p, w = x.w, b = x.b, m = x.m, stages = &x.stages;
    for (std::int64_t v : x.memory_bytes) mem = std::max(mem, v);
  } else {
    const baseline_plan& x = *c.base;
    p = x.p, w = x.w, b = x.b, m = x.m, stages = &x.stages, mem = x.max_memory_bytes;
  }
  char ratio[32] = "–";
  if (!c.two_bw && two_bw_tp == 0) std::snprintf(ratio, sizeof ratio, "no plan");  // 2BW found none
  else if (!c.two_bw) std::snprintf(ratio, sizeof ratio, "%.2f×", two_bw_tp / c.throughput());
  std::string layers = layers_per_stage(*stages);
  if (c.two_bw) layers += " (" + std::to_string(c.two_bw->inter_server_links) + " links across servers)";
  std::printf("| %s | %s | %s | %d | %d | %lld | %d | %lld | %s | %s | %.1f | %s |\n", model.c_str(),
              approach.c_str(), c.recompute ? "yes" : "no", p, w, static_cast<long long>(b), m,
              static_cast<long long>(b * m * w), layers.c_str(), gb(mem).c_str(), c.throughput(), ratio);
}

// What one device would need for the whole model at b = 1 with recomputation (the least).
std::string whole_model(const model_profile& p, const cluster& cl) {
  std::int64_t need = 0;
  for (const layer_profile& l : p.layers) need += 2 * l.param_bytes + l.optimizer_bytes + l.saved_bytes / p.microbatch;
  return "needs " + gb(need) + " GiB per device at b=1, has " + gb(cl.memory(0));
}

choice plan_2bw(const model_profile& p, const cluster& cl) {
  choice c;
  auto r = plan_two_bw(p, cl);
  if (r) c.two_bw = *r; else c.error = r.message();
  return c;
}

template <class F>
auto baseline(F f, const cluster& cl) {
  return [f, &cl](const model_profile& p) {
    choice c;
    auto r = f(p, cl, baseline_options{});
    if (r) c.base = *r; else c.error = r.message();
    return c;
  };
}

// A configuration at a fixed global batch, with its analytic (steady-state) and simulated scores.
struct config {
  int p = 0, w = 0, m = 0;
  std::int64_t b = 0;
  bool re = false;
  double analytic = 0;   // samples/s
  double simulated = 0;  // samples/s
};

// The best 2BW and GPipe configurations at one global batch B = b·m·w, with and without
// recomputation, as the planners pick: the analytic model ranks, the simulator re-scores the top 8.
void fixed_batch_row(const std::string& model, const model_profile& plain, const model_profile& re,
                     const cluster& cl, int batch) {
  const int n = cl.device_count();
  const int L = static_cast<int>(plain.layers.size());
  std::vector<config> twos, gps;
  two_bw_options ao;
  ao.use_simulator = false;
  baseline_options bo;
  bo.use_simulator = false;
  for (int recompute = 0; recompute < 2; ++recompute) {
    const model_profile& prof = recompute ? re : plain;
    for (int p = 1; p <= std::min(L, n); ++p)
      for (int w = 1; p * w <= n; ++w)
        for (std::int64_t b : {1, 2, 4, 8, 16}) {
          if (batch % (b * w) != 0) continue;
          const int m = static_cast<int>(batch / (b * w));
          if (m >= p)
            if (auto r = evaluate_two_bw(prof, cl, p, w, b, m, ao))
              twos.push_back({p, w, m, b, recompute == 1, r->throughput_samples_per_s, 0});
          if (auto g = evaluate_gpipe(prof, cl, p, w, b, m, bo))
            gps.push_back({p, w, m, b, recompute == 1, g->throughput_samples_per_s, 0});
        }
  }
  auto best = [&](std::vector<config>& all, bool two_bw) {
    std::sort(all.begin(), all.end(), [](const config& a, const config& b) { return a.analytic > b.analytic; });
    config top;
    for (std::size_t i = 0; i < std::min<std::size_t>(all.size(), 8); ++i) {
      config& k = all[i];
      const model_profile& prof = k.re ? re : plain;
      if (two_bw) {
        auto r = evaluate_two_bw(prof, cl, k.p, k.w, k.b, k.m);
        k.simulated = r ? r->throughput_samples_per_s : 0;
      } else {
        auto g = evaluate_gpipe(prof, cl, k.p, k.w, k.b, k.m);
        k.simulated = g ? g->throughput_samples_per_s : 0;
      }
      if (k.simulated > top.simulated) top = k;
    }
    return top;
  };
  const config two = best(twos, true), gp = best(gps, false);
  // GPipe at 2BW's own configuration: without recomputation if it fits, else with it.
  config same;
  if (two.simulated > 0)
    for (int recompute = 0; recompute < 2 && same.simulated == 0; ++recompute)
      if (auto g = evaluate_gpipe(recompute ? re : plain, cl, two.p, two.w, two.b, two.m))
        same = {two.p, two.w, two.m, two.b, recompute == 1, 0, g->throughput_samples_per_s};
  auto show = [](const config& x) {
    char buf[96];
    if (x.simulated == 0) return std::string("does not fit");
    std::snprintf(buf, sizeof buf, "p=%d w=%d b=%lld m=%d%s: %.1f", x.p, x.w, static_cast<long long>(x.b), x.m,
                  x.re ? " (recompute)" : "", x.simulated);
    return std::string(buf);
  };
  auto ratio = [](double a, double b) {
    char buf[32] = "–";
    if (a > 0 && b > 0) std::snprintf(buf, sizeof buf, "%.2f×", a / b);
    return std::string(buf);
  };
  char steady[48] = "";
  if (two.simulated > 0) std::snprintf(steady, sizeof steady, " (steady %.1f)", two.analytic);
  std::printf("| %s | %d | %s%s | %s | %s | %s | %s |\n", model.c_str(), batch, show(two).c_str(), steady,
              show(gp).c_str(), ratio(two.simulated, gp.simulated).c_str(), show(same).c_str(),
              ratio(two.simulated, same.simulated).c_str());
}

// The most transformer layers of `shape` (hidden, heads, seq, vocab) whose plan fits on `cl`,
// with or without recomputation, by bisection between lo (fits, else the answer is "below lo")
// and hi (cannot: over the cluster's memory at 16 bytes per parameter); 0 when lo does not fit. Analytic only: fitting is the
// memory estimate's call, not the simulator's.
template <class Fits>
int largest(const gpt_config& shape, double flops, int lo, int hi, Fits fits) {
  auto ok = [&](int layers) {
    gpt_config c = shape;
    c.layers = layers;
    gpt_profile_options o;
    o.microbatch = profile_b;
    o.flops_per_s = flops;
    for (bool re : {true, false}) {  // recomputation first: it is the one that fits big models
      o.recompute = re;
      auto p = gpt_profile(c, o);
      if (p && fits(*p)) return true;
    }
    return false;
  };
  if (!ok(lo)) return 0;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PipeDream-2BW's setting on paper: GPT on 64 simulated V100s, 2BW against baselines"};
  double tflops = 39.0;
  double inter_gbps = 25.0;
  bool fixed = true;
  app.add_option("--tflops", tflops, "sustained fp16 TFLOP/s per V100")->capture_default_str();
  app.add_option("--inter-gbps", inter_gbps, "Gb/s between servers (the v100x8 preset has 100)")
      ->capture_default_str();
  bool max_size = false;
  app.add_flag("!--no-fixed", fixed, "skip the fixed-global-batch table");
  app.add_flag("--max-size", max_size, "also bisect the largest GPT each approach fits (about 15 s)");
  CLI11_PARSE(app, argc, argv);

  auto preset = load_cluster("v100x8");
  if (!preset) {
    std::fprintf(stderr, "%s\n", preset.message().c_str());
    return 1;
  }
  cluster cl = *preset;
  cl.levels[1].bandwidth_bytes_per_s = inter_gbps * 1e9 / 8;

  std::printf("## PipeDream-2BW's setting: GPT on %d V100 16 GB (%d servers of %d)\n\n", cl.device_count(),
              cl.levels[1].count, cl.levels[0].count);
  std::printf("NVLink %.0f GB/s inside a server, %.0f Gb/s between servers (the v100x8 preset has %.0f; "
              "p3.16xlarge has 25); %.0f TFLOP/s sustained per device; Adam in mixed precision (2BW: "
              "18 B/parameter, GPipe and DP: 16); sequence 512, vocabulary 51,200. Best of with and "
              "without activation recomputation for every approach.\n\n",
              cl.levels[0].bandwidth_bytes_per_s / 1e9, inter_gbps, preset->levels[1].bandwidth_bytes_per_s * 8 / 1e9,
              tflops);
  std::printf("| model | approach | recompute | p | w | b | m | batch | layers per stage | memory/device (GiB) "
              "| samples/s | 2BW / this |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");

  struct profiles {
    gpt_config c;
    model_profile plain, re;
  };
  std::vector<profiles> ps;
  for (const gpt_config& c : paper_models()) {
    gpt_profile_options o;
    o.microbatch = profile_b;
    o.flops_per_s = tflops * 1e12;
    auto plain = gpt_profile(c, o);
    o.recompute = true;
    auto re = gpt_profile(c, o);
    if (!plain || !re) {
      std::fprintf(stderr, "%s\n", (plain ? re : plain).message().c_str());
      return 1;
    }
    ps.push_back({c, *plain, *re});
  }

  for (const profiles& x : ps) {
    char name[64];
    std::snprintf(name, sizeof name, "%s (%.2fB)", x.c.name.c_str(), gpt_parameters(x.c) / 1e9);
    const choice two = best_of(x.plain, x.re, [&](const model_profile& p) { return plan_2bw(p, cl); });
    const double tp = two.throughput();
    row(name, "2BW", two, tp);
    if (two.two_bw) {
      // The same plan in steady state: no fill or drain (2BW never flushes), m·bottleneck + all-reduce.
      const two_bw_plan& x = *two.two_bw;
      const double steady = static_cast<double>(x.b) * x.m * x.w / x.analytic_step_ms * 1000.0;
      std::printf("| %s | 2BW steady state (analytic) | %s | %d | %d | %lld | %d | %lld | same | same | %.1f | "
                  "%.2f× |\n", name, two.recompute ? "yes" : "no", x.p, x.w, static_cast<long long>(x.b), x.m,
                  static_cast<long long>(x.b * x.m * x.w), steady, tp / steady);
    }
    row(name, "GPipe", best_of(x.plain, x.re, baseline(plan_gpipe, cl)), tp);
    row(name, "inter-layer MP, no pipelining (m=1)", best_of(x.plain, x.re, baseline(plan_model_parallel, cl)), tp);
    choice dp = best_of(x.plain, x.re, baseline(plan_data_parallel, cl));
    if (dp.throughput() == 0) dp.error = "does not fit: " + whole_model(x.re, cl);
    row(name, "data parallel", dp, tp);
    std::fflush(stdout);
  }

  if (fixed) {
    std::printf("\n### At a fixed global batch (samples per optimizer step)\n\n");
    std::printf("| model | batch | 2BW: config: samples/s | best GPipe: config: samples/s | 2BW / GPipe "
                "| GPipe at 2BW's config | 2BW / that |\n");
    std::printf("|---|---:|---|---|---:|---|---:|\n");
    for (const profiles& x : ps) {
      if (x.c.layers > 40) continue;  // the 30B model is about fitting, not batch sizes
      for (int batch : {64, 256, 512}) fixed_batch_row(x.c.name, x.plain, x.re, cl, batch);
      std::fflush(stdout);
    }
  }
  // The largest GPT of the 30B row's shape each approach fits (the paper's max-model-size question).
  if (max_size) {
    gpt_config shape = paper_models().back();
    const double per_layer = 12.0 * shape.hidden * shape.hidden;
    const double total = static_cast<double>(cl.memory(0)) * cl.device_count();
    const int hi = static_cast<int>(total / 16.0 / per_layer) + 1;  // 16 B/parameter fills every device
    const int lo = shape.layers;                                      // the 30B row: it fits
    two_bw_options ao;
    ao.use_simulator = false;
    baseline_options bo;
    bo.use_simulator = false;
    std::printf("\n### The largest GPT (hidden %lld, %d heads, sequence %lld) that fits on the %d devices\n\n",
                static_cast<long long>(shape.hidden), shape.heads, static_cast<long long>(shape.seq),
                cl.device_count());
    std::printf("| approach | layers | parameters |\n|---|---:|---:|\n");
    // `from`: the layers the search started at (0 found: not even that many fit).
    auto show = [&](const char* name, int layers, int from) {
      gpt_config c = shape;
      c.layers = layers;
      if (layers == 0 && from <= 1) std::printf("| %s | none (1 layer does not fit) | – |\n", name);
      else if (layers == 0) std::printf("| %s | fewer than %d | – |\n", name, from);
      else std::printf("| %s | %d | %.1fB |\n", name, layers, gpt_parameters(c) / 1e9);
      std::fflush(stdout);
    };
    show("2BW", largest(shape, tflops * 1e12, lo, hi, [&](const model_profile& p) {
      return static_cast<bool>(plan_two_bw(p, cl, ao)); }), lo);
    show("GPipe", largest(shape, tflops * 1e12, lo, hi, [&](const model_profile& p) {
      return static_cast<bool>(plan_gpipe(p, cl, bo)); }), lo);
    show("data parallel", largest(shape, tflops * 1e12, 1, hi, [&](const model_profile& p) {
      return static_cast<bool>(plan_data_parallel(p, cl, bo)); }), 1);
  }
  return 0;
}
