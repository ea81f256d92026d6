// The run plan as JSON: every field written, every field required when read, unknown fields
// refused; numbers round-trip exactly (doubles are written with 17 significant digits).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/json_read.hpp"
#include "base/input_file.hpp"
#include "runtime/plan_schedule.hpp"
#include "runtime/run_plan.hpp"

namespace pipeworks {
namespace {

using json = nlohmann::json;

constexpr const char* format_name = "pipeworks-run-plan";
constexpr int format_version = 1;

json optimizer_json(const train_config& t) {
  const optimizer_config& o = t.optim;
  return {{"kind", std::string(optimizer_kind_name(o.kind))},
          {"lr", o.lr},
          {"momentum", o.momentum},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"decay_vectors", t.decay_vectors}};
}

// Reads one object's fields: each key must be present and of the right type; the object may hold
// no other keys. Errors name the source and the field's path.
class reader {
 public:
  reader(const json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {}

  status keys(std::initializer_list<const char*> allowed) const {
    if (!j_.is_object()) return fail("", "must be an object, not " + j_.dump());
    for (const char* k : allowed)
      if (!j_.contains(k)) return fail(k, "is missing");
    return only_keys(j_, source_ + ": ", path_.empty() ? "the plan" : path_, allowed);
  }
  // As keys(allowed), where the `optional` ones may also be absent (fields added after plans had
  // been written without them).
  status keys(std::initializer_list<const char*> required,
              std::initializer_list<const char*> optional) const {
    if (!j_.is_object()) return fail("", "must be an object, not " + j_.dump());
    for (const char* k : required)
      if (!j_.contains(k)) return fail(k, "is missing");
    std::string list;
    for (auto names : {required, optional})
      for (const char* k : names) list += std::string(list.empty() ? "" : ", ") + k;
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (auto names : {required, optional})
        for (const char* k : names) known = known || it.key() == k;
      if (!known)
        return make_error(source_ + ": unknown key \"" + it.key() + "\" in " +
                          (path_.empty() ? "the plan" : path_) + "; known keys: " + list);
    }
    return {};
  }
  const json& at(const char* k) const { return j_.at(k); }
  bool has(const char* k) const { return j_.is_object() && j_.contains(k); }
  reader sub(const char* k) const { return reader(j_.at(k), source_, name(k)); }
  std::string name(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }

  status text(const char* k, std::string& out) const {
    if (!at(k).is_string()) return fail(k, "must be a string, not " + at(k).dump());
    out = at(k).get<std::string>();
    return {};
  }
  status flag(const char* k, bool& out) const {
    if (!at(k).is_boolean()) return fail(k, "must be true or false, not " + at(k).dump());
    out = at(k).get<bool>();
    return {};
  }
  status number(const char* k, double& out) const {
    if (!at(k).is_number()) return fail(k, "must be a number, not " + at(k).dump());
    out = at(k).get<double>();
    return {};
  }
  // A whole number in [lo, hi].
  template <class I>
  status whole(const char* k, I& out, std::int64_t lo, std::int64_t hi) const {
    const json& v = at(k);
    const std::string range = "must be a whole number in " + std::to_string(lo) + ".." +
                              std::to_string(hi) + ", not " + v.dump();
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) return fail(k, range);
      out = static_cast<I>(v.get<std::uint64_t>());
      return {};
    }
    if (!v.is_number_integer()) return fail(k, range);
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) return fail(k, range);
    out = static_cast<I>(x);
    return {};
  }
  status seed(const char* k, std::uint64_t& out) const {
    if (!at(k).is_number_unsigned())
      return fail(k, "must be a whole number in 0..2^64-1, not " + at(k).dump());
    out = at(k).get<std::uint64_t>();
    return {};
  }
  error fail(const std::string& k, const std::string& why) const {
    const std::string where = k.empty() ? (path_.empty() ? "the plan" : path_) : name(k);
    return make_error(source_ + ": " + where + " " + why);
  }

 private:
  const json& j_;
  std::string source_, path_;
};

constexpr std::int64_t int_max = 2147483647;
constexpr std::int64_t big = std::int64_t{1} << 62;

// The schedule's shape; kind "custom" with the programs of a schedule file and their version
// rule ("programs", "versions": only then).
status read_schedule(const reader& r, run_plan& p) {
  // "reduce" is optional: plans written before it reduce collectively.
  PW_TRY(r.keys({"kind", "stages", "chunks", "replicas", "microbatches", "steps"},
                {"programs", "versions", "reduce"}));
  if (r.has("reduce")) {
    std::string mode;
    PW_TRY(r.text("reduce", mode));
    if (mode != "collective" && mode != "p2p")
      return r.fail("reduce", "is \"" + mode + "\"; known: collective, p2p");
    p.reduce = mode == "p2p" ? reduce_mode::p2p : reduce_mode::collective;
  }
  std::string kind;
  PW_TRY(r.text("kind", kind));
  if ((kind == "custom") != r.has("programs") || r.has("programs") != r.has("versions"))
    return r.fail("kind", "is \"" + kind + "\"; \"programs\" and \"versions\" come with kind "
                          "\"custom\" (a schedule file's programs): all three, or none of them");
  if (kind == "none") {
    p.schedule.reset();
  } else if (kind == "custom") {
    PW_TRY(r.text("programs", p.programs));
    if (p.programs.empty()) return r.fail("programs", "is empty: give the programs' text");
    std::string versions;
    PW_TRY(r.text("versions", versions));
    auto v = parse_version_mode(versions);
    if (!v) return r.fail("versions", v.message());
    p.programs_versions = *v;
    p.schedule = *v == version_mode::latest ? schedule_kind::pipedream : schedule_kind::gpipe;
  } else {
    auto k = parse_schedule_kind(kind);
    if (!k) return r.fail("kind", k.message());
    p.schedule = *k;
  }
  PW_TRY(r.whole("stages", p.stages, 1, int_max));
  PW_TRY(r.whole("chunks", p.chunks, 1, int_max));
  PW_TRY(r.whole("replicas", p.replicas, 1, int_max));
  PW_TRY(r.whole("microbatches", p.train.microbatches, 1, int_max));
  PW_TRY(r.whole("steps", p.train.steps, 1, std::int64_t{1} << 30));
  return {};
}

status read_optimizer(const reader& r, run_plan& p) {
  PW_TRY(r.keys({"kind", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay", "decay_vectors"}));
  std::string kind;
  PW_TRY(r.text("kind", kind));
  auto k = parse_optimizer_kind(kind);
  if (!k) return r.fail("kind", k.message());
  optimizer_config& o = p.train.optim;
  o.kind = *k;
  PW_TRY(r.number("lr", o.lr));
  PW_TRY(r.number("momentum", o.momentum));
  PW_TRY(r.number("beta1", o.beta1));
  PW_TRY(r.number("beta2", o.beta2));
  PW_TRY(r.number("eps", o.eps));
  PW_TRY(r.number("weight_decay", o.weight_decay));
  PW_TRY(r.flag("decay_vectors", p.train.decay_vectors));
  return {};
}

}  // namespace

std::string to_json_text(const run_plan& p) {
  json model = to_json(p.model);
  model["name"] = p.model.name;
  json ranks = json::array();
  for (const rank_placement& r : p.ranks)
    ranks.push_back({{"device", r.device.to_string()}, {"speed", r.speed}, {"name", r.name},
                     {"process", r.process}});
  json ap = nullptr;
  if (p.auto_partition)
    ap = {{"planner", planner_name(p.auto_partition->planner)},
          {"cluster", p.auto_partition->cluster},
          {"keep_batch", p.auto_partition->keep_batch},
          {"keep_microbatches", p.auto_partition->keep_microbatches}};
  if (p.auto_partition && p.auto_partition->choose_recompute) ap["choose_recompute"] = true;
  json j = {
      {"format", format_name},
      {"version", format_version},
      {"model", model},
      {"schedule",
       {{"kind", schedule_label(p)},
        {"stages", p.stages},
        {"chunks", p.chunks},
        {"replicas", p.replicas},
        {"microbatches", p.train.microbatches},
        {"steps", p.train.steps},
        {"reduce", std::string(reduce_mode_name(p.reduce))}}},
      {"split", p.split},
      {"ranks", ranks},
      {"optimizer", optimizer_json(p.train)},
      {"lr_schedule", {{"warmup_steps", p.train.warmup_steps}, {"min_lr", p.train.min_lr}}},
      {"clip",
       {{"max_norm", p.train.clip_grad_norm}, {"scope", p.clips_globally() ? "global" : "stage"}}},
      {"data",
       {{"source", std::string(data_source_name(p.data.source))},
        {"path", p.data.path},
        {"batch", p.data.batch},
        {"seed", p.data.seed},
        {"position", p.data.position}}},
      {"init", {{"seed", p.init_seed}, {"from", p.init_from}}},
      {"runtime",
       {{"credits", p.credits},
        {"threads_per_stage", p.threads_per_stage},
        {"actors", p.detached ? "detached" : "pooled"},
        {"weights_every", p.weights_every},
        {"tf32", p.tf32},
        {"bf16", p.bf16},
        {"recompute", std::string(recompute_name(p.recompute))},
        {"zero", p.zero},
        {"offload", offload_name(p.offload)},
        {"memory_limit", p.memory_limit}}},
      {"checkpoint",
       {{"every", p.checkpoint.every}, {"dir", p.checkpoint.dir}, {"keep", p.checkpoint.keep}}},
      {"auto_partition", ap},
      {"processes",
       {{"workers", p.processes.workers},
        {"heartbeat_ms", p.processes.heartbeat_ms},
        {"timeout_ms", p.processes.timeout_ms},
        {"connect_ms", p.processes.connect_ms},
        {"rendezvous", p.processes.rendezvous},
        {"world_size", p.processes.world_size},
        {"transport", p.processes.transport}}},
  };
  if (!p.programs.empty()) {
    j["schedule"]["programs"] = p.programs;
    j["schedule"]["versions"] = std::string(version_mode_name(p.programs_versions));
  }
  if (!p.checkpoint.run.empty()) j["checkpoint"]["run"] = p.checkpoint.run;
  return j.dump(2) + "\n";
}

namespace {

status read_processes(const reader& r, run_plan& p) {
  PW_TRY(r.keys({"workers", "heartbeat_ms", "timeout_ms", "connect_ms", "rendezvous", "world_size",
                 "transport"}));
  const json& list = r.at("workers");
  if (!list.is_array() || list.size() > 65536)
    return r.fail("workers", "must be a list of \"host:port\" strings, not " + list.dump());
  for (const json& w : list) {
    if (!w.is_string()) return r.fail("workers", "must hold \"host:port\" strings, not " + w.dump());
    p.processes.workers.push_back(w.get<std::string>());
  }
  PW_TRY(r.whole("heartbeat_ms", p.processes.heartbeat_ms, 0, int_max));
  PW_TRY(r.whole("timeout_ms", p.processes.timeout_ms, 0, int_max));
  PW_TRY(r.whole("connect_ms", p.processes.connect_ms, 0, int_max));
  PW_TRY(r.text("rendezvous", p.processes.rendezvous));
  PW_TRY(r.whole("world_size", p.processes.world_size, 0, int_max));
  PW_TRY(r.text("transport", p.processes.transport));
  return {};
}

// The model's fields are all required (a model file may leave vocab to its default; a plan may
// not), and its name is the preset it names, with that preset's fields, or the model file's path
// ("" only for a library's own model: a plan file must name one, see load_run_plan).
status check_model_fields(const reader& r, const json& given, const model_spec& spec,
                          const std::string& name) {
  const json fields = to_json(spec);
  for (const auto& [k, v] : fields.items())
    if (!given.contains(k)) return r.fail(k, "is missing; a plan gives every field of its model");
  if (name.size() > 4096 || name.find_first_of(std::string("\0\n\r\t", 4)) != std::string::npos)
    return r.fail("name", "must be the model's name (mlp, gpt-tiny, gpt-small) or its JSON file's "
                          "path, not \"" + name.substr(0, 80) + "\"");
  for (const char* preset : {"mlp", "gpt-tiny", "gpt-small"}) {
    if (name != preset) continue;
    if (to_json(*parse_model_spec(preset)) != to_json(spec))
      return r.fail("name", "is \"" + name + "\", but the fields are not " + name + "'s (" +
                                to_json(*parse_model_spec(preset)).dump() + "); give the fields' "
                                "model file's path as the name, or " + name + "'s fields");
  }
  return {};
}

}  // namespace

result<run_plan> parse_run_plan(std::string_view text, const std::string& source, int blocks) {
  auto parsed = parse_json(text, source);
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  const reader top(j, source, "");
  PW_TRY(top.keys({"format", "version", "model", "schedule", "split", "ranks", "optimizer",
                   "lr_schedule", "clip", "data", "init", "runtime", "checkpoint", "auto_partition",
                   "processes"}));
  std::string format;
  PW_TRY(top.text("format", format));
  if (format != format_name)
    return top.fail("format", "is \"" + format + "\", not \"" + format_name +
                                  "\": this is not a pipeworks run plan");
  int version = 0;
  PW_TRY(top.whole("version", version, 1, int_max));
  if (version != format_version)
    return top.fail("version", "is " + std::to_string(version) + "; this pipeworks reads version " +
                                   std::to_string(format_version));
  run_plan p;
  {
    json m = j.at("model");
    if (!m.is_object() || !m.contains("name") || !m.at("name").is_string())
      return top.fail("model", "must be an object with a \"name\" string and the model's fields");
    const std::string name = m.at("name").get<std::string>();
    m.erase("name");
    auto spec = model_spec_from_json(m, source + ": model");
    if (!spec) return spec.err();
    PW_TRY(check_model_fields(top.sub("model"), m, *spec, name));
    p.model = std::move(*spec);
    p.model.name = name;
  }
  PW_TRY(read_schedule(top.sub("schedule"), p));
  {
    const json& s = j.at("split");
    if (!s.is_array()) return top.fail("split", "must be a list of block numbers, not " + s.dump());
    for (const json& b : s) {
      if (!b.is_number_integer() || b.get<std::int64_t>() < 0 || b.get<std::int64_t>() > int_max)
        return top.fail("split", "must hold whole block numbers, not " + b.dump());
      p.split.push_back(b.get<int>());
    }
  }
  {
    const json& list = j.at("ranks");
    if (!list.is_array()) return top.fail("ranks", "must be a list, not " + list.dump());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const reader r(list[i], source, "ranks[" + std::to_string(i) + "]");
      PW_TRY(r.keys({"device", "speed", "name", "process"}));
      rank_placement rp;
      std::string device;  // parsed here, once: the plan holds a typed device
      PW_TRY(r.text("device", device));
      PW_TRY(r.number("speed", rp.speed));
      PW_TRY(r.text("name", rp.name));
      PW_TRY(r.whole("process", rp.process, 0, int_max));
      auto named = parse_named_device(device);
      if (!named)  // worded as the plan's check words its problems
        return make_error(source + ": ranks[" + std::to_string(i) + "].device: is \"" + device +
                          "\": " + named.message() + " (cpu, cuda or cuda:N)");
      rp.device = *named;
      p.ranks.push_back(std::move(rp));
    }
  }
  PW_TRY(read_optimizer(top.sub("optimizer"), p));
  {
    const reader r = top.sub("lr_schedule");
    PW_TRY(r.keys({"warmup_steps", "min_lr"}));
    PW_TRY(r.whole("warmup_steps", p.train.warmup_steps, 0, big));
    PW_TRY(r.number("min_lr", p.train.min_lr));
  }
  {
    const reader r = top.sub("clip");
    PW_TRY(r.keys({"max_norm", "scope"}));
    PW_TRY(r.number("max_norm", p.train.clip_grad_norm));
    std::string scope;
    PW_TRY(r.text("scope", scope));
    const std::string want = p.clips_globally() ? "global" : "stage";
    if (scope != want)
      return r.fail("scope", "is \"" + scope + "\", but this schedule clips " +
                                 (p.clips_globally() ? "the global norm (\"global\")"
                                                     : "each stage's own norm (\"stage\")"));
  }
  {
    const reader r = top.sub("data");
    PW_TRY(r.keys({"source", "path", "batch", "seed", "position"}));
    std::string src;
    PW_TRY(r.text("source", src));
    if (src == "callback") p.data.source = data_source::callback;
    else if (src == "text") p.data.source = data_source::text;
    else if (src == "fashion-mnist") p.data.source = data_source::fashion_mnist;
    else return r.fail("source", "is \"" + src + "\"; known: text, fashion-mnist, callback");
    PW_TRY(r.text("path", p.data.path));
    PW_TRY(r.whole("batch", p.data.batch, 1, big));
    PW_TRY(r.seed("seed", p.data.seed));
    PW_TRY(r.whole("position", p.data.position, 0, big));
  }
  {
    const reader r = top.sub("init");
    PW_TRY(r.keys({"seed", "from"}));
    PW_TRY(r.seed("seed", p.init_seed));
    PW_TRY(r.text("from", p.init_from));
  }
  {
    const reader r = top.sub("runtime");
    // "recompute", "zero", "offload" and "memory_limit" are optional: plans written before them
    // recompute, shard, offload and limit nothing.
    PW_TRY(r.keys({"credits", "threads_per_stage", "actors", "weights_every", "tf32", "bf16"},
                  {"recompute", "zero", "offload", "memory_limit"}));
    if (r.has("offload")) {
      std::string what;
      PW_TRY(r.text("offload", what));
      const auto o = parse_offload(what);
      if (!o)
        return r.fail("offload", "is \"" + what + "\"; known: none, optimizer, activations, or "
                                 "optimizer,activations");
      p.offload = *o;
    }
    if (r.has("zero")) PW_TRY(r.whole("zero", p.zero, 0, 2));
    if (r.has("memory_limit")) PW_TRY(r.whole("memory_limit", p.memory_limit, 0, big));
    PW_TRY(r.flag("tf32", p.tf32));
    if (r.has("recompute")) {
      std::string mode;
      PW_TRY(r.text("recompute", mode));
      const auto m = parse_recompute(mode);
      if (!m) return r.fail("recompute", "is \"" + mode + "\"; known: none, full, selective");
      p.recompute = *m;
    }
    PW_TRY(r.flag("bf16", p.bf16));
    PW_TRY(r.whole("credits", p.credits, 0, int_max));
    PW_TRY(r.whole("threads_per_stage", p.threads_per_stage, 1, 4096));
    std::string actors;
    PW_TRY(r.text("actors", actors));
    if (actors != "detached" && actors != "pooled")
      return r.fail("actors", "is \"" + actors + "\"; known: detached, pooled");
    p.detached = actors == "detached";
    PW_TRY(r.whole("weights_every", p.weights_every, 0, big));
  }
  {
    const reader r = top.sub("checkpoint");
    // "run" is there only for runs with workers.
    if (r.has("run")) PW_TRY(r.keys({"every", "dir", "keep", "run"}));
    else PW_TRY(r.keys({"every", "dir", "keep"}));
    PW_TRY(r.whole("every", p.checkpoint.every, 0, big));
    PW_TRY(r.text("dir", p.checkpoint.dir));
    PW_TRY(r.whole("keep", p.checkpoint.keep, 0, int_max));
    if (r.has("run")) PW_TRY(r.text("run", p.checkpoint.run));
  }
  if (!j.at("auto_partition").is_null()) {
    const reader r = top.sub("auto_partition");
    PW_TRY(r.keys({"planner", "cluster", "keep_batch", "keep_microbatches", "choose_recompute"}));
    auto_partition_spec a;
    std::string planner;
    PW_TRY(r.text("planner", planner));
    auto k = parse_planner_kind(planner);
    if (!k) return r.fail("planner", k.message());
    a.planner = *k;
    PW_TRY(r.text("cluster", a.cluster));
    PW_TRY(r.flag("keep_batch", a.keep_batch));
    PW_TRY(r.flag("keep_microbatches", a.keep_microbatches));
    if (r.has("choose_recompute")) PW_TRY(r.flag("choose_recompute", a.choose_recompute));
    p.auto_partition = a;
  }
  PW_TRY(read_processes(top.sub("processes"), p));
  if (auto i = first_issue(p, blocks))
    return make_error(source + ": " + render(*i, [](std::string_view f) { return std::string(f); }));
  return p;
}

result<run_plan> load_run_plan(const std::string& path) {
  auto text = read_input_text(path, json_input_limit, "run plan");
  if (!text) return make_error(text.message() + "; give a plan that --print-plan wrote");
  auto plan = parse_run_plan(*text, path);
  if (!plan) return plan;
  // A library run may leave its own model unnamed; a plan file names the model it trains.
  if (plan->model.name.empty())
    return make_error(path + ": model.name must be the model's name (mlp, gpt-tiny, gpt-small) or "
                             "its JSON file's path, not \"\"");
  // A checkpoint's plan is read with the directory it came from; a plan file has only its own.
  if (plan->data.position > 0 && plan->checkpoint.dir.empty())
    return make_error(path + ": data.position: is " + std::to_string(plan->data.position) +
                      ", a resumed run's first step, but checkpoint.dir names no checkpoint "
                      "directory to resume from; give 0 to start a new run, or the directory");
  return plan;
}

}  // namespace pipeworks
