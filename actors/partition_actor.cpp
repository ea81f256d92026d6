// The partition actor: resolve_plan, place_ranks, lower_run (once), then one stage actor per rank
// (make_stage_spec, the initial weights or the rank's checkpoint file) and one reducer per virtual
// stage when w > 1. Ranks on worker processes are asked of the workers (host_request), whose
// replies must carry the plan back unchanged. It answers one plan_atom, then quits.
#include "actors/partition_actor.hpp"
#include "base/exception_text.hpp"
#include "base/thread_budget.hpp"

#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "actors/reducer_actor.hpp"
#include "actors/shard_actor.hpp"
#include "actors/stage_actor.hpp"
#include "actors/type_ids.hpp"
#include "ops/model/param_split.hpp"
#include "partition/plan_resolve.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {
namespace {

// What build() leaves to do: the wiring so far, and a request for each worker that hosts ranks.
struct pending_wiring {
  pipeline_wiring wiring;
  std::vector<std::pair<int, host_request>> requests;  // (process, request)
};

// The first field in which the plan a worker read differs from the one it was sent.
std::string first_plan_difference(const std::string& sent, const std::string& read) {
  const auto patch = nlohmann::json::diff(nlohmann::json::parse(sent, nullptr, false),
                                          nlohmann::json::parse(read, nullptr, false));
  if (patch.empty() || !patch[0].contains("path")) return "the plan";
  std::string path = patch[0]["path"].get<std::string>();
  for (char& c : path)
    if (c == '/') c = '.';
  return path.empty() ? "the plan" : path.substr(1);
}

template <class T>
result<pending_wiring> build(caf::actor_system& sys, partition_spec<T>& spec) {
  const model<T>& net = *spec.net;
  const sample_fn sample = [&](std::int64_t rows) -> result<minibatch> {
    run_plan at = spec.plan;
    at.data.batch = rows;
    auto fn = spec.data(at);
    if (!fn) return fn.err();
    return (*fn)(at.data.position);
  };
  // The run's one resolution and lowering: the driver, the caller and the workers are handed it.
  auto resolved = resolve_plan(spec.plan, net, sample);
  if (!resolved) return resolved.err();
  run_plan placed = resolved->plan;
  place_ranks(placed);
  auto lowered = lower_run(std::move(placed), net.size());
  if (!lowered) return lowered.err();
  const auto run = std::make_shared<const lowered_run>(std::move(*lowered));
  const schedule& programs = *run->programs;
  const run_plan& plan = run->plan;
  const int V = plan.virtual_stages();

  std::vector<param_set> pieces;
  if (!spec.resume) {
    auto cut = split_params(*spec.initial, run->boundaries);
    if (!cut) return cut.err();
    pieces = std::move(*cut);
  }
  pending_wiring out;
  pipeline_wiring& wiring = out.wiring;
  wiring.run = run;
  wiring.report = resolved->report;
  if (!resolved->summary.is_null()) wiring.summary = resolved->summary.dump();
  wiring.ranks.resize(static_cast<std::size_t>(programs.ranks()));
  const auto workers = static_cast<int>(plan.processes.workers.size());
  if (static_cast<int>(spec.workers.size()) != workers)
    return make_error("the plan names " + std::to_string(workers) + " workers, but " +
                      std::to_string(spec.workers.size()) + " are connected");
  // A worker in another process reads the plan's JSON (read_lowered_run).
  const std::string sent = workers > 0 ? to_json_text(plan) : std::string();
  std::vector<host_request> requests(static_cast<std::size_t>(workers));
  for (int k = 1; k <= workers; ++k) {
    host_request& q = requests[static_cast<std::size_t>(k - 1)];
    q.dtype = sizeof(T) == 4 ? "float32" : "float64";
    q.plan = sent;
    q.process = k;
    q.driver = spec.driver;
    q.fault = spec.hooks.fault;
    q.record_trace = spec.hooks.record_trace;
    q.transport = spec.link ? "ucx" : "caf";
    q.peers = spec.peers;
    if (spec.resume)
      q.resume_dir = std::filesystem::absolute(step_dir(plan.checkpoint.dir, spec.resume->step)).string();
  }
  // Across processes with w > 1 the gradient sum is an all-reduce between the replicas: one share
  // per replica and stage, in its rank's process; else one reducer per stage, here.
  // (With dualpipe's routes one share per member of the reduce, route r of replica q being
  // r * w + q, and piece of the model.)
  const bool sharded = workers > 0 && plan.replicas > 1;
  const int members = programs.reduce_group_size();
  wiring.reducers.resize(static_cast<std::size_t>(sharded ? members * V : V));
  if (plan.detached && workers == 0) {  // each rank and reducer a thread of its own
    const std::size_t threads = static_cast<std::size_t>(programs.ranks()) +
                                (programs.reduce_group_size() > 1 ? static_cast<std::size_t>(V) : 0);
    if (status fits = check_thread_budget(threads); !fits)
      return make_error("the run's detached actors: " + fits.message() +
                        "; use --actors pooled (ranks share a pool of threads), or fewer "
                        "--replicas or --stages");
  }
  // Spawning may fail part way (a thread that cannot be created, with many detached ranks and a
  // memory limit): the actors already spawned wait for a wiring that never comes, and the actor
  // system would wait for them for ever. They are stopped, and the error says what to change.
  try {
    for (int r = 0; r < programs.ranks(); ++r) {
      const int device = r % plan.stages;
      const int process = plan.ranks.empty() ? 0 : plan.ranks[static_cast<std::size_t>(r)].process;
      std::vector<param_set> initial;
      if (!spec.resume)
        for (int s = 0; s < V; ++s)
          if (programs.device_of[static_cast<std::size_t>(s)] == device)
            initial.push_back(pieces[static_cast<std::size_t>(programs.piece_of(s))].clone());
      if (process > 0) {
        host_request& q = requests[static_cast<std::size_t>(process - 1)];
        q.ranks.push_back(r);
        if (spec.resume) {
          q.resume.push_back(file_of_rank(*spec.resume, r));
        } else {
          std::vector<param_snapshot> mine;
          for (param_set& p : initial) mine.push_back(std::make_shared<const param_set>(std::move(p)));
          q.initial.push_back(std::move(mine));
        }
        continue;
      }
      auto st = make_stage_spec<T>(*run, r, spec.net, spec.start, spec.hooks, spec.board, spec.driver);
      st->link = spec.link;
      if (spec.resume) {
        st->resume_dir = step_dir(plan.checkpoint.dir, spec.resume->step);
        st->resume = file_of_rank(*spec.resume, r);
      } else {
        st->initial = std::move(initial);
      }
      // With workers every actor of the run is pooled (see spawn_driver in actors/driver.cpp).
      wiring.ranks[static_cast<std::size_t>(r)] = spawn_stage<T>(sys, plan.detached && workers == 0, std::move(st));
      if (sharded) {
        const int replica = r / plan.stages;
        for (int s = 0; s < V; ++s)
          if (programs.device_of[static_cast<std::size_t>(s)] == device) {
            const int member = programs.member(s, replica);
            const int piece = programs.piece_of(s);
            wiring.reducers[static_cast<std::size_t>(member * V + piece)] =
                spawn_shard(sys, piece, member, members, spec.driver, spec.link, plan.zero,
                            plan.reduce);
          }
      }
    }
    for (int k = 1; k <= workers; ++k)
      if (!requests[static_cast<std::size_t>(k - 1)].ranks.empty())
        out.requests.emplace_back(k, std::move(requests[static_cast<std::size_t>(k - 1)]));
    // With routes (dualpipe) one reducer per piece of the model, which every replica's copies
    // on every route meet.
    if (programs.reduce_group_size() > 1 && !sharded)
      for (int s = 0; s < programs.route_stages(); ++s)
        wiring.reducers[static_cast<std::size_t>(s)] =
            spawn_reducer(sys, plan.detached && workers == 0, s, programs.reduce_group_size(),
                          plan.reduce, spec.driver, spec.link, gpu_reduce_device(*run, s));
  } catch (const std::exception& e) {
    for (const caf::actor& a : wiring.ranks)
      if (a) caf::anon_send_exit(a, caf::exit_reason::kill);
    for (const caf::actor& a : wiring.reducers)
      if (a) caf::anon_send_exit(a, caf::exit_reason::kill);
    throw pipeworks_error("starting the run's " + std::to_string(programs.ranks()) +
                          " ranks failed: " + exception_text(e) +
                          (plan.detached ? "; each detached rank is a thread of its own: use "
                                           "--actors pooled, or fewer --replicas or --stages"
                                         : ""));
  }
  return out;
}

// Asks each worker for its ranks; delivers the whole wiring once all have answered, or the first
// error, naming the worker.
template <class T>
void ask_workers(caf::event_based_actor* self, std::shared_ptr<partition_spec<T>> spec,
                 pending_wiring pending, caf::response_promise rp) {
  struct gather {
    pipeline_wiring wiring;
    std::size_t left = 0;
    bool done = false;
  };
  auto g = std::make_shared<gather>();
  g->wiring = std::move(pending.wiring);
  g->left = pending.requests.size();
  const auto limit = std::chrono::milliseconds(spec->plan.processes.connect_ms) + std::chrono::minutes(1);
  for (auto& [process, request] : pending.requests) {
    const std::string who = "worker " + std::to_string(process) + " at " +
                            spec->plan.processes.workers.at(static_cast<std::size_t>(process - 1));
    // The request travels in one CAF frame, the initial weights inside it: a worker whose frame
    // guard refuses a frame that large would close the connection, and look lost.
    const auto k = static_cast<std::size_t>(process - 1);
    const std::uint64_t limit_bytes = k < spec->worker_frames.size() ? spec->worker_frames[k] : 0;
    if (limit_bytes > 0) {
      std::uint64_t bytes = request.plan.size() + (std::uint64_t{1} << 16);  // the rest, generously
      for (const auto& list : request.initial)
        for (const param_snapshot& p : list)
          if (p) bytes += p->nbytes() + 64 * p->entries().size();
      if (bytes > limit_bytes) {
        const std::uint64_t need_mb = (bytes + (std::uint64_t{1} << 20) - 1) >> 20;
        rp.deliver(caf::make_error(
            caf::sec::runtime_error,
            who + " would refuse the frame that hands it its ranks' initial weights: about " +
                std::to_string(need_mb) + " MiB (" + std::to_string(bytes) + " bytes), more than the " +
                std::to_string(limit_bytes >> 20) + " MiB it accepts (" + std::to_string(limit_bytes) +
                " bytes); restart it with `pipeworks worker --max-frame-mb " + std::to_string(need_mb) +
                "` or more"));
        self->quit();
        return;
      }
    }
    const std::vector<int> ranks = request.ranks;
    const std::string sent = request.plan;
    auto fail = [self, g, rp](const std::string& why) mutable {
      if (g->done) return;
      g->done = true;
      rp.deliver(caf::make_error(caf::sec::runtime_error, why));
      self->quit();
    };
    self->request(spec->workers.at(static_cast<std::size_t>(process - 1)), limit, std::move(request))
        .then(
            [self, g, rp, who, ranks, sent, fail](host_reply& reply) mutable {
              if (g->done) return;
              if (reply.plan != sent)
                return fail(who + " read the plan differently, from its field " +
                            first_plan_difference(sent, reply.plan) +
                            " on; run the same pipeworks version on every host");
              if (reply.ranks.size() != ranks.size())
                return fail(who + " started " + std::to_string(reply.ranks.size()) +
                            " ranks, not the " + std::to_string(ranks.size()) + " it was given");
              for (std::size_t i = 0; i < ranks.size(); ++i)
                g->wiring.ranks[static_cast<std::size_t>(ranks[i])] = std::move(reply.ranks[i]);
              if (reply.shards.size() != reply.shard_slots.size())
                return fail(who + " named " + std::to_string(reply.shard_slots.size()) +
                            " slots for " + std::to_string(reply.shards.size()) + " all-reduce shares");
              for (std::size_t i = 0; i < reply.shards.size(); ++i) {
                const int slot = reply.shard_slots[i];
                if (slot < 0 || static_cast<std::size_t>(slot) >= g->wiring.reducers.size())
                  return fail(who + " started an all-reduce share for slot " + std::to_string(slot) +
                              ", which the plan does not have");
                g->wiring.reducers[static_cast<std::size_t>(slot)] = std::move(reply.shards[i]);
              }
              if (--g->left > 0) return;
              g->done = true;
              rp.deliver(std::move(g->wiring));
              self->quit();
            },
            [self, who, fail](caf::error& e) mutable {
              fail(who + " could not host its ranks: " + error_text(self->system(), e));
            });
  }
}

template <class T>
caf::behavior partition_actor(caf::event_based_actor* self,
                              std::shared_ptr<partition_spec<T>> spec) {
  return {
      [self, spec](plan_atom) {
        auto rp = self->make_response_promise();
        result<pending_wiring> pending = make_error("");
        try {
          pending = build(self->system(), *spec);
        } catch (const std::exception& e) {
          pending = make_error(exception_text(e));
        }
        if (!pending) {
          rp.deliver(caf::make_error(caf::sec::runtime_error, pending.message()));
          self->quit();
        } else if (pending->requests.empty()) {
          rp.deliver(std::move(pending->wiring));
          self->quit();
        } else {
          ask_workers<T>(self, spec, std::move(*pending), rp);
        }
      },
  };
}

}  // namespace

template <class T>
caf::actor spawn_partition(caf::actor_system& sys, std::shared_ptr<partition_spec<T>> spec) {
  return sys.spawn(partition_actor<T>, std::move(spec));
}

template caf::actor spawn_partition<float>(caf::actor_system&,
                                           std::shared_ptr<partition_spec<float>>);
template caf::actor spawn_partition<double>(caf::actor_system&,
                                            std::shared_ptr<partition_spec<double>>);

}  // namespace pipeworks
