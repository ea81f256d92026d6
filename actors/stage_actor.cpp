// The stage actor's state and behavior: deliver each message to the executor, run it inside the
// rank's oneTBB arena, route what it sends, flush the trace in batches, and report a failure to
// the driver. A rank whose fault injection kills it quits without a word.
#include "actors/stage_actor.hpp"

#include <tbb/task_arena.h>

#include <exception>
#include <string>
#include <utility>

#include "actors/messages.hpp"

namespace pipeworks {
namespace {

constexpr std::size_t trace_flush_events = 256;  // a batch to the tracer every this many events

template <class T>
class stage_state {
 public:
  static inline const char* name = "pipeworks.stage";

  explicit stage_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(std::shared_ptr<stage_spec<T>> spec) {
    board_ = spec->board;
    replica_ = spec->setup.replica;
    rank_ = spec->setup.replica * spec->setup.plan->params.stages + spec->setup.device;
    record_trace_ = spec->setup.record_trace;
    try {
      arena_ = std::make_unique<tbb::task_arena>(spec->threads);
      exec_ = std::make_unique<stage_executor<T>>(*spec->net, std::move(spec->setup),
                                                  std::move(spec->initial),
                                                  [this](outgoing out) { route(std::move(out)); });
    } catch (const std::exception& e) {
      setup_error_ = describe() + ": cannot set up the executor: " + e.what();
    }
    // A rank never outlives its driver, even one that ends before wiring the ranks.
    driver_ = spec->driver.address();
    self_->monitor(spec->driver);
    self_->set_down_handler([this](caf::down_msg& dm) {
      if (dm.source == driver_) self_->quit(dm.reason);
    });
    return {
        [this](const rank_wiring& w) { start(w); },
        [this](const runtime_box& b) { receive(b); },
    };
  }

 private:
  void start(const rank_wiring& w) {
    peers_ = w;
    wired_ = true;
    if (!setup_error_.empty()) return fail(setup_error_);
    try {
      exec_->start();
    } catch (const std::exception& e) {
      return fail(describe() + ": start failed: " + e.what());
    }
    progress();
  }

  void receive(const runtime_box& b) {
    if (stopped_ || finished_ || !b.msg) return;
    message msg = std::move(*b.msg);  // this box's only receiver: the tensors move, no copy
    if (!exec_) return;               // the setup error is reported once wired
    try {
      exec_->deliver(std::move(msg));
    } catch (const std::exception& e) {
      return fail(describe() + ": a message could not be delivered: " + e.what());
    }
    progress();
  }

  // Runs the program as far as the messages allow, then reports what came of it.
  void progress() {
    if (stopped_ || finished_ || !wired_) return;
    result<bool> r = false;
    try {
      arena_->execute([&] { r = exec_->run(); });
    } catch (const std::exception& e) {
      r = make_error(describe() + " at " + at_text() + ": " + e.what());
    }
    board_->set(rank_, exec_->current());
    if (exec_->kill_requested()) {  // dies like a crashed rank: the driver learns it by monitoring
      stopped_ = true;
      self_->quit(caf::exit_reason::kill);
      return;
    }
    if (!r) return fail(r.message());
    flush_trace(false);
    if (*r) finish();
  }

  void finish() {
    finished_ = true;
    flush_trace(true);
    self_->send(peers_.driver, rank_done{rank_, exec_->stats()});
  }

  void fail(const std::string& why) {
    stopped_ = true;
    if (peers_.driver) self_->send(peers_.driver, stage_failure{why});
    self_->quit(caf::sec::runtime_error);
  }

  void flush_trace(bool last) {
    if (!record_trace_ || !peers_.tracer) return;
    for (auto& e : exec_->take_events()) pending_.push_back(std::move(e));
    if (!pending_.empty() && (last || pending_.size() >= trace_flush_events)) {
      self_->send(peers_.tracer, box(trace_batch{std::move(pending_)}));
      pending_.clear();
    }
    if (last) self_->send(peers_.tracer, trace_done{rank_});
  }

  // The executor's sink: straight to the receiving actor, the payload moved into a box.
  void route(outgoing out) {
    const caf::actor* to = nullptr;
    const auto i = static_cast<std::size_t>(out.to.index);
    switch (out.to.kind) {
      case endpoint_kind::rank:
        if (i < peers_.ranks.size()) to = &peers_.ranks[i];
        break;
      case endpoint_kind::reducer:
        if (i < peers_.reducers.size()) to = &peers_.reducers[i];
        break;
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
    self_->send(*to, box(std::move(out.msg)));
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
  std::unique_ptr<tbb::task_arena> arena_;
  std::unique_ptr<stage_executor<T>> exec_;
  std::shared_ptr<rank_board> board_;
  rank_wiring peers_;
  caf::actor_addr driver_;
  std::vector<timeline_event> pending_;
  std::string setup_error_;
  int rank_ = 0, replica_ = 0;
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

template caf::actor spawn_stage<float>(caf::actor_system&, bool, std::shared_ptr<stage_spec<float>>);
template caf::actor spawn_stage<double>(caf::actor_system&, bool,
                                        std::shared_ptr<stage_spec<double>>);

}  // namespace pipeworks
