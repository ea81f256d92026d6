// The stage actor's state and behavior: deliver each message to the executor, run it (inside the
// executor's device context), route what it sends, write its checkpoint snapshots in the background,
// flush the trace in batches, report a failure to the driver, and tell it when the rank has waited
// long with nothing arriving (what it waits for). A rank whose fault injection kills it quits
// without a word.
#include "actors/stage_actor.hpp"
#include "base/exception_text.hpp"


#include <exception>
#include <filesystem>
#include <string>
#include <utility>

#include "actors/type_ids.hpp"
#include "runtime/checkpoint/background_writer.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/rank_file.hpp"
#include "runtime/checkpoint/rank_identity.hpp"

namespace pipeworks {

namespace {

constexpr std::size_t trace_flush_events = 256;  // a batch to the tracer every this many events

template <class T>
class stage_state {
 public:
  static inline const char* name = "pipeworks.stage";

  explicit stage_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(std::shared_ptr<stage_spec<T>> spec) {
    keep_ = spec->keep;  // the spec goes once the actor runs; the model must not
    link_ = spec->link;
    board_ = spec->board;
    replica_ = spec->setup.replica;
    rank_ = spec->setup.replica * spec->setup.plan->params.stages + spec->setup.device;
    record_trace_ = spec->setup.record_trace;
    microbatches_ = spec->setup.train.microbatches;
    checkpoint_dir_ = spec->checkpoint_dir;
    own_checkpoint_dir_ = spec->own_checkpoint_dir;
    identity_ = spec->identity;
    try {
      spec->setup.threads = spec->threads;
      auto sink = [this](outgoing out) { route(std::move(out)); };
      if (!spec->resume.path.empty()) {
        auto state = load_rank_checkpoint(spec->resume_dir, spec->resume, *spec->net,
                                          spec->setup.boundaries, spec->identity,
                                          spec->setup.first_step);
        if (!state) throw pipeworks_error(state.message());
        exec_ = std::make_unique<stage_executor<T>>(*spec->net, std::move(spec->setup),
                                                    std::move(*state), sink);
      } else {
        exec_ = std::make_unique<stage_executor<T>>(*spec->net, std::move(spec->setup),
                                                    std::move(spec->initial), sink);
      }
    } catch (const std::exception& e) {
      setup_error_ = describe() + ": cannot set up the executor: " + exception_text(e);
    }
    // A rank never outlives its driver, even one that ends before wiring the ranks.
    driver_ = spec->driver;
    self_->monitor(spec->driver);
    self_->set_down_handler([this](caf::down_msg& dm) {
      if (dm.source == driver_.address()) self_->quit(dm.reason);
    });
    return {
        [this](const rank_wiring& w) { start(w); },
        [this](activation_msg& m) { receive(std::move(m)); },
        [this](gradient_msg& m) { receive(std::move(m)); },
        [this](credit_msg m) { receive(m); },
        [this](reduce_result& m) { receive(std::move(m)); },
        [this](norm_result m) { receive(m); },
        [this](marker_msg m) { receive(m); },
        [this](stall_atom) { on_stall_tick(); },
        [this](weights_atom) {
          if (exec_ && !stopped_) wire_send(link_, self_, driver_, report(false));
        },
        [this](wire_msg& w) {
          active();
          if (link_) link_->accept(self_, std::move(w), describe());
        },
    };
  }

 private:
  void start(const rank_wiring& w) {
    peers_ = w;
    wired_ = true;
    active();
    self_->delayed_send(self_, stall_tick, stall_atom::value);
    if (!setup_error_.empty()) return fail(setup_error_);
    try {
      exec_->start();
    } catch (const std::exception& e) {
      return fail(describe() + ": start failed: " + exception_text(e));
    }
    progress();
  }

  // A finished rank still takes messages: a checkpoint whose cut it passed near the end of its
  // program completes only when every peer's marker has come (and records what the peer sent
  // before it, credits included), which can be after the rank's last action.
  void receive(message msg) {
    if (stopped_ || !exec_) return;  // a setup error is reported once wired
    active();
    try {
      exec_->deliver(std::move(msg));  // the tensors move, no copy
    } catch (const std::exception& e) {
      return fail(describe() + ": a message could not be delivered: " + exception_text(e));
    }
    progress();
  }

  // Runs the program as far as the messages allow, then reports what came of it.
  void progress() {
    if (stopped_ || !wired_) return;
    result<bool> r = false;
    try {
      r = exec_->run();  // inside the rank's device context
    } catch (const std::exception& e) {
      r = make_error(describe() + " at " + at_text() + ": " + exception_text(e));
    }
    board_->set(rank_, exec_->current());
    if (exec_->kill_requested()) {  // dies like a crashed rank: the driver learns it by monitoring
      stopped_ = true;
      self_->quit(caf::exit_reason::kill);
      return;
    }
    if (!r) return fail(r.message());
    active();  // an action may have run long: the wait is counted from its end
    for (rank_state& snap : exec_->take_snapshots()) write_checkpoint(std::move(snap));
    if (finished_) return;  // reported once; a late marker only completes a snapshot
    flush_trace(false);
    if (*r) finish();
  }

  // Something arrived or ran: the rank is not stalled (and says so if it had said it was).
  void active() {
    last_active_ = std::chrono::steady_clock::now();
    if (!stall_reported_) return;
    stall_reported_ = false;
    self_->send(driver_, rank_stalled{rank_, false, ""});
  }

  // Every stall_tick while the rank runs its program: once it has waited stall_after with
  // nothing arriving and nothing to run, the driver hears what it waits for.
  void on_stall_tick() {
    if (stopped_ || finished_ || !exec_) return;  // no more ticks
    if (!stall_reported_ && std::chrono::steady_clock::now() - last_active_ >= stall_after) {
      stall_reported_ = true;
      self_->send(driver_, rank_stalled{rank_, true, waiting_text()});
    }
    self_->delayed_send(self_, stall_tick, stall_atom::value);
  }

  // "at step 16, 1RECV_F63: waiting for the activation from stage 0".
  std::string waiting_text() const {
    const auto a = exec_->current();
    std::string step;
    if (a && a->microbatch >= 0 && microbatches_ > 0)
      step = "at step " + std::to_string(a->microbatch / microbatches_ + 1) + ", ";
    else if (a)
      step = "at step " + std::to_string(exec_->steps_done(a->stage) + 1) + ", ";
    return step + exec_->waiting_for();
  }

  // The snapshot goes to disk on the writer's thread; the driver hears when it is durable.
  void write_checkpoint(rank_state snap) {
    // One file written and one waiting at most: a faster --save-every waits for the disk.
    if (!writer_) writer_ = std::make_unique<background_writer>(1);
    auto state = std::make_shared<rank_state>(std::move(snap));
    const std::string dir = step_dir(checkpoint_dir_, state->step);
    const std::string file = rank_file_name(rank_);
    caf::actor driver = driver_;
    const int rank = rank_;
    const metadata_map identity = identity_;
    const std::string where = own_checkpoint_dir_ ? dir : std::string();
    writer_->post([state, dir, file, driver, rank, identity, where] {
      auto written = [&]() -> result<written_file> {
        if (status made = make_own_step_dir(dir); !made) return make_error(made.message());
        return write_rank_file((std::filesystem::path(dir) / file).string(), *state, identity);
      }();
      if (!written) {
        caf::anon_send(driver, stage_failure{"rank " + std::to_string(rank) +
                                             ": writing its checkpoint of step " +
                                             std::to_string(state->step) + " failed: " +
                                             written.message()});
        return;
      }
      caf::anon_send(driver,
                     checkpoint_written{rank, state->step, file, written->bytes, written->sha256, where});
    });
  }

  rank_done report(bool finished) const {
    rank_done d;
    d.rank = rank_;
    d.finished = finished;
    d.stats = exec_->stats();
    d.stages = exec_->stages();
    for (int s : d.stages) {
      d.steps.push_back(exec_->steps_done(s));
      if (replica_ == 0) d.weights.push_back(exec_->weights(s));
    }
    return d;
  }

  void finish() {
    finished_ = true;
    flush_trace(true);
    wire_send(link_, self_, peers_.driver, report(true));  // after its last reports, in order
  }

  void fail(const std::string& why) {
    stopped_ = true;
    self_->send(driver_, stage_failure{why});
    self_->quit(caf::sec::runtime_error);
  }

  void flush_trace(bool last) {
    if (!record_trace_ || !peers_.tracer) return;
    for (auto& e : exec_->take_events()) pending_.push_back(std::move(e));
    if (!pending_.empty() && (last || pending_.size() >= trace_flush_events)) {
      self_->send(peers_.tracer, trace_batch{std::move(pending_)});
      pending_.clear();
    }
    if (last) self_->send(peers_.tracer, trace_done{rank_});
  }

  // The executor's sink: straight to the receiving actor, the payload moved into the message.
  void route(outgoing out) {
    const caf::actor* to = nullptr;
    const auto i = static_cast<std::size_t>(out.to.index);
    switch (out.to.kind) {
      case endpoint_kind::rank:
        if (i < peers_.ranks.size()) to = &peers_.ranks[i];
        break;
      case endpoint_kind::reducer: {
        // Across processes each member of the reduce (a replica, or with dualpipe's routes, route
        // r of replica q as r * w + q, which the request names) has its own share of each
        // stage's all-reduce.
        int member = replica_;
        if (const auto* q = std::get_if<reduce_request>(&out.msg)) member = q->replica;
        const std::size_t k = peers_.shard_stride > 0
                                  ? static_cast<std::size_t>(member * peers_.shard_stride) + i
                                  : i;
        if (k < peers_.reducers.size()) to = &peers_.reducers[k];
        break;
      }
      case endpoint_kind::driver:
        to = &peers_.driver;
        break;
      case endpoint_kind::tracer:
        if (!peers_.tracer) return;  // no trace is recorded
        to = &peers_.tracer;
        break;
    }
    if (to == nullptr || !*to)
      throw pipeworks_error("no actor for endpoint " + std::to_string(static_cast<int>(out.to.kind)) +
                            "/" + std::to_string(out.to.index));
    std::visit([&](auto& m) { wire_send(link_, self_, *to, std::move(m)); }, out.msg);
  }

  std::string describe() const {
    std::string s = "rank " + std::to_string(rank_) + " (replica " + std::to_string(replica_);
    if (exec_) {
      const auto st = exec_->stages();
      s += st.size() == 1 ? ", stage " : ", stages ";
      for (std::size_t k = 0; k < st.size(); ++k) s += (k ? "," : "") + std::to_string(st[k]);
    }
    return s + ")";
  }
  std::string at_text() const {
    auto a = exec_ ? exec_->current() : std::nullopt;
    return a ? "action " + to_string(*a) : std::string("the end of its program");
  }

  caf::event_based_actor* self_;
  std::shared_ptr<const void> keep_;  // first: what the executor's model lives in outlives it
  std::shared_ptr<wire_link> link_;
  std::unique_ptr<stage_executor<T>> exec_;
  std::unique_ptr<background_writer> writer_;  // joined before the executor goes
  std::shared_ptr<rank_board> board_;
  rank_wiring peers_;
  caf::actor driver_;
  std::vector<timeline_event> pending_;
  std::string setup_error_, checkpoint_dir_;
  bool own_checkpoint_dir_ = false;
  metadata_map identity_;
  int rank_ = 0, replica_ = 0, microbatches_ = 0;
  static constexpr std::chrono::seconds stall_tick{2};
  std::chrono::steady_clock::time_point last_active_ = std::chrono::steady_clock::now();
  bool stall_reported_ = false;
  bool record_trace_ = false, wired_ = false, stopped_ = false, finished_ = false;
};

template <class T>
caf::behavior stage_actor(caf::stateful_actor<stage_state<T>>* self,
                          std::shared_ptr<stage_spec<T>> spec) {
  return self->state.make_behavior(std::move(spec));
}

}  // namespace

template <class T>
caf::actor spawn_stage(caf::actor_system& sys, bool detached, std::shared_ptr<stage_spec<T>> spec) {
  if (detached) return sys.spawn<caf::detached>(stage_actor<T>, std::move(spec));
  return sys.spawn(stage_actor<T>, std::move(spec));
}

template <class T>
std::shared_ptr<stage_spec<T>> make_stage_spec(const lowered_run& run, int rank, const model<T>* net,
                                               std::chrono::steady_clock::time_point start,
                                               const pipeline_hooks& hooks,
                                               std::shared_ptr<rank_board> board, caf::actor driver) {
  const run_plan& plan = run.plan;
  auto st = std::make_shared<stage_spec<T>>();
  st->net = net;
  st->threads = plan.threads_per_stage;
  st->board = std::move(board);
  st->driver = std::move(driver);
  st->checkpoint_dir = plan.checkpoint.dir;
  st->identity = rank_identity(plan, rank);
  executor_setup& es = st->setup;
  es = rank_setup(run, rank);
  es.clock = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  es.record_trace = hooks.record_trace;
  es.fault = hooks.fault;
  if (hooks.sleeps) es.sleep = [sleeps = hooks.sleeps](double s) { sleeps->sleep(s); };
  return st;
}

template std::shared_ptr<stage_spec<float>> make_stage_spec<float>(
    const lowered_run&, int, const model<float>*, std::chrono::steady_clock::time_point,
    const pipeline_hooks&, std::shared_ptr<rank_board>, caf::actor);
template std::shared_ptr<stage_spec<double>> make_stage_spec<double>(
    const lowered_run&, int, const model<double>*, std::chrono::steady_clock::time_point,
    const pipeline_hooks&, std::shared_ptr<rank_board>, caf::actor);

template caf::actor spawn_stage<float>(caf::actor_system&, bool, std::shared_ptr<stage_spec<float>>);
template caf::actor spawn_stage<double>(caf::actor_system&, bool,
                                        std::shared_ptr<stage_spec<double>>);
}  // namespace pipeworks
