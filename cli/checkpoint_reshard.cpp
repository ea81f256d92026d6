// checkpoint reshard: reads every rank file of the checkpoint with its own layout, re-cuts the
// weights and moments by layer (runtime/exec/reshard.hpp) for the new plan (its ZeRO stage
// included), and writes the new ranks' files and then the manifest (the same step, data and RNG;
// the new plan). An asynchronous schedule's checkpoint is first restarted at each stage's newest
// weights under --restart-pipeline (runtime/exec/restart_async.hpp), and the manifest says so.
#include "cli/checkpoint_reshard.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/split_flag.hpp"
#include "ops/model/model_spec.hpp"
#include "partition/plan_resolve.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_file.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"
#include "runtime/exec/reshard.hpp"
#include "runtime/exec/restart_async.hpp"

namespace pipeworks::cli {
namespace {

bool flush_or_none(const run_plan& p) { return !p.schedule || is_flush(*p.schedule); }

// The checkpoint's plan with the layout options given applied, resolved and checked.
run_plan new_layout(const reshard_options& o, const run_plan& from, const model<float>& net) {
  run_plan to = from;
  if (!o.schedule.empty()) {
    to.programs.clear();  // a built-in kind instead of a schedule file's programs
    to.programs_versions = version_mode::sync;
    if (o.schedule == "none") {
      to.schedule.reset();
    } else {
      auto k = parse_schedule_kind(o.schedule);
      if (!k) throw CLI::ValidationError("--schedule", k.message());
      to.schedule = *k;
    }
  }
  if (!flush_or_none(to) && o.restart_pipeline && !flush_or_none(from))
    throw CLI::ValidationError(
        "--schedule", (o.schedule.empty() ? "the checkpoint's schedule, " : "") +
                          std::string(schedule_name(*to.schedule)) +
                          ", is asynchronous: --restart-pipeline restarts the pipeline at a step "
                          "boundary, where an asynchronous schedule's stages would already hold "
                          "microbatches of the next step; give --schedule with a flush schedule (" +
                          schedule_names(true) + ") or none");
  if (!flush_or_none(to))
    throw CLI::ValidationError("--schedule", std::string(schedule_name(*to.schedule)) +
                                                 " is asynchronous: its stages hold several weight "
                                                 "versions and microbatches across steps, which a "
                                                 "checkpoint at a step boundary does not have; pick "
                                                 "a flush schedule (" + schedule_names(true) +
                                                 ") or none");
  if (!to.schedule) to.stages = to.chunks = to.replicas = 1;
  if (o.stages > 0) to.stages = o.stages;
  if (o.chunks > 0)
    to.chunks = o.chunks;
  else if (!o.schedule.empty() && to.schedule)  // a V's (or dualpipe's) two per device, else the kind's own
    to.chunks = default_chunks(*to.schedule) == 2                      ? 2
                : from.schedule && default_chunks(*from.schedule) == 2 ? 1
                                                                       : to.chunks;
  if (o.replicas > 0) to.replicas = o.replicas;
  if (o.microbatches > 0) to.train.microbatches = o.microbatches;
  // The re-cut layout is a flush one, whose replicas reduce collectively (p2p is cyclic's).
  if (!to.schedule || *to.schedule != schedule_kind::cyclic || to.replicas < 2)
    to.reduce = reduce_mode::collective;
  const bool one_replica = !to.schedule || to.replicas < 2;
  if (o.zero > 0 && one_replica)
    throw CLI::ValidationError("--zero", "shards the optimizer state over a stage's replicas, and "
                                         "the new layout has one replica: give --replicas 2 or "
                                         "more, or --zero 0");
  if (o.zero >= 0) to.zero = o.zero;
  else if (one_replica) to.zero = 0;  // nothing to shard: every moment on the one replica
  to.ranks.clear();  // every rank on a CPU core; a resume may place them (--device, --workers)
  to.processes = process_spec{};
  to.auto_partition.reset();
  to.split.clear();
  if (to.schedule) {
    if (!o.split.empty()) {
      auto b = parse_split(o.split, net.size(), to.model_stages());
      if (!b) throw CLI::ValidationError("--split", b.message());
      to.split.assign(b->begin(), b->end() - 1);
    }
  } else if (!o.split.empty()) {
    throw CLI::ValidationError("--split", "--schedule none runs the whole model as one stage: "
                                          "drop --split");
  }
  to.checkpoint.dir = o.out;
  to.checkpoint.run.clear();
  // Named by reshard's own flags where it has one (the checkpoint's fields otherwise).
  if (auto issue = first_issue(to, net.size()))
    throw CLI::ValidationError(render(*issue, [](std::string_view field) {
      for (const auto& [f, flag] : {std::pair{"schedule.kind", "--schedule"},
                                    {"schedule.stages", "--stages"},
                                    {"schedule.chunks", "--chunks"},
                                    {"schedule.replicas", "--replicas"},
                                    {"schedule.microbatches", "--microbatches"},
                                    {"split", "--split"},
                                    {"runtime.zero", "--zero"}})
        if (field == f) return std::string(flag);
      return std::string(field);
    }));
  auto resolved = resolve_plan(std::move(to), net, nullptr);  // an even split unless given
  if (!resolved) throw CLI::ValidationError("--stages", resolved.message());
  return std::move(resolved->plan);
}

}  // namespace

CLI::App* add_reshard_subcommand(CLI::App& checkpoint, reshard_options& o) {
  CLI::App* r = checkpoint.add_subcommand(
      "reshard", "Re-cut a checkpoint taken at a step boundary (a flush schedule's or none's) for "
                 "another number of stages, chunks or replicas, split, schedule or ZeRO stage, into "
                 "a new checkpoint directory that train --resume continues bit for bit");
  r->add_option("dir", o.dir, "the checkpoint directory (holding step-NNNNNNNN/)")->required();
  r->add_option("--step", o.step, "the checkpoint of this step (default: the latest complete one)")
      ->check(nonnegative_int);
  r->add_option("--out", o.out, "the new checkpoint directory (it must hold no checkpoint)")
      ->required();
  r->add_option("--schedule", o.schedule, "the new schedule: a flush one or none (default: the "
                                          "checkpoint's)");
  r->add_option("--stages", o.stages, "devices p (default: the checkpoint's)")->check(positive_int);
  r->add_option("--chunks", o.chunks, "virtual stages per device v")->check(positive_int);
  r->add_option("--replicas", o.replicas, "data-parallel replicas w")->check(positive_int);
  r->add_option("--microbatches", o.microbatches, "microbatches m per replica and step")
      ->check(positive_int);
  r->add_option("--split", o.split, "first block of each virtual stage (default: even FLOPs)");
  r->add_option("--zero", o.zero,
                "ZeRO stage of the new layout: 0, every replica keeps every optimizer moment; 1 or "
                "2, each replica keeps only the moments of the tensors it owns (needs 2 or more "
                "replicas). Default: the checkpoint's, or 0 when the new layout has one replica")
      ->check(CLI::Range(0, 2));
  r->add_flag("--restart-pipeline", o.restart_pipeline,
              "re-cut an asynchronous schedule's checkpoint (pipedream, pipedream-vs, 2bw, cyclic) "
              "by restarting its pipeline at the checkpoint's step N: each stage's newest weights "
              "(version N, made by its STEP N), optimizer moments and update counts are kept; the "
              "microbatches in flight, older weight versions, messages, partial gradients and "
              "untallied losses are dropped (listed in the new manifest's \"restart\"), and the "
              "data goes on at step N+1, whose microbatches run again from their data. Give "
              "--schedule with a flush schedule (or none). This is NOT the run that was "
              "interrupted: step N+1 and on compute their gradients synchronously on the newest "
              "weights, where PipeDream used each stage's version at its forward and 2BW the one "
              "before. A flush schedule's checkpoint is re-cut exactly, as without the flag");
  return r;
}

int run_reshard(const reshard_options& o) {
  namespace fs = std::filesystem;
  const fs::path in = fs::weakly_canonical(fs::absolute(o.dir)), out = fs::weakly_canonical(fs::absolute(o.out));
  const auto [end, at] = std::mismatch(in.begin(), in.end(), out.begin(), out.end());
  if (end == in.end())
    throw CLI::ValidationError("--out", o.out + " is " + (at == out.end() ? "" : "inside ") + o.dir +
                                            ", the checkpoint directory read: choose a directory "
                                            "outside it");
  std::optional<run_plan> from_plan, to_plan;
  std::optional<checkpoint_manifest> manifest;
  std::vector<rank_state> to_states;
  std::string async_refused;  // the checkpoint is asynchronous and --restart-pipeline was not given
  nlohmann::json restart;     // what --restart-pipeline dropped, for the manifest
  auto got = read_checkpoint(o.dir, o.step, [&](const chosen_checkpoint& c) -> status {
    auto plan = parse_run_plan(c.manifest.plan.dump(), c.dir + "/manifest.json (its plan)");
    if (!plan) return plan.err();
    const bool async = !flush_or_none(*plan);
    if (async && !o.restart_pipeline) {
      async_refused = c.dir + " is a checkpoint of " + std::string(schedule_name(*plan->schedule)) +
                      ", an asynchronous schedule (schedule.kind) whose microbatches and weight "
                      "versions cross steps: only a flush schedule's (or none's) checkpoint can be "
                      "re-cut as it is; add --restart-pipeline (with --schedule, a flush one) to "
                      "restart its pipeline from each stage's newest weights, dropping what was in "
                      "flight (not the computation the interrupted run would have made)";
      return make_error(async_refused);
    }
    const model<float> net = build_model<float>(plan->model);
    const run_plan to = new_layout(o, *plan, net);
    auto from_run = lower_run(*plan, net.size());
    if (!from_run) return from_run.err();
    const std::vector<int>& from_b = from_run->boundaries;
    std::vector<rank_state> from;
    for (const checkpoint_file& f : c.manifest.files) {
      auto st = load_rank_checkpoint(c.dir, f, net, from_b, rank_identity(*plan, f.rank), c.step);
      if (!st) return st.err();
      from.push_back(std::move(*st));
    }
    if (async) {
      auto r = restart_at_newest(std::move(from));
      if (!r) return r.err();
      restart = restart_record(*r, schedule_name(*plan->schedule));
      from = std::move(r->states);
    }
    auto lowered = lower_run(to, net.size());
    if (!lowered) return lowered.err();
    auto states = reshard(net, *from_run, from, *lowered);
    if (!states) return states.err();
    from_plan = *plan;
    to_plan = to;
    manifest = c.manifest;
    to_states = std::move(*states);
    return {};
  });
  if (!async_refused.empty()) throw CLI::ValidationError("--restart-pipeline", async_refused);
  if (!got) throw pipeworks_error(got.message());
  if (!got->read) throw pipeworks_error(got->read.message());
  const std::int64_t step = got->checkpoint.step;
  if (status s = prepare_checkpoint_dir(o.out, false, "--out"); !s) throw CLI::ValidationError("--out", s.message());
  if (status s = prepare_step_dir(o.out, step); !s) throw pipeworks_error(s.message());
  std::vector<checkpoint_file> files;
  for (const rank_state& st : to_states) {
    const std::string name = rank_file_name(st.rank);
    auto written = write_rank_file(step_dir(o.out, step) + "/" + name, st, rank_identity(*to_plan, st.rank));
    if (!written) throw pipeworks_error(written.message());
    files.push_back(checkpoint_file{st.rank, name, written->bytes, written->sha256, {}, {}});
  }
  checkpoint_manifest m = *manifest;
  m.plan = nlohmann::json::parse(to_json_text(*to_plan));
  m.files = std::move(files);
  if (!restart.is_null()) m.restart = restart;  // else a re-cut restarted checkpoint keeps its record
  if (status s = write_manifest(o.out, m); !s) throw pipeworks_error(s.message());
  std::printf("step %lld of %s (%s, %d stages x %d chunks, %d replicas, zero %d) re-cut as %s, "
              "%d stages x %d chunks, %d replicas, zero %d, split %s: %zu rank files in %s\n",
              static_cast<long long>(step), o.dir.c_str(),
              from_plan->schedule ? std::string(schedule_name(*from_plan->schedule)).c_str() : "none",
              from_plan->stages, from_plan->chunks, from_plan->replicas, from_plan->zero,
              to_plan->schedule ? std::string(schedule_name(*to_plan->schedule)).c_str() : "none",
              to_plan->stages, to_plan->chunks, to_plan->replicas, to_plan->zero,
              nlohmann::json(to_plan->split).dump().c_str(), m.files.size(),
              step_dir(o.out, step).c_str());
  if (!restart.is_null()) {
    std::size_t held = 0, versions = 0;
    for (const auto& r : restart["dropped"]) {
      held += r["microbatches"].size();
      versions += r["weight_versions"].size();
    }
    std::printf("the pipeline restarts at step %lld from each stage's newest weights: dropped %zu "
                "microbatches in flight and %zu older weight versions (the manifest's \"restart\" "
                "lists them); not the computation the interrupted %s run would have made\n",
                static_cast<long long>(step), held, versions,
                restart["from_schedule"].get<std::string>().c_str());
  }
  return exit_ok;
}

}  // namespace pipeworks::cli
