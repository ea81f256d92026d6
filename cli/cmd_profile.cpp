// `pipeworks profile`: each layer (block) of a model timed alone on this CPU at one microbatch
// size, with its bytes, written as profile.json for `pipeworks plan` and the partition actor.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <vector>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/device/device_context.hpp"
#include "ops/model/model_spec.hpp"
#include "partition/profiler.hpp"

namespace pipeworks::cli {
namespace {

struct profile_options {
  std::string model, out, optimizer = "adamw", device = "cpu", recompute = "none";
  bool tf32 = false, bf16 = false;
  std::int64_t microbatch = 8;
  int repeats = 5, threads = 1;
};

// One microbatch of random inputs the model accepts (token ids or images) with targets.
minibatch random_sample(const model_spec& spec, std::int64_t b) {
  std::mt19937 rng(1);
  if (spec.is_gpt()) {
    const std::int64_t T = spec.gpt().context;
    minibatch mb{tensor({b, T}, dtype::i32), tensor({b, T}, dtype::i32)};
    for (std::int64_t i = 0; i < b * T; ++i) {
      mb.inputs.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % spec.gpt().vocab);
      mb.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % spec.gpt().vocab);
    }
    return mb;
  }
  const mlp_config& c = spec.mlp();
  minibatch mb{tensor({b, c.inputs}, dtype::f32), tensor({b}, dtype::i32)};
  std::normal_distribution<float> n(0.f, 1.f);
  for (std::int64_t i = 0; i < b * c.inputs; ++i) mb.inputs.data<float>()[i] = n(rng);
  for (std::int64_t i = 0; i < b; ++i)
    mb.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % c.classes);
  return mb;
}

int run_profile(const profile_options& o) {
  const model_spec spec = parse_model_flag(o.model);
  check_outputs({{o.out, "--out"}}, {{o.model, "--model"}});
  set_cpu_threads(o.threads);
  model<float> net = build_model<float>(spec);
  check_memory(net, 2, o.microbatch, 0, "--microbatch", "lower --microbatch");
  profiler_options po;
  po.repeats = o.repeats;
  po.optimizer = parse_optimizer_kind(o.optimizer).value();
  const device where = parse_device(o.device).value();  // the flag's check parsed it
  std::optional<device_context> gpu;
  if (where.kind == device_kind::cuda) {
    gpu.emplace(device_context::cuda(where.index, gpu_math_of(o.tf32, o.bf16)));
    po.device = &*gpu;
  } else if (o.tf32 || o.bf16) {  // as train says it: the CPU stays fp32
    std::fprintf(stderr, "pipeworks profile: note: %s concerns a GPU, and this profile is taken on "
                         "the CPU, in fp32\n", o.bf16 ? "--bf16" : "--tf32");
  }
  // all: none's figures, with selective's and full's as each layer's "modes" (the planners choose).
  std::vector<recompute_mode> modes;
  if (o.recompute == "all")
    modes = {recompute_mode::none, recompute_mode::selective, recompute_mode::full};
  else
    modes = {parse_recompute(o.recompute).value()};  // the flag's check parsed it
  const minibatch sample = random_sample(spec, o.microbatch);
  std::vector<model_profile> measured;
  for (recompute_mode mode : modes) {
    po.recompute = mode;
    auto one = profile_model(net, sample, po);
    if (!one) throw pipeworks_error(one.message());
    measured.push_back(std::move(*one));
  }
  auto prof = merge_modes(measured.front(), {measured.begin() + 1, measured.end()});
  if (!prof) throw pipeworks_error(prof.message());
  prof->model = spec.name;  // the name `--model` takes back (gpt-tiny, a JSON path, ...)
  if (status s = write_text_atomic(o.out, to_json(*prof) + "\n"); !s)
    throw pipeworks_error("--out: " + s.message());
  double fwd = 0, bwd = 0;
  for (const auto& l : prof->layers) {
    fwd += l.fwd_ms;
    bwd += l.bwd_ms;
  }
  const gpu_math math = gpu_math_of(o.tf32, o.bf16);
  const std::string on = gpu ? where.to_string() + (math != gpu_math::fp32 ? std::string(" (") + to_string(math) + ")" : "")
                            : std::to_string(cpu_threads()) + " thread(s)";
  std::int64_t saved = 0;
  for (const auto& l : prof->layers) saved += l.saved_bytes;
  std::printf("pipeworks profile: %s, %zu layers at microbatch %lld on %s, recompute %s: forward "
              "%.2f ms, backward %.2f ms, %lld bytes saved for the backward in all; written to %s\n",
              spec.name.c_str(), prof->layers.size(), static_cast<long long>(o.microbatch),
              on.c_str(), o.recompute.c_str(), fwd, bwd, static_cast<long long>(saved),
              o.out.c_str());
  return exit_ok;
}

const bool registered = register_command(
    "profile", "Time each layer of a model at one microbatch size (profile.json)",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<profile_options>();
      sub.add_option("--model", o->model, "mlp, gpt-tiny, gpt-small, or a JSON model file")->required();
      sub.add_option("--microbatch", o->microbatch, "samples per microbatch")
          ->check(positive_int)
          ->capture_default_str();
      sub.add_option("--out", o->out, "where to write profile.json")->required();
      sub.add_option("--repeats", o->repeats, "timed runs per layer (the median counts)")
          ->check(CLI::Validator(
              [](std::string& s) -> std::string {
                std::int64_t v = 0;
                const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
                if (ec != std::errc() || end != s.data() + s.size() || v < 1 ||
                    v > max_profile_repeats)
                  return "must be a whole number in 1.." + std::to_string(max_profile_repeats) +
                         ", got '" + s + "'";
                return {};
              },
              "1.." + std::to_string(max_profile_repeats)))
          ->capture_default_str();
      sub.add_option("--optimizer", o->optimizer, "sgd or adamw: sizes the optimizer state")
          ->check(CLI::IsMember({"sgd", "adamw"}))
          ->capture_default_str();
      sub.add_option("--device", o->device,
                     "where the layers run: cpu, cuda or cuda:N (a GPU profile gives the planners "
                     "GPU stage costs)")
          ->check([](const std::string& s) {
            auto d = parse_device(s);
            return d ? std::string() : d.message();
          })
          ->capture_default_str();
      sub.add_option("--recompute", o->recompute,
                     "measure as train --recompute runs: none, selective (saved_bytes without "
                     "what each block makes again; the backward's time includes making it) or "
                     "full (each block's whole stash, a stage's during one backward; the "
                     "backward's time includes the forward again). Plans made from the profile "
                     "run in its mode. all: measures the three in one run and writes none's "
                     "figures with selective's and full's beside them (each layer's \"modes\"), "
                     "so that the planners choose the mode")
          ->check(CLI::IsMember({"none", "selective", "full", "all"}))
          ->capture_default_str();
      sub.add_flag("--tf32", o->tf32, "on a GPU: matrix products may use TF32 tensor cores");
      sub.add_flag("--bf16", o->bf16,
                   "on a GPU: linear layers multiply in bf16 (fp32 accumulation), as train --bf16");
      sub.add_option("--threads", o->threads, "CPU threads (a device is one core by default)")
          ->check(positive_int & thread_count)
          ->capture_default_str();
      return [o] { return run_profile(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
