// `pipeworks eval`: the mean cross-entropy of a gpt checkpoint over the first N
// non-overlapping windows of ctx+1 bytes of a text file, from offset 0.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/data/text.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_io.hpp"
#include "ops/train/evaluate.hpp"
#include "ops/train/sources.hpp"

namespace pipeworks::cli {
namespace {

struct eval_options {
  std::string model, checkpoint, text;
  std::int64_t windows = 0, batch = 16;
  int threads = 0;
  bool json = false;
};

int run_eval(const eval_options& o) {
  const model_spec spec = parse_model_flag(o.model);
  if (!spec.is_gpt())
    throw CLI::ValidationError("--model",
                               "eval measures text loss and needs a gpt model, not " + spec.name);
  set_cpu_threads(o.threads);
  model<float> net = build_model<float>(spec);
  // The weights and the file they are read from; the windows of one forward pass.
  check_memory(net, 2, std::min(o.batch, std::max<std::int64_t>(o.windows, 1)), 0, "--batch",
               "lower --batch");
  param_set weights = net.make_params();
  if (status s = load_params(o.checkpoint, weights); !s) throw pipeworks_error(s.message());
  if (const param_entry* bad = weights.first_non_finite())
    throw pipeworks_error(o.checkpoint + ": " + bad->name +
                          " holds NaN or infinite values, so no loss can be measured; these "
                          "weights come from a run that diverged");
  auto text = load_text(o.text);
  if (!text) throw pipeworks_error(text.message());
  const auto fit = static_cast<std::int64_t>(text->bytes.size()) / (spec.gpt().context + 1);
  if (o.windows > fit)
    throw CLI::ValidationError("--windows", o.text + " has room for " + std::to_string(fit) +
                                                " windows of " +
                                                std::to_string(spec.gpt().context + 1) +
                                                " bytes, not " + std::to_string(o.windows));
  auto windows = text_windows(text->view(), o.windows, spec.gpt().context, o.text);
  if (!windows) throw pipeworks_error(windows.message());
  auto loss = mean_loss(net, weights, *windows, o.batch);
  if (!loss) throw pipeworks_error(loss.message());
  if (o.json)
    std::cout << nlohmann::json{{"loss", *loss}, {"windows", o.windows}}.dump() << std::endl;
  else
    std::printf("loss %.6f (mean cross-entropy, nats) over %lld windows of %d bytes of %s\n", *loss,
                static_cast<long long>(o.windows), spec.gpt().context + 1, o.text.c_str());
  return exit_ok;
}

const bool registered = register_command(
    "eval", "Mean cross-entropy of a gpt checkpoint on a text file",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<eval_options>();
      sub.add_option("--model", o->model, "gpt-tiny, gpt-small, or a JSON model file")->required();
      sub.add_option("--checkpoint", o->checkpoint, "safetensors file written by train --save")
          ->required();
      sub.add_option("--text", o->text, "text file (or directory) to score")->required();
      sub.add_option("--windows", o->windows,
                     "the first N non-overlapping windows of ctx+1 bytes, from offset 0")
          ->required()
          ->check(positive_int);
      sub.add_option("--batch", o->batch, "windows per forward pass")
          ->check(positive_int)
          ->capture_default_str();
      add_threads_option(sub, o->threads);
      sub.add_flag("--json", o->json, "print {\"loss\": x, \"windows\": N}");
      return [o] { return run_eval(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
