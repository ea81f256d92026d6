// checkpoint export: reads the checkpoint's plan for its model, gathers the latest weights from
// its rank files (verified first) and writes them with the model's names, atomically.
#include "cli/checkpoint_export.hpp"

#include <cstdio>
#include <filesystem>

#include "cli/command.hpp"
#include "cli/init_weights.hpp"
#include "cli/options.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_io.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks::cli {

CLI::App* add_export_subcommand(CLI::App& checkpoint, export_options& o) {
  CLI::App* e = checkpoint.add_subcommand(
      "export", "Write the whole model of a checkpoint (every stage's latest weights, Hugging Face "
                "names) to one safetensors file, as train --save does");
  e->add_option("dir", o.dir, "the checkpoint directory (holding step-NNNNNNNN/)")->required();
  e->add_option("--step", o.step, "the checkpoint of this step (default: the latest complete one)")
      ->check(nonnegative_int);
  e->add_option("--out", o.out, "the safetensors file to write (replaced atomically)")->required();
  return e;
}

int run_export(const export_options& o) {
  check_outputs({{o.out, "--out"}}, {}, {{o.dir, "checkpoint"}});
  std::optional<param_set> weights;
  model_spec spec;
  // A run pruning the directory meanwhile makes read_checkpoint read the newest one again.
  auto got = read_checkpoint(o.dir, o.step, [&](const chosen_checkpoint& c) -> status {
    weights.reset();
    auto plan = parse_run_plan(c.manifest.plan.dump(), c.dir + "/manifest.json (its plan)");
    if (!plan) return plan.err();
    spec = plan->model;
    const model<float> net = build_model<float>(spec);
    param_set whole = net.init_params(1);
    if (status s = gather_checkpoint_weights(c, whole); !s) return s;
    weights = std::move(whole);
    return {};
  });
  if (!got) throw pipeworks_error(got.message());
  if (!got->read) throw pipeworks_error(got->read.message());
  // The data the checkpoint's run read is an input too: the model is not written over it.
  if (const auto& d = got->checkpoint.manifest.data; d && !d->fingerprint.path.empty()) {
    std::error_code ec;
    if (std::filesystem::equivalent(o.out, d->fingerprint.path, ec))
      throw CLI::ValidationError("--out", o.out + " is the data the checkpoint's run trained on "
                                          "(its manifest's data.path): choose another path");
  }
  const std::int64_t step = got->checkpoint.step;
  const metadata_map meta{{"pipeworks.model", to_json(spec).dump()},
                          {"pipeworks.steps", std::to_string(step)},
                          {"pipeworks.exported_from", got->checkpoint.dir}};
  if (status s = save_params(o.out, *weights, meta); !s) throw pipeworks_error(s.message());
  std::printf("step %lld of %s: %zu tensors, %lld parameters written to %s\n",
              static_cast<long long>(step), o.dir.c_str(), weights->entries().size(),
              static_cast<long long>(weights->size()), o.out.c_str());
  return exit_ok;
}

}  // namespace pipeworks::cli
