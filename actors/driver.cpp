// The driver's state and behavior: inputs dealt per step and cached until consumed, per-step
// tallies of losses and replica 0's step reports, failure detection and the end of the run.
#include "actors/driver.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "actors/messages.hpp"
#include "runtime/exec/data_split.hpp"

namespace pipeworks {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds(clock_type::duration d) { return std::chrono::duration<double>(d).count(); }

class driver_state {
 public:
  static inline const char* name = "pipeworks.driver";

  explicit driver_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(std::shared_ptr<driver_spec> spec) {
    spec_ = std::move(spec);
    const schedule& plan = *spec_->plan;
    p_ = plan.params.stages;
    m_ = plan.params.microbatches;
    w_ = plan.params.replicas;
    V_ = plan.virtual_stages;
    steps_ = plan.params.steps;
    self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
    return {
        [this](run_atom, const caf::actor& partition) {
          caller_ = caf::actor_cast<caf::actor>(self_->current_sender());
          plan_with(partition);
        },
        [this](const runtime_box& b) { guarded([&] { on_box(b); }); },
        [this](const rank_done& d) { guarded([&] { on_rank_done(d); }); },
        [this](const stage_failure& f) { fail(f.message); },
        [this](poll_atom) { guarded([&] { poll(); }); },
    };
  }

 private:
  // Everything one step needs before it is complete.
  struct step_tally {
    int reports = 0;  // replica 0's virtual stages that made this version
    std::vector<param_snapshot> weights;
    double grad_sq = 0, lr = 0;
    int losses = 0;
    double loss_sum = 0;
    std::int64_t samples = 0;
  };
  // A step's microbatches, [replica][k], handed out (moved) as the ranks ask for them.
  struct dealt_step {
    std::vector<std::vector<microbatch>> parts;
    int left = 0;
  };
  enum class who_kind { rank, reducer, tracer, partition };
  struct who {
    who_kind kind;
    int index;
  };

  template <class F>
  void guarded(F&& f) {
    if (ended_) return;
    try {
      f();
    } catch (const std::exception& e) {
      fail(std::string("the driver failed: ") + e.what());
    }
  }

  void plan_with(const caf::actor& partition) {
    watch(partition, {who_kind::partition, 0});
    self_->request(partition, caf::infinite, plan_atom::value)
        .then([this](const pipeline_wiring& w) { guarded([&] { wire(w); }); },
              [this](caf::error& e) {
                fail("planning the pipeline failed: " + error_text(self_->system(), e));
              });
  }

  void wire(const pipeline_wiring& w) {
    boundaries_ = w.boundaries;
    latest_ = w.initial;
    ranks_ = w.ranks;
    reducers_ = w.reducers;
    stats_.resize(static_cast<std::size_t>(V_));
    for (int s = 0; s < V_; ++s) stats_[static_cast<std::size_t>(s)].stage = s;
    for (std::size_t r = 0; r < ranks_.size(); ++r) watch(ranks_[r], {who_kind::rank, static_cast<int>(r)});
    for (std::size_t s = 0; s < reducers_.size(); ++s)
      if (reducers_[s]) watch(reducers_[s], {who_kind::reducer, static_cast<int>(s)});
    if (spec_->tracer) watch(spec_->tracer, {who_kind::tracer, 0});
    last_step_end_ = clock_type::now();
    const rank_wiring peers{ranks_, reducers_, caf::actor_cast<caf::actor>(self_), spec_->tracer};
    for (const auto& r : ranks_) self_->send(r, peers);
    if (spec_->stop_requested) self_->delayed_send(self_, spec_->poll_interval, poll_atom::value);
  }

  void watch(const caf::actor& a, who w) {
    watched_.emplace(a.address(), w);
    self_->monitor(a);
  }

  void on_box(const runtime_box& b) {
    if (!b.msg) return;
    message msg = std::move(*b.msg);
    if (auto* req = std::get_if<input_request>(&msg)) return on_input(*req);
    if (auto* loss = std::get_if<loss_report>(&msg)) return on_loss(*loss);
    if (auto* rep = std::get_if<step_report>(&msg)) return on_step_report(std::move(*rep));
    fail("the driver received a message meant for another actor (variant index " +
         std::to_string(msg.index()) + ")");
  }

  void on_input(const input_request& req) {
    const std::int64_t t = req.microbatch / m_;
    const int k = req.microbatch % m_;
    if (req.replica < 0 || req.replica >= w_ || req.microbatch < 0 || t >= steps_)
      return fail("replica " + std::to_string(req.replica) + " asked for microbatch " +
                  std::to_string(req.microbatch) + ", outside the run's " +
                  std::to_string(steps_ * m_) + " per replica");
    auto it = inputs_.find(t);
    if (it == inputs_.end()) {
      if (t < dealt_) return fail("microbatch " + std::to_string(req.microbatch) + " of replica " +
                                  std::to_string(req.replica) + " was asked for twice");
      auto mb = spec_->data(t);
      if (!mb) return fail("the data for step " + std::to_string(t + 1) + ": " + mb.message());
      const std::int64_t B = mb->inputs.rank() > 0 ? mb->inputs.dim(0) : 0;
      auto parts = deal_microbatches(*mb, w_, m_);
      if (!parts)
        return fail("the minibatch of step " + std::to_string(t + 1) + ": " + parts.message());
      tallies_[t].samples = B;
      dealt_ = std::max(dealt_, t + 1);
      it = inputs_.emplace(t, dealt_step{std::move(*parts), w_ * m_}).first;
    }
    auto& slot = it->second.parts.at(static_cast<std::size_t>(req.replica)).at(static_cast<std::size_t>(k));
    activation_msg a;
    a.replica = req.replica;
    a.stage = 0;
    a.microbatch = req.microbatch;
    a.data = std::move(slot.input);
    a.ctx = std::move(slot.ctx);
    const int rank = spec_->plan->rank_of(req.replica, spec_->plan->device_of.at(0));
    self_->send(ranks_.at(static_cast<std::size_t>(rank)), box(std::move(a)));
    if (--it->second.left == 0) inputs_.erase(it);
  }

  void on_loss(const loss_report& r) {
    if (!std::isfinite(r.loss))
      return fail("stage " + std::to_string(V_ - 1) + ", replica " + std::to_string(r.replica) +
                  ", action " + to_string(action{V_ - 1, action_kind::forward, r.microbatch}) +
                  ": the loss is not finite (" + std::to_string(r.loss) + ")");
    step_tally& t = tallies_[r.microbatch / m_];
    ++t.losses;
    t.loss_sum += r.loss;
    complete_steps();
  }

  void on_step_report(step_report rep) {
    if (rep.replica != 0) return;  // every replica makes the same version; replica 0 speaks
    if (rep.stage < 0 || rep.stage >= V_) return fail("a step report for unknown stage " + std::to_string(rep.stage));
    step_tally& t = tallies_[rep.step];
    t.weights.resize(static_cast<std::size_t>(V_));
    auto& slot = t.weights[static_cast<std::size_t>(rep.stage)];
    if (slot) return fail("stage " + std::to_string(rep.stage) + " reported step " + std::to_string(rep.step + 1) + " twice");
    slot = std::move(rep.weights);
    ++t.reports;
    t.grad_sq += rep.grad_sq;
    t.lr = rep.lr;
    complete_steps();
  }

  // Emits every step, in order, whose stages all reported and whose losses all arrived.
  void complete_steps() {
    for (auto it = tallies_.find(steps_done_); it != tallies_.end() && !ended_;
         it = tallies_.find(steps_done_)) {
      step_tally& t = it->second;
      if (t.reports < V_ || t.losses < w_ * m_) return;
      const auto now = clock_type::now();
      step_metrics s;
      s.step = steps_done_ + 1;
      s.steps = steps_;
      s.loss = t.loss_sum / (w_ * m_);
      s.lr = t.lr;
      s.grad_norm = std::sqrt(t.grad_sq);
      s.step_s = seconds(now - last_step_end_);
      s.samples_per_s = s.step_s > 0 ? static_cast<double>(t.samples) / s.step_s : 0;
      s.elapsed_s = seconds(now - spec_->start);
      samples_ += t.samples;
      s.samples = samples_;
      last_step_end_ = now;
      latest_ = std::move(t.weights);
      last_ = s;
      ++steps_done_;
      tallies_.erase(it);
      if (spec_->on_step) spec_->on_step(s);
      if (spec_->on_weights) spec_->on_weights(std::make_shared<const model_weights>(latest_));
    }
  }

  void on_rank_done(const rank_done& d) {
    for (const stage_stats& st : d.stats) {
      if (st.stage < 0 || st.stage >= V_) continue;
      merge_max(stats_[static_cast<std::size_t>(st.stage)], st);
    }
    if (++ranks_done_ < static_cast<int>(ranks_.size())) return;
    if (steps_done_ < steps_)
      return fail("every rank finished its program, but only " + std::to_string(steps_done_) +
                  " of " + std::to_string(steps_) + " steps were reported complete");
    if (!spec_->tracer) return finish(false, nullptr);
    self_->request(spec_->tracer, std::chrono::seconds(10), collect_atom::value)
        .then([this](const timeline_box& t) { finish(false, t.trace); },
              [this](caf::error& e) {
                fail("collecting the trace failed: " + error_text(self_->system(), e));
              });
  }

  void poll() {
    if (spec_->stop_requested()) return finish(true, nullptr);
    self_->delayed_send(self_, spec_->poll_interval, poll_atom::value);
  }

  void on_down(const caf::down_msg& dm) {
    if (ended_) return;
    auto it = watched_.find(dm.source);
    if (it == watched_.end()) return;
    const std::string why = dm.reason ? self_->system().render(dm.reason) : "it exited normally";
    const who w = it->second;
    if (w.kind == who_kind::reducer)
      return fail("the reducer of stage " + std::to_string(w.index) + " died (" + why + ")");
    if (w.kind == who_kind::tracer) return fail("the tracer died (" + why + ")");
    if (w.kind == who_kind::partition) {
      if (dm.reason) fail("the partition actor died (" + why + ")");
      return;  // it quits once it has answered
    }
    const int replica = w.index / p_, device = w.index % p_;
    const std::optional<action> at = spec_->board ? spec_->board->at(w.index) : std::nullopt;
    std::string stage;
    if (at) {
      stage = "stage " + std::to_string(at->stage);
    } else {
      std::vector<int> mine;
      for (int s = 0; s < V_; ++s)
        if (spec_->plan->device_of[static_cast<std::size_t>(s)] == device) mine.push_back(s);
      stage = mine.size() == 1 ? "stage " : "stages ";
      for (std::size_t k = 0; k < mine.size(); ++k) stage += (k ? "," : "") + std::to_string(mine[k]);
    }
    fail(stage + ", replica " + std::to_string(replica) + " (rank " + std::to_string(w.index) +
         ")" + (at ? ", action " + to_string(*at) : std::string(", action unknown")) +
         ": the stage actor died (" + why + ")");
  }

  void fail(const std::string& why) {
    if (ended_) return;
    auto o = outcome(false);
    o->run_status = make_error(why);
    end(std::move(o));
  }

  void finish(bool interrupted, std::shared_ptr<timeline> trace) {
    if (ended_) return;
    auto o = outcome(interrupted);
    if (trace) o->trace = std::move(*trace);
    end(std::move(o));
  }

  std::shared_ptr<driver_outcome> outcome(bool interrupted) const {
    auto o = std::make_shared<driver_outcome>();
    o->interrupted = interrupted;
    o->boundaries = boundaries_;
    o->weights = latest_;
    o->stages = stats_;
    o->last = last_;
    o->steps_done = steps_done_;
    return o;
  }

  // Stops every actor of the run, answers the caller and quits.
  void end(std::shared_ptr<driver_outcome> o) {
    ended_ = true;
    inputs_.clear();
    tallies_.clear();
    for (const auto& r : ranks_) self_->send_exit(r, caf::exit_reason::user_shutdown);
    for (const auto& r : reducers_)
      if (r) self_->send_exit(r, caf::exit_reason::user_shutdown);
    if (spec_->tracer) self_->send_exit(spec_->tracer, caf::exit_reason::user_shutdown);
    if (caller_) self_->send(caller_, outcome_box{std::move(o)});
    self_->quit();
  }

  caf::event_based_actor* self_;
  std::shared_ptr<driver_spec> spec_;
  int p_ = 1, m_ = 1, w_ = 1, V_ = 1;
  std::int64_t steps_ = 1;
  caf::actor caller_;
  std::vector<caf::actor> ranks_, reducers_;
  std::map<caf::actor_addr, who> watched_;
  std::vector<int> boundaries_;
  model_weights latest_;
  std::vector<stage_stats> stats_;
  std::map<std::int64_t, dealt_step> inputs_;
  std::map<std::int64_t, step_tally> tallies_;
  std::int64_t dealt_ = 0;  // steps whose minibatch has been dealt
  std::int64_t steps_done_ = 0, samples_ = 0;
  step_metrics last_;
  clock_type::time_point last_step_end_;
  int ranks_done_ = 0;
  bool ended_ = false;
};

caf::behavior driver_actor(caf::stateful_actor<driver_state>* self,
                           std::shared_ptr<driver_spec> spec) {
  return self->state.make_behavior(std::move(spec));
}

}  // namespace

caf::actor spawn_driver(caf::actor_system& sys, std::shared_ptr<driver_spec> spec) {
  return sys.spawn<caf::detached>(driver_actor, std::move(spec));
}

}  // namespace pipeworks
