// prepare_checkpoints and manifest_of.
#include "runtime/checkpoint/run_checkpoints.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/data_fingerprint.hpp"
#include "runtime/checkpoint/dir_lock.hpp"

namespace pipeworks {
namespace {

// Why the manifest's data position cannot be the checkpoint's, or "" when it can: the data
// stream's whole state is the step, so data_position and the plan's data.position are the step,
// which is within the plan's steps.
std::string impossible_position(const checkpoint_manifest& m, const run_plan& plan,
                                std::int64_t step) {
  const std::string at = ", but the checkpoint is of step " + std::to_string(step);
  if (m.data_position != step)
    return "data_position is " + std::to_string(m.data_position) + at +
           " (the next minibatch after a checkpoint is its step's)";
  if (plan.data.position != step)
    return "plan.data.position is " + std::to_string(plan.data.position) + at;
  if (step > plan.train.steps)
    return "step " + std::to_string(step) + " is beyond the plan's " +
           std::to_string(plan.train.steps) + " steps (schedule.steps)";
  return "";
}

}  // namespace

result<checkpoint_manifest> read_checked_manifest(const std::string& dir, std::int64_t step) {
  auto m = read_manifest(dir, step);
  if (!m) return m.err();
  const std::string source = step_dir(dir, step) + "/" + manifest_name;
  auto plan = parse_run_plan(m->plan.dump(), source + " (its plan)");
  if (!plan) return plan.err();
  const auto ranks = static_cast<std::size_t>(plan->rank_count());
  if (m->files.size() != ranks)
    return make_error(source + ": files lists " + std::to_string(m->files.size()) +
                      " rank files but its plan has " + std::to_string(ranks) +
                      " ranks; the manifest was damaged or edited: " +
                      other_checkpoint_advice(dir, step));
  if (const std::string why = impossible_position(*m, *plan, step); !why.empty())
    return make_error(source + ": " + why + "; the manifest was damaged or edited: " +
                      other_checkpoint_advice(dir, step));
  return m;
}

namespace {

// check_resume_dir's refusal of a complete checkpoint after the position, whoever holds the lock.
status check_nothing_after(const run_plan& plan) {
  const checkpoint_spec& c = plan.checkpoint;
  if (c.every <= 0 || plan.data.position <= 0) return {};
  auto steps = complete_steps(c.dir);
  if (!steps) return steps.err();
  if (steps->empty() || steps->back() <= plan.data.position) return {};
  const std::string newest = std::to_string(steps->back());
  const std::string at = std::to_string(plan.data.position);
  return make_error(
      c.dir + " holds a complete checkpoint of step " + newest + ", after step " + at +
      " that this run resumes from (data.position): the run's checkpoints would mix with that "
      "later history's in one directory, and checkpoint.keep would prune them together. To "
      "resume the newest, set data.position to " + newest + " (resuming the directory again "
      "takes it); to go on from step " + at + " beside it, copy " +
      step_dir(c.dir, plan.data.position) + " into a new directory and make that the "
      "checkpoint.dir");
}

}  // namespace

namespace {

// The "restart" record (checkpoint reshard --restart-pipeline) of the checkpoint each run resumed,
// by its checkpoint directory: every later checkpoint of that run carries it too, so that its
// history says the pipeline was restarted and what was dropped.
std::mutex& restart_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, nlohmann::json>& restart_records() {
  static std::map<std::string, nlohmann::json> records;
  return records;
}
std::string restart_key(const std::string& dir) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(dir, ec);
  return ec ? dir : abs.lexically_normal().string();
}
void note_run_restart(const std::string& dir, const nlohmann::json& restart) {
  std::lock_guard lock(restart_mutex());
  if (restart.is_null()) restart_records().erase(restart_key(dir));
  else restart_records()[restart_key(dir)] = restart;
}
nlohmann::json run_restart(const std::string& dir) {
  std::lock_guard lock(restart_mutex());
  auto it = restart_records().find(restart_key(dir));
  return it == restart_records().end() ? nlohmann::json() : it->second;
}

}  // namespace

void note_run_data(const run_plan& plan, const checkpoint_manifest* resumed) {
  // Data the program hands over itself (a callback, or a path the run does not read) has no
  // fingerprint here.
  std::optional<data_fingerprint> now;
  if (plan.data.source != data_source::callback)
    if (auto f = fingerprint_data(plan.data.path)) now = std::move(*f);
  if (!now) {
    set_run_data(plan.checkpoint.dir, std::nullopt);
    return;
  }
  data_record r{*now, std::nullopt, 0};
  if (resumed && resumed->data) {
    if (!data_changes(resumed->data->fingerprint, *now).empty()) {
      r.replaced = resumed->data->fingerprint;  // resumed on other data: said in every manifest
      r.replaced_at = resumed->step;
    } else {
      r.replaced = resumed->data->replaced;  // the same data: an earlier choice stays recorded
      r.replaced_at = resumed->data->replaced_at;
    }
  }
  set_run_data(plan.checkpoint.dir, std::move(r));
}

std::string checkpoint_data_path(const checkpoint_manifest& m, const std::string& plan_path) {
  if (m.data && !m.data->fingerprint.path.empty() && !plan_path.empty() &&
      std::filesystem::path(plan_path).is_relative())
    return m.data->fingerprint.path;
  return plan_path;
}

status check_resume_data(const checkpoint_manifest& m, const run_plan& plan) {
  if (!m.data || plan.data.source == data_source::callback) return {};
  auto now = fingerprint_data(plan.data.path);
  if (!now) return now.err();
  const std::string changes = data_changes(m.data->fingerprint, *now);
  if (changes.empty()) return {};
  return make_error("the data " + plan.data.path + " is not what the checkpoint of step " +
                    std::to_string(m.step) + " was trained on: " + changes);
}

status check_resume_dir(const run_plan& plan) {
  const checkpoint_spec& c = plan.checkpoint;
  if (c.every <= 0 || plan.data.position <= 0) return {};
  if (status s = check_nothing_after(plan); !s) {
    // A run still writing there made the newer checkpoint: its lock is what to report, and the
    // run's own dir_lock::take reports it.
    if (!dir_lock::take(c.dir)) return {};
    return s;
  }
  return probe_writable_dir(c.dir);
}

result<std::optional<resume_point>> prepare_checkpoints(const run_plan& plan) {
  const checkpoint_spec& c = plan.checkpoint;
  const bool resuming = plan.data.position > 0;
  if (!resuming) {
    if (c.every > 0) {
      if (status s = prepare_checkpoint_dir(c.dir, false); !s) return make_error(s.message());
      note_run_data(plan, nullptr);
      note_run_restart(c.dir, nullptr);
    }
    return std::optional<resume_point>{};
  }
  if (c.dir.empty())
    return make_error("data.position is " + std::to_string(plan.data.position) +
                      ", but checkpoint.dir names no directory to resume from");
  // Under the run's lock (actors/pipeline.cpp): no other run can be writing there now.
  if (status s = check_nothing_after(plan); !s) return make_error(s.message());
  auto m = read_checked_manifest(c.dir, plan.data.position);
  if (!m) return m.err();
  resume_point r;
  if (m->metrics.is_object() && m->metrics.contains("samples") && m->metrics["samples"].is_number_integer())
    r.samples = m->metrics["samples"].get<std::int64_t>();
  note_run_data(plan, &*m);
  note_run_restart(c.dir, m->restart);
  r.manifest = std::move(*m);
  if (status s = prepare_checkpoint_dir(c.dir, true); !s) return make_error(s.message());
  if (c.every > 0)  // more checkpoints go there
    if (status s = probe_writable_dir(c.dir); !s) return make_error(s.message());
  for (std::int64_t n = plan.data.position + std::max<std::int64_t>(c.every, 1);
       c.every > 0 && n < plan.train.steps; n += c.every)
    if (std::filesystem::exists(step_dir(c.dir, n)))
      if (status s = prepare_step_dir(c.dir, n); !s) return make_error(s.message());
  return std::optional<resume_point>{std::move(r)};
}

std::string new_run_name() {
  std::random_device rd;
  const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

checkpoint_manifest manifest_of(const run_plan& plan, std::int64_t step, std::int64_t samples,
                                double elapsed, std::vector<checkpoint_file> files) {
  checkpoint_manifest m;
  m.step = step;
  run_plan at = plan;
  at.data.position = step;
  m.plan = nlohmann::json::parse(to_json_text(at));
  m.data_position = step;
  m.rng = {{"data_seed", plan.data.seed},
           {"init_seed", plan.init_seed},
           {"data", "step t's minibatch is drawn from (data_seed, t) alone, so data_position is the "
                    "whole state of the data stream; no layer draws random numbers while training"}};
  m.metrics = {{"samples", samples}, {"elapsed_s", elapsed}};
  if (plan.data.source != data_source::callback) {
    // The data as the run read it at its start (prepare_checkpoints), or as it is now.
    m.data = run_data(plan.checkpoint.dir);
    if (!m.data)
      if (auto now = fingerprint_data(plan.data.path)) m.data = data_record{*now, std::nullopt, 0};
  }
  m.restart = run_restart(plan.checkpoint.dir);  // a run resumed from a restart says so still
  m.files = std::move(files);
  std::sort(m.files.begin(), m.files.end(),
            [](const checkpoint_file& a, const checkpoint_file& b) { return a.rank < b.rank; });
  return m;
}

}  // namespace pipeworks
