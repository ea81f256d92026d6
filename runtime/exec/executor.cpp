// stage_executor<T>: walks one rank's lowered program. Each action waits for its input (an
// activation, a gradient, a credit, a reduced gradient) and then runs; see executor.hpp.
#include "runtime/exec/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <thread>

#include <tbb/task_arena.h>
#include <time.h>

#include "runtime/exec/executor_state.hpp"

namespace pipeworks {
namespace {

// Seconds of CPU time the calling thread has used.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

template <class T>
struct stage_executor<T>::impl {
  const model<T>& model_;
  executor_setup setup;
  sink send;
  const schedule& plan;
  const program& prog;
  int p, S, m, w, rank;
  std::size_t pc = 0;
  std::vector<virtual_stage_state<T>> stages;  // this rank's virtual stages, in stage order
  std::vector<int> index_of;                   // virtual stage -> index in stages, or -1
  std::map<message_key, activation_msg> inbox_f;
  std::map<message_key, gradient_msg> inbox_b;
  std::map<message_key, activation_msg> out_f;  // F(s,k)'s output, for SEND_F(s,k)
  std::map<message_key, tensor> out_b;          // B(s,k)'s input gradient, for SEND_B(s,k)
  std::map<std::pair<int, bool>, int> credits;  // (consumer stage, forward) -> sends left
  std::vector<int> stage0_inputs;               // microbatches of virtual stage 0's F's, in order
  int next_input = 0;                           // index into stage0_inputs of the next request
  std::string bad_message;                      // set by deliver(); run() reports it
  int peak_buffered = 0;
  int rank_peak_inflight = 0;
  std::int64_t rank_peak_bytes = 0;
  double wait_start = -1;                       // when the current action started waiting
  bool killed = false;
  std::vector<timeline_event> events;
  bool natural_latest;  // the rule is "the latest version when F runs": checked as it runs
  bool throttled = false;  // setup.speed < 1: compute actions are stretched to t / speed
  bool cpu_timed = false;  // the current compute action is measured in CPU time (begin_compute)
  double cpu_t0 = 0;       // its CPU-time start

  impl(const model<T>& mdl, executor_setup su, std::vector<param_set> initial, sink out)
      : model_(mdl), setup(std::move(su)), send(std::move(out)), plan(*setup.plan),
        prog(plan.programs.at(plan.rank_of(setup.replica, setup.device))) {
    p = plan.params.stages;
    S = plan.virtual_stages;
    m = plan.params.microbatches;
    w = plan.params.replicas;
    rank = plan.rank_of(setup.replica, setup.device);
    if (setup.replica < 0 || setup.replica >= w || setup.device < 0 || setup.device >= p)
      throw pipeworks_error("executor: replica " + std::to_string(setup.replica) + ", device " +
                            std::to_string(setup.device) + " is not in the schedule's " +
                            std::to_string(w) + " replicas of " + std::to_string(p) + " devices");
    if (!(setup.speed > 0.0 && setup.speed <= 1.0))
      throw pipeworks_error("executor: the device speed " + std::to_string(setup.speed) +
                            " of rank " + std::to_string(rank) +
                            " is not in (0, 1] (1 is one full core of this machine)");
    throttled = setup.speed < 1.0;
    if (throttled && !setup.clock) {
      const auto start = std::chrono::steady_clock::now();
      setup.clock = [start] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
    }
    if (throttled && !setup.sleep)
      setup.sleep = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
    natural_latest = is_flush(plan.kind) || plan.kind == schedule_kind::pipedream ||
                     plan.custom_programs;
    if (static_cast<int>(setup.boundaries.size()) != S + 1)
      throw pipeworks_error("executor: " + std::to_string(setup.boundaries.size()) +
                            " boundaries for " + std::to_string(S) + " virtual stages");
    index_of.assign(S, -1);
    std::size_t next = 0;
    for (int s = 0; s < S; ++s) {
      if (plan.device_of[s] != setup.device) continue;
      if (next >= initial.size())
        throw pipeworks_error("executor: rank " + std::to_string(rank) +
                              " got too few parameter sets for its virtual stages");
      virtual_stage_state<T> st;
      st.stage = s;
      st.stats.stage = s;
      st.grads = initial[next].zeros_like();
      st.optimizer.emplace(initial[next], setup.train);
      st.versions[0] = std::make_shared<const param_set>(std::move(initial[next]));
      st.ref(0);
      index_of[s] = static_cast<int>(stages.size());
      stages.push_back(std::move(st));
      ++next;
    }
    for (const action& a : prog)
      if (a.kind == action_kind::forward && a.stage == 0) stage0_inputs.push_back(a.microbatch);
    // For each version, the last F that names it: a version no later F names can go.
    for (auto& st : stages) {
      std::size_t i = 0;
      for (const action& a : prog)
        if (a.kind == action_kind::forward && a.stage == st.stage)
          st.last_named[plan.versions.at(st.stage).at(a.microbatch).forward] = ++i;
      st.note_peaks();
    }
  }

  // The clock feeds the trace and throttling: without either, no action pays for reading it.
  double now() const {
    return (setup.record_trace || throttled) && setup.clock ? setup.clock() : 0.0;
  }
  double cpu_seconds() const { return setup.cpu_clock ? setup.cpu_clock() : thread_cpu_seconds(); }
  // Starts a compute action; returns its start for the trace. A throttled rank whose kernels all
  // run on this thread (an arena of one thread), or that was given a cpu_clock, also notes its
  // CPU time: end_compute then measures the action in CPU time (see executor_setup::speed).
  double begin_compute() {
    const double t0 = now();
    if (throttled) {
      cpu_timed = setup.cpu_clock || tbb::this_task_arena::max_concurrency() == 1;
      if (cpu_timed) cpu_t0 = cpu_seconds();
    }
    return t0;
  }
  // Ends a compute action that began at t0 (begin_compute). A throttled rank first sleeps
  // (1/speed - 1) times what the action took, so it lasts t/speed. Returns the end the trace
  // records.
  double end_compute(double t0) {
    if (!throttled) return now();
    const double took = cpu_timed ? cpu_seconds() - cpu_t0 : now() - t0;
    const double extra = (1.0 / setup.speed - 1.0) * std::max(0.0, took);
    if (extra > 0) setup.sleep(extra);
    return now();
  }
  int rank_of_stage(int s) const { return plan.rank_of(setup.replica, plan.device_of[s]); }
  virtual_stage_state<T>& state(int s) {
    if (s < 0 || s >= S || index_of[s] < 0)
      throw pipeworks_error("rank " + std::to_string(rank) + " does not run virtual stage " +
                            std::to_string(s));
    return stages[static_cast<std::size_t>(index_of[s])];
  }
  bool runs(int s) const { return s >= 0 && s < S && index_of[s] >= 0; }
  int total() const { return plan.total_microbatches(); }

  void emit(endpoint_kind kind, int index, message msg) {
    send(outgoing{endpoint{kind, index}, std::move(msg)});
  }

  void record(stream_kind stream, const action& a, double start, double end, int version,
              std::int64_t flow = -1) {
    if (!setup.record_trace) return;
    events.push_back(timeline_event{rank, stream, a, start, end, version, flow});
  }
  std::int64_t flow_id(int consumer, int mb, bool forward) const {
    const std::int64_t key = (static_cast<std::int64_t>(setup.replica) * S + consumer) * total() + mb;
    return 2 * key + (forward ? 0 : 1);
  }

  // Asks the driver for the inputs of the next input_window F's of virtual stage 0, in the
  // order the program runs them.
  void request_inputs() {
    const std::size_t window = static_cast<std::size_t>(std::max(1, setup.input_window));
    const std::size_t done = index_of[0] < 0 ? 0 : stages[index_of[0]].forwards_done;
    while (next_input < static_cast<int>(stage0_inputs.size()) &&
           static_cast<std::size_t>(next_input) < done + window) {
      emit(endpoint_kind::driver, 0, input_request{setup.replica, stage0_inputs[next_input]});
      ++next_input;
    }
  }

  // Drops versions no later F names (the latest always stays: STEP builds on it).
  void release_versions(virtual_stage_state<T>& st) {
    for (auto it = st.versions.begin(); it != st.versions.end();) {
      auto named = st.last_named.find(it->first);
      const bool later = named != st.last_named.end() && named->second > st.forwards_done;
      if (it->first != st.latest && !later) {
        st.unref(it->first);
        it = st.versions.erase(it);
      } else {
        ++it;
      }
    }
  }

  void note_rank_peaks() {
    int inflight = 0;
    std::int64_t bytes = 0;
    for (const auto& st : stages) {
      inflight += static_cast<int>(st.held.size());
      bytes += st.activation_bytes;
    }
    rank_peak_inflight = std::max(rank_peak_inflight, inflight);
    rank_peak_bytes = std::max(rank_peak_bytes, bytes);
  }

  void note_buffered() {
    peak_buffered = std::max(peak_buffered, static_cast<int>(inbox_f.size() + inbox_b.size()));
  }

  std::string where(const action& a) const {
    return "stage " + std::to_string(a.stage) + ", replica " + std::to_string(setup.replica) +
           ", action " + to_string(a);
  }

  bool fault_here(const action& a, fault_kind k) const {
    return setup.fault.kind == k && setup.fault.replica == setup.replica && setup.fault.at == a;
  }

  static void poison(tensor& t) {
    for (T& x : t.span<T>()) x = std::numeric_limits<T>::quiet_NaN();
  }

  // Whether a can run now.
  bool ready(const action& a) {
    const message_key key{a.stage, a.microbatch};
    switch (a.kind) {
      case action_kind::forward: return inbox_f.count(key) > 0;
      case action_kind::backward:
      case action_kind::input_grad:
        return a.stage == S - 1 || inbox_b.count(key) > 0;
      case action_kind::weight_grad: return true;
      case action_kind::recv_f: return inbox_f.count(key) > 0;
      case action_kind::recv_b: return inbox_b.count(key) > 0;
      case action_kind::send_f: return has_credit(a.stage + 1, true);
      case action_kind::send_b: return has_credit(a.stage - 1, false);
      case action_kind::reduce: {
        if (w == 1) return true;
        auto& st = state(a.stage);
        if (!st.reduce_sent) send_reduce(a, st);
        return st.reduced.has_value();
      }
      case action_kind::step: return true;
    }
    return false;
  }

  bool has_credit(int consumer, bool forward) {
    if (setup.credit_window <= 0) return true;
    return credits.try_emplace({consumer, forward}, setup.credit_window).first->second > 0;
  }
  void take_credit(int consumer, bool forward) {
    if (setup.credit_window > 0) --credits.at({consumer, forward});
  }

  void send_reduce(const action& a, virtual_stage_state<T>& st) {
    auto g = std::make_shared<const param_set>(std::move(st.grads));
    emit(endpoint_kind::reducer, a.stage, reduce_request{a.stage, setup.replica, st.latest, std::move(g)});
    st.reduce_sent = true;
    if (wait_start < 0) wait_start = now();
  }

  void run_forward(const action& a) {
    auto& st = state(a.stage);
    auto node = inbox_f.extract({a.stage, a.microbatch});
    activation_msg in = std::move(node.mapped());
    const int v = plan.versions.at(a.stage).at(a.microbatch).forward;
    if (natural_latest && v != st.latest)
      throw pipeworks_error("the version rule says version " + std::to_string(v) +
                            " but the latest version, which this schedule's F must use, is " +
                            std::to_string(st.latest));
    if (plan.kind == schedule_kind::pipedream_vs && a.stage > 0 && in.version != v)
      throw pipeworks_error("vertical sync: stage 0 used version " + std::to_string(in.version) +
                            " but the version rule names " + std::to_string(v));
    auto found = st.versions.find(v);
    if (found == st.versions.end())
      throw pipeworks_error("version " + std::to_string(v) + " is not available (latest " +
                            std::to_string(st.latest) + ")");
    param_snapshot weights = found->second;
    if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
    const double t0 = begin_compute();
    stage_forward out = forward_blocks(model_, *weights, std::move(in.data), in.ctx);
    if (fault_here(a, fault_kind::nan)) poison(out.output);
    const double t1 = end_compute(t0);
    record(stream_kind::compute, a, t0, t1, v);
    ++st.forwards_done;
    held_microbatch<T> h;
    h.version = v;
    for (const auto& s : out.saved)
      for (const auto& t : s.saved) h.bytes += static_cast<std::int64_t>(t.nbytes());
    if (a.stage == S - 1) {
      const double loss = static_cast<double>(loss_value<T>(out.output));
      if (!std::isfinite(loss)) {
        std::ostringstream o;
        o << "the loss is not finite (" << loss << ")";
        throw pipeworks_error(o.str());
      }
      emit(endpoint_kind::driver, 0, loss_report{setup.replica, a.microbatch, loss});
    } else {
      activation_msg next{setup.replica, a.stage + 1, a.microbatch, a.stage == 0 ? v : in.version,
                          std::move(out.output), in.ctx};
      if (plan.device_of[a.stage + 1] == setup.device) {
        inbox_f.emplace(message_key{a.stage + 1, a.microbatch}, std::move(next));
        note_buffered();
      } else {
        out_f.emplace(message_key{a.stage, a.microbatch}, std::move(next));
      }
    }
    h.stash = stage_stash{std::move(weights), std::move(out.saved), std::move(in.ctx)};
    st.activation_bytes += h.bytes;
    st.ref(v);
    st.held.emplace(a.microbatch, std::move(h));
    release_versions(st);
    st.note_peaks();
    if (a.stage == 0) request_inputs();
  }

  // B (full backward) or I (input gradient now, the weight gradient kept for W).
  void run_backward(const action& a) {
    auto& st = state(a.stage);
    auto it = st.held.find(a.microbatch);
    if (it == st.held.end() || it->second.later)
      throw pipeworks_error("no forward stash for this microbatch");
    held_microbatch<T>& h = it->second;
    const int v = plan.versions.at(a.stage).at(a.microbatch).backward;
    if (v != h.version)
      throw pipeworks_error("the version rule says version " + std::to_string(v) +
                            " but the forward stashed version " + std::to_string(h.version));
    tensor dout;
    if (a.stage == S - 1) {
      dout = scalar_tensor<T>(T(1) / static_cast<T>(m * w));
    } else {
      auto node = inbox_b.extract({a.stage, a.microbatch});
      dout = std::move(node.mapped().data);
    }
    if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
    const bool split = a.kind == action_kind::input_grad;
    const double t0 = begin_compute();
    tensor din;
    stage_deferred later;
    if (split)  // I: the input gradient now; the weight-gradient GEMMs wait for W
      din = backward_input_blocks(model_, *h.stash.weights, std::move(h.stash.saved),
                                  std::move(dout), h.stash.ctx, later);
    else
      din = backward_blocks(model_, *h.stash.weights, st.grads, std::move(h.stash.saved),
                            std::move(dout), h.stash.ctx);
    if (fault_here(a, fault_kind::nan) && din.numel() > 0) poison(din);
    record(stream_kind::compute, a, t0, end_compute(t0), v);
    if (a.stage > 0) {
      if (plan.device_of[a.stage - 1] == setup.device) {
        inbox_b.emplace(message_key{a.stage - 1, a.microbatch},
                        gradient_msg{setup.replica, a.stage - 1, a.microbatch, std::move(din)});
        note_buffered();
      } else {
        out_b.emplace(message_key{a.stage, a.microbatch}, std::move(din));
      }
    }
    st.activation_bytes -= h.bytes;
    if (split) {
      h.bytes = later.bytes();
      st.activation_bytes += h.bytes;
      h.later = std::move(later);
    } else {
      st.unref(h.version);
      st.held.erase(it);
    }
    st.note_peaks();
  }

  void run_weight_grad(const action& a) {
    auto& st = state(a.stage);
    auto it = st.held.find(a.microbatch);
    if (it == st.held.end() || !it->second.later)
      throw pipeworks_error("W before its I: no input-gradient half ran for this microbatch");
    held_microbatch<T>& h = it->second;
    if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
    const double t0 = begin_compute();
    backward_weight_blocks(model_, *h.stash.weights, st.grads, std::move(*h.later));
    record(stream_kind::compute, a, t0, end_compute(t0), h.version);
    st.activation_bytes -= h.bytes;
    st.unref(h.version);
    st.held.erase(it);
    st.note_peaks();
  }

  void run_reduce(const action& a) {
    if (w == 1) return;
    auto& st = state(a.stage);
    reduce_result r = std::move(*st.reduced);
    st.reduced.reset();
    st.reduce_sent = false;
    if (r.step != st.latest)
      throw pipeworks_error("the reducer answered for step " + std::to_string(r.step) +
                            ", expected step " + std::to_string(st.latest));
    st.grads = std::move(*r.sum);
    record(stream_kind::compute, a, wait_start >= 0 ? wait_start : now(), now(), -1);
  }

  void run_step(const action& a) {
    auto& st = state(a.stage);
    if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
    const double t0 = begin_compute();
    auto next = st.optimizer->apply(st.versions.at(st.latest), st.grads, st.latest);
    if (!next) throw pipeworks_error(next.message());
    const double norm = st.optimizer->last_grad_norm();
    const double lr = st.optimizer->lr_for(st.latest);
    ++st.latest;
    st.versions[st.latest] = *next;
    st.ref(st.latest);
    release_versions(st);
    std::span<T> g = st.grads.template values<T>();
    std::fill(g.begin(), g.end(), T(0));
    record(stream_kind::compute, a, t0, end_compute(t0), st.latest);
    st.stats.steps = st.latest;
    st.note_peaks();
    emit(endpoint_kind::driver, 0,
         step_report{a.stage, setup.replica, st.latest - 1, norm * norm, lr, std::move(*next)});
  }

  void run_send(const action& a) {
    const bool fwd = a.kind == action_kind::send_f;
    const int consumer = fwd ? a.stage + 1 : a.stage - 1;
    const double t = now();
    take_credit(consumer, fwd);
    if (fwd) {
      auto node = out_f.extract({a.stage, a.microbatch});
      if (node.empty()) throw pipeworks_error("SEND_F before its F");
      emit(endpoint_kind::rank, rank_of_stage(consumer), std::move(node.mapped()));
    } else {
      auto node = out_b.extract({a.stage, a.microbatch});
      if (node.empty()) throw pipeworks_error("SEND_B before its B");
      emit(endpoint_kind::rank, rank_of_stage(consumer),
           gradient_msg{setup.replica, consumer, a.microbatch, std::move(node.mapped())});
    }
    record(stream_kind::send, a, t, now(), -1, flow_id(consumer, a.microbatch, fwd));
  }

  void run_recv(const action& a) {
    const bool fwd = a.kind == action_kind::recv_f;
    const int sender = fwd ? a.stage - 1 : a.stage + 1;
    emit(endpoint_kind::rank, rank_of_stage(sender), credit_msg{setup.replica, a.stage, fwd});
    const double t = now();
    record(stream_kind::recv, a, wait_start >= 0 ? wait_start : t, t, -1,
           flow_id(a.stage, a.microbatch, fwd));
  }

  void execute(const action& a) {
    switch (a.kind) {
      case action_kind::forward: run_forward(a); break;
      case action_kind::backward:
      case action_kind::input_grad: run_backward(a); break;
      case action_kind::weight_grad: run_weight_grad(a); break;
      case action_kind::reduce: run_reduce(a); break;
      case action_kind::step: run_step(a); break;
      case action_kind::send_f:
      case action_kind::send_b: run_send(a); break;
      case action_kind::recv_f:
      case action_kind::recv_b: run_recv(a); break;
    }
  }

  result<bool> run() {
    if (!bad_message.empty())
      return make_error("rank " + std::to_string(rank) + " (replica " +
                        std::to_string(setup.replica) + "): " + bad_message);
    while (pc < prog.size()) {
      const action& a = prog[pc];
      if (fault_here(a, fault_kind::kill)) {
        killed = true;
        return false;
      }
      try {
        if (!ready(a)) {
          if (wait_start < 0) wait_start = now();
          return false;
        }
        execute(a);
        note_rank_peaks();
      } catch (const std::exception& e) {
        return make_error(where(a) + ": " + e.what());
      }
      wait_start = -1;
      ++pc;
    }
    return true;
  }

  std::string waiting_for() const {
    if (pc >= prog.size()) return "finished";
    const action& a = prog[pc];
    std::string what;
    switch (a.kind) {
      case action_kind::forward:
      case action_kind::recv_f:
        what = a.stage == 0 ? "the driver's input" : "the activation from stage " + std::to_string(a.stage - 1);
        break;
      case action_kind::backward:
      case action_kind::input_grad:
      case action_kind::recv_b: what = "the gradient from stage " + std::to_string(a.stage + 1); break;
      case action_kind::send_f:
      case action_kind::send_b: what = "a credit from the receiver"; break;
      case action_kind::reduce: what = "the reducer"; break;
      default: what = "nothing"; break;
    }
    return to_string(a) + ": waiting for " + what;
  }
};

template <class T>
stage_executor<T>::stage_executor(const model<T>& m, executor_setup setup,
                                  std::vector<param_set> initial, sink send)
    : impl_(std::make_unique<impl>(m, std::move(setup), std::move(initial), std::move(send))) {}

template <class T>
stage_executor<T>::~stage_executor() = default;

template <class T>
void stage_executor<T>::start() {
  if (impl_->index_of[0] >= 0) impl_->request_inputs();
}

template <class T>
void stage_executor<T>::deliver(message msg) {
  impl& s = *impl_;
  auto reject = [&](const std::string& why) {
    if (s.bad_message.empty()) s.bad_message = why;
  };
  if (auto* a = std::get_if<activation_msg>(&msg)) {
    const message_key key{a->stage, a->microbatch};
    if (!s.runs(a->stage)) return reject("an activation for stage " + std::to_string(a->stage) + ", which this rank does not run");
    if (!s.inbox_f.emplace(key, std::move(*a)).second)
      return reject("a second activation for stage " + std::to_string(key.first) +
                    ", microbatch " + std::to_string(key.second));
    s.note_buffered();
  } else if (auto* g = std::get_if<gradient_msg>(&msg)) {
    const message_key key{g->stage, g->microbatch};
    if (!s.runs(g->stage)) return reject("a gradient for stage " + std::to_string(g->stage) + ", which this rank does not run");
    if (!s.inbox_b.emplace(key, std::move(*g)).second)
      return reject("a second gradient for stage " + std::to_string(key.first) +
                    ", microbatch " + std::to_string(key.second));
    s.note_buffered();
  } else if (auto* c = std::get_if<credit_msg>(&msg)) {
    if (s.setup.credit_window <= 0) return;
    int& have = s.credits.try_emplace({c->stage, c->forward}, s.setup.credit_window).first->second;
    if (++have > s.setup.credit_window)
      return reject("more credits for stage " + std::to_string(c->stage) + " than its window of " +
                    std::to_string(s.setup.credit_window));
  } else if (auto* r = std::get_if<reduce_result>(&msg)) {
    if (!s.runs(r->stage)) return reject("a reduced gradient for stage " + std::to_string(r->stage) + ", which this rank does not run");
    s.state(r->stage).reduced = std::move(*r);
  }
}

template <class T>
result<bool> stage_executor<T>::run() {
  return impl_->run();
}

template <class T>
bool stage_executor<T>::kill_requested() const {
  return impl_->killed;
}

template <class T>
bool stage_executor<T>::finished() const {
  return impl_->pc >= impl_->prog.size();
}

template <class T>
std::string stage_executor<T>::waiting_for() const {
  return impl_->waiting_for();
}

template <class T>
std::optional<action> stage_executor<T>::current() const {
  if (finished()) return std::nullopt;
  return impl_->prog[impl_->pc];
}

template <class T>
int stage_executor<T>::rank() const {
  return impl_->rank;
}

template <class T>
std::vector<int> stage_executor<T>::stages() const {
  std::vector<int> out;
  for (const auto& st : impl_->stages) out.push_back(st.stage);
  return out;
}

template <class T>
std::vector<stage_stats> stage_executor<T>::stats() const {
  std::vector<stage_stats> out;
  for (const auto& st : impl_->stages) {
    stage_stats s = st.stats;
    s.peak_buffered = impl_->peak_buffered;
    s.rank_peak_inflight = impl_->rank_peak_inflight;
    s.rank_peak_activation_bytes = impl_->rank_peak_bytes;
    out.push_back(s);
  }
  return out;
}

template <class T>
param_snapshot stage_executor<T>::weights(int stage) const {
  auto& st = impl_->state(stage);
  return st.versions.at(st.latest);
}

template <class T>
std::vector<timeline_event> stage_executor<T>::take_events() {
  return std::exchange(impl_->events, {});
}

template class stage_executor<float>;
template class stage_executor<double>;

}  // namespace pipeworks
