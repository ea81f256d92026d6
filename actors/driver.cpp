// The driver's state and behavior: the wiring of the lowered run, driver_core for inputs, norms
// and step tallies, the manifest collector, the stage results, failure detection (a lost worker,
// its own stop, ranks that all wait for each other) and the end.
#include "actors/driver.hpp"
#include "base/exception_text.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "actors/manifest_collector.hpp"
#include "actors/tracer_actor.hpp"
#include "actors/type_ids.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "runtime/plan_schedule.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

// What the ranks send back for the run's outcome: per virtual stage the latest weights (replica
// 0's) and the steps they saw, and the peaks, the max over the replicas; the last step's metrics
// and the trace.
struct stage_results {
  std::vector<param_snapshot> weights;
  std::vector<int> weight_steps;
  std::vector<stage_stats> stats;
  step_metrics last;
  timeline trace;

  void start(int V) {
    stats.resize(static_cast<std::size_t>(V));
    weights.resize(static_cast<std::size_t>(V));
    weight_steps.assign(static_cast<std::size_t>(V), 0);
    for (int s = 0; s < V; ++s) stats[static_cast<std::size_t>(s)].stage = s;
  }
  // A rank's peaks when it finished, and its weights when it sends them (replica 0).
  void add(const rank_done& d) {
    const auto V = static_cast<int>(stats.size());
    for (std::size_t i = 0; i < d.stages.size(); ++i) {
      const int s = d.stages[i];
      if (s < 0 || s >= V) continue;
      if (d.finished && i < d.stats.size())
        merge_max(stats[static_cast<std::size_t>(s)], d.stats[i]);
      if (i < d.weights.size()) {
        weights[static_cast<std::size_t>(s)] = d.weights[i];
        weight_steps[static_cast<std::size_t>(s)] = d.steps.at(i);
      }
    }
  }
};

// A stop signal's course: replica 0's ranks are asked for their weights; once all replied, the
// checkpoints of steps complete by then get their manifests, and the run ends (within 5 s).
struct stop_state {
  bool asked = false;
  int replies_left = 0;
  bool replies_in = false;    // every weights reply came
  std::int64_t drain_to = 0;  // checkpoints up to this step get their manifests
};

class driver_state {
 public:
  static inline const char* name = "pipeworks.driver";

  explicit driver_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(std::shared_ptr<driver_spec> spec) {
    spec_ = std::move(spec);
    self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
    return {
        [this](run_atom, const caf::actor& partition) {
          caller_ = caf::actor_cast<caf::actor>(self_->current_sender());
          for (std::size_t k = 0; k < spec_->workers.size(); ++k)
            watch(spec_->workers[k], {who_kind::worker, static_cast<int>(k + 1)});
          plan_with(partition);
        },
        [this](input_request m) { from_rank(m); },
        [this](loss_report m) { from_rank(m); },
        [this](step_report& m) { from_rank(std::move(m)); },
        [this](norm_request& m) { from_rank(std::move(m)); },
        [this](rank_done& d) { guarded([&] { on_rank_done(std::move(d)); }); },
        [this](const checkpoint_written& c) { guarded([&] { on_file(c); }); },
        [this](const rank_stalled& s) { guarded([&] { on_stalled(s); }); },
        [this](stall_atom, std::uint64_t epoch) { guarded([&] { check_stall(epoch); }); },
        [this](const stage_failure& f) {
          if (!stopped_self(f.message)) fail(f.message);
        },
        [this](poll_atom) { guarded([&] { poll(); }); },
        [this](manifest_atom, std::int64_t n, checkpoints_kept& k) {
          guarded([&] { on_manifest(n, std::move(k)); });
        },
        [this](wire_msg& w) {
          if (spec_->link) spec_->link->accept(self_, std::move(w), "the driver");
        },
    };
  }

 private:
  enum class who_kind { rank, reducer, tracer, partition, worker };
  struct who {
    who_kind kind;
    int index;
  };

  // The lowered run (an empty one until the partition actor's wiring came).
  const lowered_run& run() const {
    static const lowered_run none;
    return lowered_ ? *lowered_ : none;
  }

  double elapsed() const {
    return std::chrono::duration<double>(clock_type::now() - spec_->start).count();
  }

  template <class F>
  void guarded(F&& f) {
    if (ended_) return;
    try {
      f();
    } catch (const std::exception& e) {
      fail(std::string("the driver failed: ") + exception_text(e));
    }
  }

  void plan_with(const caf::actor& partition) {
    watch(partition, {who_kind::partition, 0});
    self_->request(partition, caf::infinite, plan_atom::value)
        .then([this](pipeline_wiring& w) { guarded([&] { wire(std::move(w)); }); },
              [this](caf::error& e) {
                fail("planning the pipeline failed: " + error_text(self_->system(), e));
              });
  }

  // The run comes lowered from the partition actor: the driver reads or lowers no plan itself.
  void wire(pipeline_wiring w) {
    if (!w.run) return fail("the partition actor sent no plan");
    lowered_ = std::move(w.run);
    report_ = std::move(w.report);
    summary_ = std::move(w.summary);
    const run_plan& p = run().plan;
    if (spec_->link) spec_->link->set_microbatches(p.train.microbatches);
    if (spec_->callbacks.on_plan)
      if (status s = spec_->callbacks.on_plan(p, report_); !s) return fail(s.message());
    auto data = spec_->data(p);
    if (!data) return fail("the data: " + data.message());
    core_.emplace(run().programs, std::move(*data), [this] { return elapsed(); }, p.data.position,
                  spec_->resume_samples);
    ranks_ = std::move(w.ranks);
    reducers_ = std::move(w.reducers);
    const int V = p.virtual_stages();
    results_.start(V);
    manifests_.start(p);
    for (std::size_t r = 0; r < ranks_.size(); ++r) watch(ranks_[r], {who_kind::rank, static_cast<int>(r)});
    for (std::size_t s = 0; s < reducers_.size(); ++s)
      if (reducers_[s]) watch(reducers_[s], {who_kind::reducer, static_cast<int>(s)});
    if (spec_->record_trace) {
      tracer_ = spawn_tracer(self_->system(), run().ranks(), p.stages,
                             schedule_label(p) + " p=" +
                                 std::to_string(p.stages) + " m=" +
                                 std::to_string(p.train.microbatches) + " (measured)");
      watch(tracer_, {who_kind::tracer, 0});
    }
    // Across processes (w > 1) one all-reduce share per replica and stage: wired before the ranks.
    // (With dualpipe's routes one per member r * w + q of the reduce and piece of the model.)
    const int stride = static_cast<int>(reducers_.size()) > V ? V : 0;
    if (stride > 0)
      for (int s = 0; s < run().programs->route_stages(); ++s) {
        shard_wiring sw;
        for (int r = 0; r < run().programs->reduce_group_size(); ++r)
          sw.shards.push_back(reducers_.at(static_cast<std::size_t>(r * V + s)));
        for (const auto& shard : sw.shards) self_->send(shard, sw);
      }
    const rank_wiring peers{ranks_, reducers_, caf::actor_cast<caf::actor>(self_), tracer_, stride};
    for (const auto& r : ranks_) self_->send(r, peers);
    if (spec_->callbacks.stop_requested)
      self_->delayed_send(self_, spec_->poll_interval, poll_atom::value);
  }

  void watch(const caf::actor& a, who w) {
    watched_.emplace(a.address(), w);
    self_->monitor(a);
  }

  void from_rank(message msg) {
    if (ended_ || !core_) return;
    guarded([&] {
      std::vector<outgoing> out;
      const int from = sender_rank(msg);
      if (status s = core_->receive(std::move(msg), out); !s) return fail(s.message() + resumed_hint(from));
      if (!out.empty()) ++stall_epoch_;  // the ranks have something new to do
      for (outgoing& o : out)
        std::visit([&](auto& m) {
          wire_send(spec_->link, self_, ranks_.at(static_cast<std::size_t>(o.to.index)), std::move(m));
        }, o.msg);
      for (completed_step& c : core_->take_completed()) {
        results_.last = c.metrics;
        if (spec_->callbacks.on_step) spec_->callbacks.on_step(c.metrics);
        if (c.weights && spec_->callbacks.on_weights) spec_->callbacks.on_weights(c.weights);
      }
      write_due_manifests();
    });
  }

  void on_file(const checkpoint_written& c) {
    if (!core_) return;
    if (status s = core_->file_written(c.rank, c.step); !s) return fail(s.message());
    manifests_.add(c, run().plan);
    write_due_manifests();
  }

  // A checkpoint whose files are all durable and whose step is complete gets its manifest, last.
  void write_due_manifests() {
    manifests_.write_due(*core_, run().plan, elapsed(), caf::actor_cast<caf::actor>(self_));
  }

  void on_manifest(std::int64_t n, checkpoints_kept kept) {
    // Workers with checkpoint directories of their own prune them as the driver pruned its own.
    if (!kept.steps.empty())
      for (const auto& w : spec_->workers) self_->send(w, kept);
    manifests_.written(n);
    if (spec_->callbacks.on_checkpoint)
      spec_->callbacks.on_checkpoint(n, step_dir(run().plan.checkpoint.dir, n));
    if (stop_.asked) return end_interrupt_when_drained();
    maybe_finish();
  }

  void on_rank_done(rank_done d) {
    results_.add(d);
    if (d.finished) finished_ranks_.insert(d.rank);
    ++stall_epoch_;
    if (!d.finished) {
      if (stop_.asked && --stop_.replies_left == 0) {
        stop_.replies_in = true;
        stop_.drain_to = core_ ? core_->steps_done() : 0;
        end_interrupt_when_drained();
      }
      return;
    }
    ++ranks_done_;
    maybe_finish();
  }

  // The run is over once every rank ran its program and every checkpoint it owes is written.
  void maybe_finish() {
    if (ended_ || stop_.asked || collecting_ || !core_ ||
        ranks_done_ < static_cast<int>(ranks_.size()))
      return;
    if (!core_->all_steps_done())
      return fail("every rank finished its program, but only " + std::to_string(core_->steps_done()) +
                  " of " + std::to_string(core_->steps()) + " steps were reported complete");
    if (!manifests_.all_written()) return;  // the last files are still being written
    if (!tracer_) return finish(false);
    collecting_ = true;  // no second finish while the trace is collected
    self_->request(tracer_, std::chrono::seconds(10), collect_atom::value)
        .then([this](timeline& t) {
                results_.trace = std::move(t);
                if (run().programs) results_.trace.version_rule = run().programs->version_rule;
                finish(false);
              },
              [this](caf::error& e) {
                fail("collecting the trace failed: " + error_text(self_->system(), e));
              });
  }

  // Once the weights are in, and every checkpoint of a step complete by then has its manifest
  // (its files were being written: a stop does not throw them away; at most 5 s in all).
  void end_interrupt_when_drained() {
    if (!stop_.replies_in) return;
    if (manifests_.owes_up_to(stop_.drain_to)) return;  // its manifest is coming
    finish(true);
  }

  // Ctrl-C: ask replica 0's ranks for their latest weights, then end (at most 5 s later).
  void poll() {
    if (stop_.asked) return finish(true);  // not every rank answered in time
    if (!spec_->callbacks.stop_requested()) {
      self_->delayed_send(self_, spec_->poll_interval, poll_atom::value);
      return;
    }
    stop_.asked = true;
    // The ranks of this process answer at once instead of after their stretch (a worker's stop
    // sleeping when their run ends, at the latest when the driver gives up waiting below).
    if (spec_->sleeps) spec_->sleeps->cut();
    const int p = run().plan.stages;
    stop_.replies_left = p;
    for (int d = 0; d < p; ++d) self_->send(ranks_.at(static_cast<std::size_t>(d)), weights_atom::value);
    self_->delayed_send(self_, std::chrono::seconds(5), poll_atom::value);
  }

  // The virtual stages of device d, as "stage 1" or "stages 1,3".
  std::string stages_of(int device) const {
    std::vector<int> mine;
    for (int s = 0; s < run().plan.virtual_stages(); ++s)
      if (run().programs->device_of[static_cast<std::size_t>(s)] == device) mine.push_back(s);
    std::string out = mine.size() == 1 ? "stage " : "stages ";
    for (std::size_t k = 0; k < mine.size(); ++k) {
      if (k) out += ',';
      out += std::to_string(mine[k]);
    }
    return out;
  }

  // Whether the driver's own process was stopped (SIGSTOP, a debugger, swapping) or starved for
  // longer than a peer may be silent, recently: then every worker's heartbeats looked late, and
  // the loss `what` is the driver's doing. If so, the run fails saying so, naming no worker.
  bool stopped_self(const std::string& what) {
    if (!spec_->own_clock || !run().programs) return false;
    const process_spec& ps = run().plan.processes;
    const auto timeout = std::chrono::milliseconds(ps.timeout_ms);
    const auto threshold = std::max(std::chrono::milliseconds(100),
                                    timeout - std::chrono::milliseconds(ps.heartbeat_ms));
    const stall_clock::gap g = spec_->own_clock->longest_recent(timeout + std::chrono::seconds(10));
    if (g.length() < threshold) return false;
    const double s = std::chrono::duration<double>(g.length()).count();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", s);
    fail("the driver itself was stopped or starved of CPU for " + std::string(secs) +
         " s (its own clock did not tick meanwhile), longer than a peer may be silent (" +
         std::to_string(ps.timeout_ms) + " ms, --peer-timeout-ms): every worker's heartbeats "
         "looked late, so the workers were not at fault (it saw: " + what + "). Continue with "
         "--resume from the last checkpoint; if this process is paused (SIGSTOP, a debugger, "
         "swapping) or starved, raise --peer-timeout-ms");
    return true;
  }

  // The rank that sent a message to the driver: the first stage's for an input request (which
  // names its replica), the stage's for the others; -1 when not known.
  int sender_rank(const message& m) const {
    if (!run().programs) return -1;
    const int p = run().plan.stages;
    auto of = [&](int stage, int replica) {
      const auto& dev = run().programs->device_of;
      if (stage < 0 || static_cast<std::size_t>(stage) >= dev.size()) return -1;
      return replica * p + dev[static_cast<std::size_t>(stage)];
    };
    // Requests and losses name a member of the reduce (schedule::member).
    const schedule& s = *run().programs;
    if (const auto* q = std::get_if<input_request>(&m))
      return of(s.member_stage(q->replica, 0), s.member_replica(q->replica));
    if (const auto* q = std::get_if<norm_request>(&m)) return of(q->stage, q->replica);
    if (const auto* q = std::get_if<step_report>(&m)) return of(q->stage, q->replica);
    if (const auto* q = std::get_if<loss_report>(&m))
      return of(s.member_stage(q->replica, s.route_stages() - 1), s.member_replica(q->replica));
    return -1;
  }

  // For an error of a resumed run about what a rank sent: the checkpoint it resumed from and that
  // rank's file in it, which may come from another step or run than the others.
  std::string resumed_hint(int rank) const {
    const run_plan& p = run().plan;
    if (p.data.position <= 0 || p.checkpoint.dir.empty()) return "";
    const std::string dir = step_dir(p.checkpoint.dir, p.data.position);
    std::string s = ". The run resumed from " + dir;
    if (rank >= 0)
      s += "; rank " + std::to_string(rank) + " continued from its file there, " +
           rank_file_name(rank) + ", which does not continue where the others do: it may come "
           "from another step or another run";
    else
      s += "; a rank file there may come from another step or another run";
    return s + " (check it with `pipeworks checkpoint inspect " + p.checkpoint.dir + "`)";
  }

  // Whether every rank that has not finished has said it is stalled.
  bool all_stalled() const {
    if (ranks_.empty() || stalled_.empty()) return false;
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      if (!finished_ranks_.count(static_cast<int>(r)) && !stalled_.count(static_cast<int>(r))) return false;
    return true;
  }

  void on_stalled(const rank_stalled& s) {
    if (s.stalled) stalled_[s.rank] = s.waiting;
    else stalled_.erase(s.rank);
    ++stall_epoch_;
    if (all_stalled()) self_->delayed_send(self_, stall_confirm, stall_atom::value, stall_epoch_);
  }

  // Still every unfinished rank stalled, and nothing changed (no rank moved, the driver sent
  // nothing) since: the ranks wait for each other and will for ever. The run ends naming each
  // rank's wait: its process, its step, its action and the message it needs.
  void check_stall(std::uint64_t epoch) {
    if (epoch != stall_epoch_ || !all_stalled()) return;
    std::string text = "the run stopped moving: for " +
                       std::to_string((stall_after + stall_confirm).count()) +
                       " s no rank received a message or ran an action, and each waits for one "
                       "that does not come:";
    const std::vector<std::string>& names = spec_->worker_addresses;
    for (const auto& [r, waiting] : stalled_) {
      const int process = run().plan.ranks.empty() ? 0 : run().plan.ranks.at(static_cast<std::size_t>(r)).process;
      const int p = run().plan.stages;
      text += "\n  rank " + std::to_string(r) + " (" + stages_of(r % p) + ", replica " +
              std::to_string(r / p) + ") in process " + std::to_string(process);
      if (process >= 1 && static_cast<std::size_t>(process) <= names.size())
        text += " (worker " + std::to_string(process) + " at " + names[static_cast<std::size_t>(process - 1)] + ")";
      text += " " + waiting;
    }
    fail(text + resumed_hint(-1));
  }

  // A worker process is gone: every rank it held is lost with it.
  void lost_process(int process, const std::string& why) {
    if (stopped_self("worker " + std::to_string(process) + " went silent (" + why + ")")) return;
    const std::vector<std::string>& names = spec_->worker_addresses;
    std::string text = "worker " + std::to_string(process);
    if (process >= 1 && static_cast<std::size_t>(process) <= names.size())
      text += " at " + names[static_cast<std::size_t>(process - 1)];
    text += " was lost (" + why + ")";
    if (run().programs) {
      const std::vector<int> ranks = ranks_in_process(run().plan, process);
      text += ranks.size() == 1 ? "; it held rank " : "; it held ranks ";
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        const int r = ranks[i], p = run().plan.stages;
        text += (i ? ", " : "") + std::to_string(r) + " (" + stages_of(r % p) + ", replica " +
                std::to_string(r / p) + ")";
      }
    }
    fail(text + (run().plan.checkpoint.every > 0
                     ? ". Restart the worker and continue with --resume from the last checkpoint"
                     : ". Restart the worker and the run (with --save-every N --checkpoint-dir "
                       "DIR, a run lost this way continues with --resume)"));
  }

  void on_down(const caf::down_msg& dm) {
    if (ended_) return;
    auto it = watched_.find(dm.source);
    if (it == watched_.end()) return;
    const std::string why = dm.reason ? self_->system().render(dm.reason) : "it exited normally";
    const who w = it->second;
    if (w.kind == who_kind::worker) return lost_process(w.index, why);
    if (w.kind == who_kind::rank && dm.reason == caf::exit_reason::remote_link_unreachable &&
        !run().plan.ranks.empty())
      return lost_process(run().plan.ranks.at(static_cast<std::size_t>(w.index)).process, why);
    if (w.kind == who_kind::reducer)
      return fail("the reducer of stage " + std::to_string(w.index) + " died (" + why + ")");
    if (w.kind == who_kind::tracer) return fail("the tracer died (" + why + ")");
    if (w.kind == who_kind::partition) {
      if (dm.reason) fail("the partition actor died (" + why + ")");
      return;  // it quits once it has answered
    }
    const int p = run().plan.stages;
    const int replica = w.index / p, device = w.index % p;
    const std::optional<action> at = spec_->board ? spec_->board->at(w.index) : std::nullopt;
    const std::string stage = at ? "stage " + std::to_string(at->stage) : stages_of(device);
    fail(stage + ", replica " + std::to_string(replica) + " (rank " + std::to_string(w.index) +
         ")" + (at ? ", action " + to_string(*at) : std::string(", action unknown")) +
         ": the stage actor died (" + why + ")");
  }

  void fail(const std::string& why) {
    if (ended_) return;
    run_outcome o = outcome(false);
    o.ok = false;
    o.error = why;
    end(std::move(o));
  }

  void finish(bool interrupted) {
    if (ended_) return;
    end(outcome(interrupted));
  }

  run_outcome outcome(bool interrupted) {
    run_outcome o;
    o.interrupted = interrupted;
    o.run = lowered_;
    o.report = report_;
    o.summary = summary_;
    o.weights = results_.weights;
    o.weight_steps = results_.weight_steps;
    o.stages = results_.stats;
    o.last = results_.last;
    o.steps_done = core_ ? core_->steps_done() : 0;
    o.trace = std::move(results_.trace);
    return o;
  }

  // Stops every actor of the run, answers the caller and quits.
  void end(run_outcome o) {
    ended_ = true;
    // A throttled rank of this process asleep in its stretch would hold the run's end (and a stop
    // signal) until it wakes: the stretch no longer matters.
    if (spec_->sleeps) spec_->sleeps->cut();
    for (const auto& r : ranks_) self_->send_exit(r, caf::exit_reason::user_shutdown);
    for (const auto& r : reducers_)
      if (r) self_->send_exit(r, caf::exit_reason::user_shutdown);
    if (tracer_) self_->send_exit(tracer_, caf::exit_reason::user_shutdown);
    // An interrupted run did not succeed: its workers hear so (a --once worker exits 1).
    const std::string why = o.interrupted ? "the driver was stopped by a signal after " +
                                                std::to_string(o.steps_done) + " steps"
                                          : o.error;
    for (const auto& w : spec_->workers) self_->send(w, run_ended{o.ok && !o.interrupted, why});
    if (caller_) self_->send(caller_, std::move(o));
    self_->quit();
  }

  caf::event_based_actor* self_;
  manifest_collector manifests_;  // its writer thread is joined when the driver goes
  std::shared_ptr<driver_spec> spec_;
  std::shared_ptr<const lowered_run> lowered_;  // null until wired
  std::string report_, summary_;
  std::optional<driver_core> core_;
  caf::actor caller_, tracer_;
  std::vector<caf::actor> ranks_, reducers_;
  std::map<caf::actor_addr, who> watched_;
  stage_results results_;
  stop_state stop_;
  int ranks_done_ = 0;
  std::map<int, std::string> stalled_;  // ranks that said they are stalled: what each waits for
  std::set<int> finished_ranks_;
  std::uint64_t stall_epoch_ = 0;       // counts changes: a stall is confirmed only without one
  bool ended_ = false, collecting_ = false;
};

caf::behavior driver_actor(caf::stateful_actor<driver_state>* self,
                           std::shared_ptr<driver_spec> spec) {
  return self->state.make_behavior(std::move(spec));
}

}  // namespace

caf::actor spawn_driver(caf::actor_system& sys, std::shared_ptr<driver_spec> spec) {
  // Across processes every actor of a run is pooled (the driver, reducers and ranks, here and on
  // the workers): with CAF 0.17.6 a detached actor that remote nodes have referenced can stay
  // undestroyed after it quit, and ~actor_system then waits for its thread forever (seen with
  // the driver, reducers, and ranks on a worker; the reference's holder is not found).
  if (!spec->workers.empty()) return sys.spawn(driver_actor, std::move(spec));
  return sys.spawn<caf::detached>(driver_actor, std::move(spec));
}

}  // namespace pipeworks
