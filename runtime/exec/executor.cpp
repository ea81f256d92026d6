// stage_executor<T>: walks one rank's lowered program. Each action waits for its input (an
// activation, a gradient, a credit, a reduced gradient, the global norm) and then runs; see
// executor.hpp. Checkpoints are in executor_snapshot.cpp.
#include "runtime/exec/executor.hpp"
#include "runtime/exec/handoff.hpp"
#include "base/exception_text.hpp"
#include "runtime/program_walk.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>

#include "ops/device/device_ops.hpp"
#include "ops/train/zero_shards.hpp"
#include "runtime/exec/executor_state.hpp"

namespace pipeworks {

// Activation offload (setup.offload.activations): a held microbatch's stash, and the input kept
// for a recomputation or a checkpoint, each tensor made anew by `move` (to the host after the
// forward, back to the device before the backward, both on the device's copy stream). What an I
// leaves for its W stays.
template <class T, class Move>
void move_held(held_microbatch<T>& h, Move move) {
  for (stash& s : h.stash.saved)
    for (tensor& t : s.saved) t = move(std::move(t));
  if (!h.input.empty()) h.input = move(std::move(h.input));
}

template <class T>
stage_executor<T>::impl::impl(const model<T>& mdl, executor_setup su, sink out)
    : model_(mdl), setup(std::move(su)), send(std::move(out)),
      context(device_context::open(setup.where, gpu_math_of(setup.tf32, setup.bf16), setup.threads)),
      plan(*setup.plan),
      prog(plan.programs.at(plan.rank_of(setup.replica, setup.device))),
      timer(setup.speed, setup.clock, setup.record_trace, setup.cpu_clock, setup.sleep),
      trace(setup.record_trace, plan.rank_of(setup.replica, setup.device), setup.replica,
            plan.virtual_stages, plan.total_microbatches()) {
  const int p = plan.params.stages, w = plan.params.replicas;
  rank = plan.rank_of(setup.replica, setup.device);
  mail.window = setup.credit_window;
  if (setup.replica < 0 || setup.replica >= w || setup.device < 0 || setup.device >= p)
    throw pipeworks_error("executor: replica " + std::to_string(setup.replica) + ", device " +
                          std::to_string(setup.device) + " is not in the schedule's " +
                          std::to_string(w) + " replicas of " + std::to_string(p) + " devices");
  if (!(setup.speed > 0.0 && setup.speed <= 1.0))
    throw pipeworks_error("executor: the device speed " + std::to_string(setup.speed) +
                          " of rank " + std::to_string(rank) +
                          " is not in (0, 1] (1 is one full core of this machine)");
  if (static_cast<int>(setup.boundaries.size()) != plan.route_stages() + 1)
    throw pipeworks_error("executor: " + std::to_string(setup.boundaries.size()) +
                          " boundaries for " + std::to_string(plan.route_stages()) +
                          " stages of the model");
  if (plan.routes > 1 && setup.zero > 0)
    throw pipeworks_error("executor: ZeRO does not shard a schedule with two routes (dualpipe)");
  index_of.assign(plan.virtual_stages, -1);
  const bool cpu = setup.where.kind == device_kind::cpu;
  const std::string who = "rank " + std::to_string(rank) + " (replica " +
                          std::to_string(setup.replica) + ", device " +
                          std::to_string(setup.device) + ")";
  account = std::make_shared<memory_account>(who, cpu ? setup.memory_limit : 0);
  if (cpu)
    context.charge_to(account);
  else  // a GPU rank's tensors are its caching allocator's: the limit is enforced there
    context.limit_memory(setup.memory_limit, who);
}

template <class T>
void stage_executor<T>::impl::init_stages(std::vector<param_set> initial) {
  std::size_t next = 0;
  for (int s = 0; s < plan.virtual_stages; ++s) {
    if (plan.device_of[s] != setup.device) continue;
    if (next >= initial.size())
      throw pipeworks_error("executor: rank " + std::to_string(rank) +
                            " got too few parameter sets for its virtual stages");
    virtual_stage_state<T> st;
    st.stage = s;
    st.stats.stage = s;
    // A copy made here: the rank's memory account holds what the rank holds.
    initial[next] = initial[next].where() != context.where() ? initial[next].on(context) : initial[next].clone();
    st.grads = initial[next].zeros_like();
    st.optimizer.emplace(initial[next], setup.train);
    if (setup.offload.optimizer) st.optimizer->offload_moments();
    if (sharded()) {
      st.owned = owned_by(shard_owners(initial[next], plan.params.replicas), setup.replica);
      st.optimizer->own_only(st.owned);
    }
    if (takes_versions()) {  // it never updates: no moments
      st.owned.assign(initial[next].entries().size(), false);
      st.optimizer->own_only(st.owned);
    }
    st.versions[0] = std::make_shared<const param_set>(std::move(initial[next]));
    st.ref(0);
    index_of[s] = static_cast<int>(stages.size());
    stages.push_back(std::move(st));
    ++next;
  }
}

template <class T>
void stage_executor<T>::impl::init_program_tables() {
  for (const action& a : prog)
    if (a.kind == action_kind::forward && plan.starts_route(a.stage)) {
      if (mail.input_stage >= 0 && mail.input_stage != a.stage)
        throw pipeworks_error("executor: rank " + std::to_string(rank) + " starts two routes");
      mail.input_stage = a.stage;
      mail.route_inputs.push_back(a.microbatch);
    }
  // For each version, the last F that names it: a version no later F names can go.
  for (auto& st : stages) {
    std::size_t i = 0;
    for (const action& a : prog)
      if (a.kind == action_kind::forward && a.stage == st.stage)
        st.last_named[plan.versions.at(st.stage).at(a.microbatch).forward] = ++i;
    st.note_peaks();
  }
  // The checkpoint cuts and the F's whose input a cut will need.
  cuts.plan(prog, setup.checkpoint_every, plan.params.steps);
  for (const auto& st : stages) {
    for (int nb : {plan.starts_route(st.stage) ? -1 : st.stage - 1,
                   plan.ends_route(st.stage) ? -1 : st.stage + 1})
      if (nb >= 0 && plan.device_of[nb] != setup.device)
        cuts.peers.insert(rank_of_stage(nb));
  }
}

template <class T>
virtual_stage_state<T>& stage_executor<T>::impl::state(int s) {
  if (s < 0 || s >= plan.virtual_stages || index_of[s] < 0)
    throw pipeworks_error("rank " + std::to_string(rank) + " does not run virtual stage " +
                          std::to_string(s));
  return stages[static_cast<std::size_t>(index_of[s])];
}

template <class T>
void stage_executor<T>::impl::emit(endpoint_kind kind, int index, message msg) {
  send(outgoing{endpoint{kind, index}, std::move(msg)});
}

// Asks the driver for the inputs of the next input_window F's of the stage that starts a route
// (virtual stage 0, or dualpipe's other end), in the order the program runs them.
template <class T>
void stage_executor<T>::impl::request_inputs() {
  if (mail.input_stage < 0) return;
  const std::size_t window = static_cast<std::size_t>(std::max(1, setup.input_window));
  const std::size_t done = stages[index_of[mail.input_stage]].forwards_done;
  while (mail.next_input < static_cast<int>(mail.route_inputs.size()) &&
         static_cast<std::size_t>(mail.next_input) < done + window) {
    const int mb = mail.route_inputs[static_cast<std::size_t>(mail.next_input)];
    emit(endpoint_kind::driver, 0, input_request{member_of(mail.input_stage), mb});
    ++mail.next_input;
  }
}

// Drops versions no later F names (the latest always stays: STEP builds on it).
template <class T>
void stage_executor<T>::impl::release_versions(virtual_stage_state<T>& st) {
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

template <class T>
void stage_executor<T>::impl::note_rank_peaks() {
  int inflight = 0;
  std::int64_t bytes = 0;
  for (const auto& st : stages) {
    inflight += static_cast<int>(st.held.size());
    bytes += st.activation_bytes;
  }
  peaks.inflight = std::max(peaks.inflight, inflight);
  peaks.activation_bytes = std::max(peaks.activation_bytes, bytes);
}

template <class T>
std::string stage_executor<T>::impl::where(const action& a) const {
  return "stage " + std::to_string(a.stage) + ", replica " + std::to_string(setup.replica) +
         ", action " + to_string(a);
}

// Whether a can run now: what it waits for is the program walker's (runtime/program_walk.hpp),
// met here by the inboxes, the credits, the reducer's answer and, for a STEP under global
// clipping, the driver's norm, which the walker does not model (it always comes).
template <class T>
bool stage_executor<T>::impl::ready(const action& a) {
  const action_flow f = describe_action(plan, true, setup.replica, a);
  switch (f.waits) {
    case wait_kind::input:
    case wait_kind::message: {
      const message_key key{f.awaited.link.stage, f.awaited.microbatch};
      return f.awaited.link.forward ? mail.inbox_f.count(key) > 0 : mail.inbox_b.count(key) > 0;
    }
    case wait_kind::credit: return mail.has_credit({f.awaited.link.stage, f.awaited.link.forward});
    case wait_kind::reduce: {
      auto& st = state(a.stage);
      if (!st.reduce_sent) send_reduce(a, st);
      return takes_versions() || st.reduced.has_value();  // p2p: handed on, nothing comes back
    }
    case wait_kind::version: return state(a.stage).gathered.has_value();
    case wait_kind::nothing: break;
  }
  if (a.kind == action_kind::step && setup.global_clip) {
    const int t = state(a.stage).latest;
    if (reports.norms_sent < t) send_norms(t);
    if (reports.global_sq.count(t) == 0) return false;
  }
  if (a.kind == action_kind::step && sharded()) {
    auto& st = state(a.stage);
    if (!st.gather_sent) send_update(st);
    return st.gathered.has_value();
  }
  return true;
}

template <class T>
tensor stage_executor<T>::impl::to_wire(tensor t, int to) const {
  if (t.where().kind == device_kind::cpu) return t;
  const auto at = static_cast<std::size_t>(to), me = static_cast<std::size_t>(rank);
  const bool known = at < setup.rank_devices.size() && at < setup.rank_processes.size() &&
                     me < setup.rank_processes.size();
  if (!known || handoff_between(context.where(), setup.rank_processes[me], setup.rank_devices[at],
                                setup.rank_processes[at]) == handoff::host)
    return context.to_host(t);
  context.hand_over(t);  // the consumer's stream waits for this event; this rank goes on
  return t;
}

template <class T>
param_snapshot stage_executor<T>::impl::host_version(const param_snapshot& p) const {
  if (!p || p->where().kind == device_kind::cpu) return p;
  return std::make_shared<const param_set>(p->on(host_context()));
}

template <class T>
param_snapshot stage_executor<T>::impl::here_version(const param_snapshot& p) const {
  if (!p || p->where() == context.where()) return p;
  return std::make_shared<const param_set>(p->on(context));
}

template <class T>
void stage_executor<T>::impl::send_reduce(const action& a, virtual_stage_state<T>& st) {
  if (setup.reduce_on_gpu) context.hand_over(st.grads.arena());  // the reducer's stream waits
  auto g = setup.reduce_on_gpu ? std::make_shared<const param_set>(std::move(st.grads))
                               : host_version(std::make_shared<const param_set>(std::move(st.grads)));
  // With routes, the reducer of the stage's piece, which the copies on every route meet.
  const int piece = plan.piece_of(a.stage);
  emit(endpoint_kind::reducer, piece, reduce_request{piece, member_of(a.stage), st.latest, std::move(g)});
  st.reduce_sent = true;
  if (wait_start < 0) wait_start = now();
}

// Global clipping: at its first STEP of step t the rank sends every stage's per-tensor squared
// norms (the rank's STEPs of one step are adjacent, after all its compute and REDUCEs of that
// step: lower_run checks it), then waits for the driver's sum.
template <class T>
// A stage whose gradient is not finite stops the run here, named, rather than making every
// stage's global norm NaN (which would name whichever stage happened to step first).
void stage_executor<T>::impl::send_norms(int t) {
  std::vector<std::vector<double>> squares;
  for (auto& st : stages) {
    squares.push_back(st.squares.empty() ? tensor_squares<T>(st.grads) : st.squares);
    if (!std::isfinite(fold_squares(squares.back())))
      throw pipeworks_error("the gradient of stage " + std::to_string(st.stage) +
                            " is not finite at step " + std::to_string(t + 1));
  }
  for (std::size_t i = 0; i < stages.size(); ++i)
    emit(endpoint_kind::driver, 0,
         norm_request{setup.replica, stages[i].stage, t, std::move(squares[i])});
  reports.norms_sent = t;
  if (wait_start < 0) wait_start = now();
}

template <class T>
compute_job<T> stage_executor<T>::impl::begin_forward(const action& a) {
  auto& st = state(a.stage);
  compute_job<T> job;
  job.a = a;
  auto node = mail.inbox_f.extract({a.stage, a.microbatch});
  job.in = std::move(node.mapped().msg);
  const int v = plan.versions.at(a.stage).at(a.microbatch).forward;
  if (natural_latest() && v != st.latest)
    throw pipeworks_error("the version rule says version " + std::to_string(v) +
                          " but the latest version, which this schedule's F must use, is " +
                          std::to_string(st.latest));
  if (plan.kind == schedule_kind::pipedream_vs && a.stage > 0 && job.in.version != v)
    throw pipeworks_error("vertical sync: stage 0 used version " + std::to_string(job.in.version) +
                          " but the version rule names " + std::to_string(v));
  auto found = st.versions.find(v);
  if (found == st.versions.end())
    throw pipeworks_error("version " + std::to_string(v) + " is not available (latest " +
                          std::to_string(st.latest) + ")");
  job.version = v;
  job.weights = found->second;
  if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
  job.input = context.adopt(job.in.data.take());
  // A microbatch that a checkpoint's cut will find held keeps its input until the backward: the
  // checkpoint stores it and a restored rank recomputes the stash from it, rather than storing
  // the stash, which is many times larger.
  // Under recompute full every microbatch keeps it, and the stash is dropped.
  const bool recompute = setup.recompute == recompute_mode::full;
  if (recompute || cuts.keeps_input(pc)) job.kept = job.input.clone();
  return job;
}

template <class T>
void stage_executor<T>::impl::compute_forward(compute_job<T>& job, const device_context& on) {
  job.out = forward_blocks(on, model_, *job.weights, std::move(job.input), job.in.ctx);
}

template <class T>
void stage_executor<T>::impl::end_forward(compute_job<T>& job, double t0, double t1) {
  const action& a = job.a;
  auto& st = state(a.stage);
  const int v = job.version;
  stage_forward& out = job.out;
  if (fault_here(a, fault_kind::nan)) {  // what is sent is corrupt; what this stage saved is not
    out.output = out.output.clone();
    poison<T>(out.output);
  }
  ++st.forwards_done;
  held_microbatch<T> h;
  h.version = v;
  h.input = std::move(job.kept);
  h.stash_bytes = stash_bytes(out.saved);
  h.bytes = h.stash_bytes;
  if (plan.ends_route(a.stage)) {
    const double loss = static_cast<double>(loss_value<T>(out.output));
    if (!std::isfinite(loss)) {
      std::ostringstream o;
      o << "the loss is not finite (" << loss << ")";
      throw pipeworks_error(o.str());
    }
    const loss_report rep{member_of(a.stage), a.microbatch, loss};
    if (setup.checkpoint_every > 0) reports.recent_losses[a.microbatch] = rep;
    emit(endpoint_kind::driver, 0, rep);
  } else {
    activation_msg next{setup.replica, a.stage + 1, a.microbatch,
                        plan.starts_route(a.stage) ? v : job.in.version,
                        tensor_payload(to_wire(std::move(out.output), rank_of_stage(a.stage + 1))),
                        job.in.ctx};
    if (plan.device_of[a.stage + 1] == setup.device) {
      mail.inbox_f.emplace(message_key{a.stage + 1, a.microbatch},
                           buffered<activation_msg>{std::move(next)});
      mail.note_buffered();
    } else {
      mail.out_f.emplace(message_key{a.stage, a.microbatch}, std::move(next));
    }
  }
  h.stash = stage_stash{std::move(job.weights), std::move(out.saved), std::move(job.in.ctx)};
  if (setup.recompute == recompute_mode::full) {
    h.stash.saved.clear();
    h.recomputes = true;
    h.bytes = static_cast<std::int64_t>(h.input.nbytes());
  } else if (setup.recompute == recompute_mode::selective) {
    drop_recomputable(model_, *h.stash.weights, h.stash.saved);
    h.bytes = stash_bytes(h.stash.saved);
  }
  // Offloaded: into page-locked host memory on the copy stream (the GPU's copy freed once it is
  // done), overlapping the actions that follow; not when this microbatch's backward is the next
  // one (the last stage's, in 1F1B): it would come straight back.
  const action* next = next_backward();
  const bool backward_next = next && next->stage == a.stage && next->microbatch == a.microbatch;
  if (setup.offload.activations && !(backward_next && context.on_gpu())) {
    move_held(h, [&](tensor t) { return context.offload(std::move(t)); });
    context.bound_offloads();
  }
  trace.record(stream_kind::compute, a, t0, t1, v, -1, h.bytes);  // with the bytes it stashed
  st.activation_bytes += h.bytes;
  st.ref(v);
  st.held.emplace(a.microbatch, std::move(h));
  release_versions(st);
  st.note_peaks();
  if (a.stage == mail.input_stage) request_inputs();
  prefetch_offloaded();
}

// Activation offload on a GPU: starts bringing back the stash of the next backward (B or I) in
// this rank's program, so that its copy overlaps the actions before it; one ahead, and only once
// its forward has run.
template <class T>
void stage_executor<T>::impl::prefetch_offloaded() {
  if (!setup.offload.activations || !context.on_gpu()) return;
  const action* b = next_backward();
  if (!b) return;
  auto it = state(b->stage).held.find(b->microbatch);
  if (it != state(b->stage).held.end() && !it->second.later)
    move_held(it->second, [&](tensor t) { return context.fetch(std::move(t)); });
}

// The first B or I after the action at pc (in a pair, pc is its B), or null.
template <class T>
const action* stage_executor<T>::impl::next_backward() const {
  for (std::size_t i = pc + 1; i < prog.size(); ++i)
    if (prog[i].kind == action_kind::backward || prog[i].kind == action_kind::input_grad)
      return &prog[i];
  return nullptr;
}

template <class T>
void stage_executor<T>::impl::run_forward(const action& a) {
  compute_job<T> job = begin_forward(a);
  const double t0 = timer.begin();
  compute_forward(job, context);
  const double t1 = timer.end(t0);
  end_forward(job, t0, t1);
}

// B (full backward) or I (input gradient now, the weight gradient kept for W).
template <class T>
compute_job<T> stage_executor<T>::impl::begin_backward(const action& a) {
  auto& st = state(a.stage);
  auto it = st.held.find(a.microbatch);
  if (it == st.held.end() || it->second.later)
    throw pipeworks_error("no forward stash for this microbatch");
  compute_job<T> job;
  job.a = a;
  job.held = &it->second;
  const int v = plan.versions.at(a.stage).at(a.microbatch).backward;
  if (v != job.held->version)
    throw pipeworks_error("the version rule says version " + std::to_string(v) +
                          " but the forward stashed version " + std::to_string(job.held->version));
  job.version = v;
  // Offloaded: back onto the device (fetched before, or now), this stream waiting for the copy.
  if (setup.offload.activations)
    move_held(*job.held, [&](tensor t) {
      tensor here = context.fetch(std::move(t));
      context.wait_ready(here);
      // A stash left on the GPU (its backward came next) is read where it is, on the rank's
      // stream, also when a pair's F made it on the second one (whose work the rank's stream has
      // waited for); on the CPU, where a plan refuses offload, adopt gives the tensor itself.
      return here.where().kind == device_kind::cpu ? context.adopt(std::move(here)) : std::move(here);
    });
  if (plan.ends_route(a.stage)) {
    // m * w (per route: every route's microbatches are the step's)
    const int parts = plan.params.microbatches * plan.params.replicas * plan.routes;
    job.dout = scalar_tensor<T>(T(1) / static_cast<T>(parts));
  } else {
    auto node = mail.inbox_b.extract({a.stage, a.microbatch});
    job.dout = node.mapped().msg.data.take();
  }
  if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
  return job;
}

template <class T>
void stage_executor<T>::impl::compute_backward(compute_job<T>& job) {
  held_microbatch<T>& h = *job.held;
  if (h.recomputes) {
    // The forward again, on the input and weight version the F used: the same stash, bit for
    // bit (deterministic kernels). Held until this backward has used it.
    stage_forward again =
        forward_blocks(context, model_, *h.stash.weights, std::move(h.input), h.stash.ctx);
    h.stash.saved = std::move(again.saved);
    h.recomputes = false;
    job.recomputed = true;
  }
  if (job.a.kind == action_kind::input_grad)  // the weight-gradient GEMMs wait for W
    job.din = backward_input_blocks(context, model_, *h.stash.weights, std::move(h.stash.saved),
                                    std::move(job.dout), h.stash.ctx, job.later);
  else
    job.din = backward_blocks(context, model_, *h.stash.weights, state(job.a.stage).grads,
                              std::move(h.stash.saved), std::move(job.dout), h.stash.ctx);
}

template <class T>
void stage_executor<T>::impl::end_backward(compute_job<T>& job, double t0, double t1) {
  const action& a = job.a;
  auto& st = state(a.stage);
  held_microbatch<T>& h = *job.held;
  const bool split = a.kind == action_kind::input_grad;
  if (job.recomputed) {  // the stash made again was held while the backward ran
    st.activation_bytes += h.stash_bytes - h.bytes;
    h.bytes = h.stash_bytes;
    st.note_peaks();
  }
  tensor din = std::move(job.din);
  const bool first = plan.starts_route(a.stage);
  if (!first) din = to_wire(std::move(din), rank_of_stage(a.stage - 1));
  if (fault_here(a, fault_kind::nan) && din.numel() > 0) poison<T>(din);
  trace.record(stream_kind::compute, a, t0, t1, job.version, -1, h.bytes);
  if (!first) {
    if (plan.device_of[a.stage - 1] == setup.device) {
      gradient_msg g{setup.replica, a.stage - 1, a.microbatch, tensor_payload(std::move(din))};
      mail.inbox_b.emplace(message_key{a.stage - 1, a.microbatch},
                           buffered<gradient_msg>{std::move(g)});
      mail.note_buffered();
    } else {
      mail.out_b.emplace(message_key{a.stage, a.microbatch}, std::move(din));
    }
  }
  st.activation_bytes -= h.bytes;
  if (split) {
    h.bytes = job.later.bytes();
    st.activation_bytes += h.bytes;
    h.later = std::move(job.later);
    h.input = tensor{};  // W needs only what I left
  } else {
    st.unref(h.version);
    st.held.erase(a.microbatch);
  }
  st.note_peaks();
  prefetch_offloaded();
}

template <class T>
void stage_executor<T>::impl::run_backward(const action& a) {
  compute_job<T> job = begin_backward(a);
  const double t0 = timer.begin();
  compute_backward(job);
  const double t1 = timer.end(t0);
  end_backward(job, t0, t1);
}

// A pair on a GPU: the F on the rank's second stream (`side`: its own allocator and cuBLAS
// handle), the B on the rank's own, both queued from this thread, so that the GPU runs them at
// once. fork_side: the second stream first waits for the rank's work so far (the weights, the F's
// input) and takes its own copy of the input (a block the F let go could otherwise go to the B
// while the F's kernels still read it). overlap_on_streams: the F is queued before the B (a block
// of the F's allocator that the B lets go goes back only after the F has taken all it takes); the
// rank's stream then waits for the F, so that what follows reads its output and stash after it,
// and the second stream for the B. A rank with a memory limit runs the pair on its own stream:
// two allocators would each need the whole limit.
template <class T>
void stage_executor<T>::impl::fork_side(compute_job<T>& fj) {
  if (!side) {
    side.emplace(device_context::cuda(context.where().index, gpu_math_of(setup.tf32, setup.bf16)));
    context.share_memory_with(*side);  // either allocator, finding the GPU full, empties the other's cache
  }
  side->wait_for(context);
  fj.input = side->adopt(std::move(fj.input));
}

template <class T>
void stage_executor<T>::impl::overlap_on_streams(compute_job<T>& fj, compute_job<T>& bj) {
  compute_forward(fj, *side);
  compute_backward(bj);
  context.wait_for(*side);
  // And the second stream waits for the B: a block of its allocator that the B let go (an
  // earlier pair's stash) is then safe for whatever it queues next, inside a pair or not.
  side->wait_for(context);
  side->release_done();  // the F's input on the rank's allocator, once its copy is done
}

template <class T>
void stage_executor<T>::impl::run_overlapped() {
  const action f = prog[pc + 1], b = prog[pc + 2];
  const std::size_t at = pc;
  pc = at + 1;  // each part sees its own position (a cut may keep the F's input)
  compute_job<T> fj = begin_forward(f);
  const bool streams = context.on_gpu() && setup.memory_limit == 0;
  if (streams) fork_side(fj);  // before the B's stash comes back: the F need not wait for it
  pc = at + 2;
  compute_job<T> bj = begin_backward(b);
  const double t0 = timer.begin();
  if (streams)
    overlap_on_streams(fj, bj);
  else  // on a CPU, each with a share of the arena's threads (one after the other on one thread)
    context.run_both([&] { compute_forward(fj, context); }, [&] { compute_backward(bj); });
  const double t1 = timer.end(t0);
  end_forward(fj, t0, t1);
  note_rank_peaks();  // the F's stash and the B's were held together
  end_backward(bj, t0, t1);
  pc = at;
}

template <class T>
void stage_executor<T>::impl::run_weight_grad(const action& a) {
  auto& st = state(a.stage);
  auto it = st.held.find(a.microbatch);
  if (it == st.held.end() || !it->second.later)
    throw pipeworks_error("W before its I: no input-gradient half ran for this microbatch");
  held_microbatch<T>& h = it->second;
  if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
  const double t0 = timer.begin();
  backward_weight_blocks(context, model_, *h.stash.weights, st.grads, std::move(*h.later));
  trace.record(stream_kind::compute, a, t0, timer.end(t0), h.version, -1, h.bytes);
  st.activation_bytes -= h.bytes;
  st.unref(h.version);
  st.held.erase(it);
  st.note_peaks();
}

template <class T>
void stage_executor<T>::impl::run_reduce(const action& a) {
  if (plan.reduce_group_size() == 1) return;
  auto& st = state(a.stage);
  if (takes_versions()) {  // the gradient went on to the chain; the next step's starts at zero
    st.reduce_sent = false;
    st.grads = st.versions.at(st.latest)->zeros_like();
    if (st.grads.where() != context.where()) st.grads = st.grads.on(context);
    trace.record(stream_kind::compute, a, wait_start >= 0 ? wait_start : now(), now(), -1);
    return;
  }
  reduce_result r = std::move(*st.reduced);
  st.reduced.reset();
  st.reduce_sent = false;
  if (r.step != st.latest)
    throw pipeworks_error("the reducer answered for step " + std::to_string(r.step) +
                          ", expected step " + std::to_string(st.latest));
  if (!r.sum) throw pipeworks_error("the reducer's answer carries no gradient");
  // The sum is shared by the replicas; clipping changes this copy (on this rank's device).
  st.grads = r.sum->copied_to(context, r.sum);  // its own copy, after a GPU sum's ready event
  st.squares = std::move(r.squares);
  if (setup.zero >= 2 && st.squares.empty()) {
    // ZeRO stage 2 in one process: the reducer's sum is whole, so this replica keeps its own
    // tensors' sums only, after taking every tensor's squared norm from it.
    st.squares = tensor_squares<T>(st.grads);
    for (std::size_t i = 0; i < st.owned.size(); ++i) {
      if (st.owned[i]) continue;
      const param_entry& e = st.grads.entries()[i];
      const std::size_t elem = sizeof(T);
      zero_bytes(st.grads.arena().bytes() + e.offset * elem, st.grads.arena().where(),
                 static_cast<std::size_t>(e.numel()) * elem, st.grads.arena().stream());
    }
  }
  trace.record(stream_kind::compute, a, wait_start >= 0 ? wait_start : now(), now(), -1);
}

template <class T>
param_snapshot stage_executor<T>::impl::update(virtual_stage_state<T>& st) {
  std::optional<double> sq;
  if (setup.global_clip) sq = reports.global_sq.at(st.latest);
  auto next = st.optimizer->apply(st.versions.at(st.latest), st.grads, st.latest, sq,
                                  st.squares.empty() ? nullptr : &st.squares);
  if (!next) throw pipeworks_error(next.message());
  st.step_norm = st.optimizer->last_grad_norm();
  st.squares.clear();
  return *next;
}

// A version made on another thread (the reducer's gather, shared by the replicas in one process)
// is charged to this rank's account while the rank holds it, as one it made itself would be.
template <class T>
param_snapshot stage_executor<T>::impl::charged_version(param_snapshot p) const {
  if (!p || p->where().kind != device_kind::cpu) return p;
  const std::size_t n = p->nbytes();
  account->charge(n);
  const param_set* raw = p.get();
  return param_snapshot(raw, [held = std::move(p), a = account, n](const param_set*) mutable {
    held.reset();
    a->credit(n);
  });
}

template <class T>
void stage_executor<T>::impl::send_update(virtual_stage_state<T>& st) {
  st.step_started = timer.begin();
  param_snapshot mine = update(st);
  st.step_ended = timer.end(st.step_started);
  st.gather_sent = true;  // before the request: an answer delivered at once finds it asked for
  emit(endpoint_kind::reducer, st.stage,
       reduce_request{st.stage, setup.replica, st.latest, host_version(mine), reduce_kind::weights});
}

template <class T>
void stage_executor<T>::impl::run_step(const action& a) {
  auto& st = state(a.stage);
  if (fault_here(a, fault_kind::exception)) throw pipeworks_error("injected fault (test only)");
  const int t = st.latest;
  double t0 = 0, t1 = 0;
  param_snapshot next;
  if (sharded() || takes_versions()) {  // the owners' (p2p: the last replica's) new version
    if (!st.gathered || st.gathered->step != t || !st.gathered->sum)
      throw pipeworks_error("the reducer's version of step " + std::to_string(t) + " is missing");
    t0 = sharded() ? st.step_started : now();
    t1 = sharded() ? st.step_ended : t0;
    next = charged_version(here_version(st.gathered->sum));
    st.gathered.reset();
    st.gather_sent = false;
  } else {
    t0 = timer.begin();
    next = update(st);
    t1 = timer.end(t0);
    if (gives_versions())  // the others take it at their own STEP
      emit(endpoint_kind::reducer, st.stage,
           reduce_request{st.stage, setup.replica, t, host_version(next), reduce_kind::weights});
  }
  const double norm = st.step_norm;
  const double lr = st.optimizer->lr_for(st.latest);
  ++st.latest;
  st.versions[st.latest] = next;
  st.ref(st.latest);
  release_versions(st);
  // p2p: backwards of the next step ran since the REDUCE, which left a zero gradient for them.
  if (!takes_versions()) zero(st.grads.arena());
  trace.record(stream_kind::compute, a, t0, t1, st.latest, -1,
               next ? static_cast<std::int64_t>(next->nbytes()) : -1);
  st.stats.steps = st.latest;
  st.note_peaks();
  // The global norms of this step are used once every stage of the rank has stepped.
  bool all_stepped = true;
  for (const auto& other : stages) all_stepped = all_stepped && other.latest > t;
  if (all_stepped) reports.global_sq.erase(t);
  if (plan.ends_route(a.stage)) {  // losses of steps before the latest are never needed
    auto& losses = reports.recent_losses;     // by a later cut
    losses.erase(losses.begin(), losses.lower_bound(st.latest * plan.params.microbatches));
  }
  const bool publish = setup.weights_every > 0 &&
                       (st.latest % setup.weights_every == 0 || st.latest == plan.params.steps);
  emit(endpoint_kind::driver, 0,
       step_report{a.stage, setup.replica, st.latest - 1, norm * norm, lr,
                   publish ? host_version(next) : param_snapshot{}});
}

template <class T>
void stage_executor<T>::impl::run_send(const action& a) {
  const bool fwd = a.kind == action_kind::send_f;
  const int consumer = fwd ? a.stage + 1 : a.stage - 1;
  const double t = now();
  mail.take_credit({consumer, fwd});
  if (fwd) {
    auto node = mail.out_f.extract({a.stage, a.microbatch});
    if (node.empty()) throw pipeworks_error("SEND_F before its F");
    emit(endpoint_kind::rank, rank_of_stage(consumer), std::move(node.mapped()));
  } else {
    auto node = mail.out_b.extract({a.stage, a.microbatch});
    if (node.empty()) throw pipeworks_error("SEND_B before its B");
    emit(endpoint_kind::rank, rank_of_stage(consumer),
         gradient_msg{setup.replica, consumer, a.microbatch, tensor_payload(std::move(node.mapped()))});
  }
  trace.record(stream_kind::send, a, t, now(), -1, trace.flow_id(consumer, a.microbatch, fwd));
}

template <class T>
void stage_executor<T>::impl::run_recv(const action& a) {
  const bool fwd = a.kind == action_kind::recv_f;
  const int sender = fwd ? a.stage - 1 : a.stage + 1;
  emit(endpoint_kind::rank, rank_of_stage(sender), credit_msg{setup.replica, a.stage, fwd});
  const double t = now();
  trace.record(stream_kind::recv, a, wait_start >= 0 ? wait_start : t, t, -1,
         trace.flow_id(a.stage, a.microbatch, fwd));
}

template <class T>
void stage_executor<T>::impl::execute(const action& a) {
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
    case action_kind::overlap_f_b: break;
  }
}

template <class T>
result<bool> stage_executor<T>::impl::run() {
  if (!bad_message.empty())
    return make_error("rank " + std::to_string(rank) + " (replica " +
                      std::to_string(setup.replica) + "): " + bad_message);
  while (pc < prog.size()) {
    if (const int n = cuts.due(pc)) record_snapshot(n);
    const action& a = prog[pc];
    const bool pair = a.kind == action_kind::overlap_f_b;
    if (fault_here(a, fault_kind::kill) ||
        (pair && (fault_here(prog[pc + 1], fault_kind::kill) ||
                  fault_here(prog[pc + 2], fault_kind::kill)))) {  // a pair dies as one
      killed = true;
      return false;
    }
    try {
      if (pair ? !ready(prog[pc + 1]) || !ready(prog[pc + 2]) : !ready(a)) {
        if (wait_start < 0) wait_start = now();
        return false;
      }
      if (pair)
        run_overlapped();
      else
        execute(a);
      note_rank_peaks();
    } catch (const std::exception& e) {
      return make_error(where(a) + ": " + exception_text(e));
    }
    wait_start = -1;
    pc += pair ? 3 : 1;
  }
  return true;
}

template <class T>
void stage_executor<T>::impl::deliver(message msg) {
  auto reject = [&](const std::string& why) {
    if (bad_message.empty()) bad_message = why;
  };
  const int from = sender_of(msg);
  const bool peer = from >= 0 && from != rank && !std::holds_alternative<marker_msg>(msg);
  if (peer) cuts.note_arrival(from, msg);
  const int after = peer ? cuts.marker_of(from) : 0;
  if (auto* a = std::get_if<activation_msg>(&msg)) {
    const message_key key{a->stage, a->microbatch};
    if (!runs(a->stage))
      return reject("an activation for stage " + std::to_string(a->stage) +
                    ", which this rank does not run");
    const bool from_driver = plan.starts_route(a->stage);
    if (!mail.inbox_f.emplace(key, buffered<activation_msg>{std::move(*a), after, from_driver}).second)
      return reject("a second activation for stage " + std::to_string(key.first) +
                    ", microbatch " + std::to_string(key.second));
    mail.note_buffered();
  } else if (auto* g = std::get_if<gradient_msg>(&msg)) {
    const message_key key{g->stage, g->microbatch};
    if (!runs(g->stage))
      return reject("a gradient for stage " + std::to_string(g->stage) +
                    ", which this rank does not run");
    if (!mail.inbox_b.emplace(key, buffered<gradient_msg>{std::move(*g), after}).second)
      return reject("a second gradient for stage " + std::to_string(key.first) +
                    ", microbatch " + std::to_string(key.second));
    mail.note_buffered();
  } else if (auto* c = std::get_if<credit_msg>(&msg)) {
    if (!mail.return_credit({c->stage, c->forward}))
      return reject("more credits for stage " + std::to_string(c->stage) + " than its window of " +
                    std::to_string(setup.credit_window));
  } else if (auto* r = std::get_if<reduce_result>(&msg)) {
    const int stage = plan.routes > 1 ? stage_of_piece(r->stage) : r->stage;
    if (!runs(stage))
      return reject("a reduced gradient for stage " + std::to_string(r->stage) +
                    ", which this rank does not run");
    auto& st = state(stage);
    if (r->kind == reduce_kind::weights) {
      if (takes_versions()) {  // the p2p reduce's last replica sends each new version unasked
        if (st.gathered)
          return reject("a second new version of stage " + std::to_string(r->stage) +
                        " before this rank took the one of step " +
                        std::to_string(st.gathered->step));
      } else if (!sharded() || !st.gather_sent) {
        return reject("a gathered version of stage " + std::to_string(r->stage) +
                      " that this rank did not ask for");
      }
      st.gathered = std::move(*r);
    } else {
      st.reduced = std::move(*r);
    }
  } else if (auto* n = std::get_if<norm_result>(&msg)) {
    if (!setup.global_clip) return reject("a global norm, but this rank clips each stage alone");
    if (n->replica != setup.replica)
      return reject("the global norm of replica " + std::to_string(n->replica));
    reports.global_sq[n->step] = n->sq;
  } else if (auto* mk = std::get_if<marker_msg>(&msg)) {
    if (std::string why = cuts.on_marker(*mk); !why.empty()) reject(why);
  } else {
    reject("a message of a kind ranks do not receive (variant index " +
           std::to_string(msg.index()) + ")");
  }
}

template <class T>
std::string stage_executor<T>::impl::waiting_for() const {
  if (pc >= prog.size()) return "finished";
  auto what = [&](const action& a) -> std::string {
    switch (a.kind) {
      case action_kind::forward:
      case action_kind::recv_f:
        return plan.starts_route(a.stage) ? "the driver's input"
                                          : "the activation from stage " + std::to_string(a.stage - 1);
      case action_kind::backward:
      case action_kind::input_grad:
        if (plan.ends_route(a.stage)) return "nothing";  // the loss's own gradient
        [[fallthrough]];
      case action_kind::recv_b: return "the gradient from stage " + std::to_string(a.stage + 1);
      case action_kind::send_f:
      case action_kind::send_b: return "a credit from the receiver";
      case action_kind::reduce: return "the reducer";
      case action_kind::step:
        if (takes_versions())
          return "the new version from replica " + std::to_string(plan.params.replicas - 1);
        return setup.global_clip ? "the global gradient norm" : "nothing";
      default: return "nothing";
    }
  };
  const action& a = prog[pc];
  if (a.kind == action_kind::overlap_f_b && pc + 2 < prog.size()) {  // what the pair still lacks
    const action& f = prog[pc + 1];
    const action& b = prog[pc + 2];
    const bool has_f = mail.inbox_f.count({f.stage, f.microbatch}) > 0;
    const bool has_b = plan.ends_route(b.stage) ||
                       mail.inbox_b.count({b.stage, b.microbatch}) > 0;
    std::string lacks = has_f ? what(b) : has_b ? what(f) : what(f) + " and " + what(b);
    return to_string(program(prog.begin() + static_cast<std::ptrdiff_t>(pc),
                             prog.begin() + static_cast<std::ptrdiff_t>(pc) + 3)) +
           ": waiting for " + lacks;
  }
  return to_string(a) + ": waiting for " + what(a);
}

template <class T>
stage_executor<T>::stage_executor(const model<T>& m, executor_setup setup,
                                  std::vector<param_set> initial, sink send)
    : impl_(std::make_unique<impl>(m, std::move(setup), std::move(send))) {
  account_scope charged(impl_->account);
  impl_->init_stages(std::move(initial));
  impl_->init_program_tables();
}

template <class T>
stage_executor<T>::stage_executor(const model<T>& m, executor_setup setup, rank_state state,
                                  sink send)
    : impl_(std::make_unique<impl>(m, std::move(setup), std::move(send))) {
  account_scope charged(impl_->account);
  impl_->restore(std::move(state));
}

template <class T>
stage_executor<T>::~stage_executor() = default;

template <class T>
void stage_executor<T>::start() {
  impl_->request_inputs();  // a rank that starts a route (input_stage); the others ask nothing
  for (loss_report& l : impl_->reports.resend_losses) impl_->emit(endpoint_kind::driver, 0, l);
  impl_->reports.resend_losses.clear();
}

template <class T>
void stage_executor<T>::deliver(message msg) {
  account_scope charged(impl_->account);
  impl_->deliver(std::move(msg));
}

template <class T>
result<bool> stage_executor<T>::run() {
  result<bool> r = false;
  account_scope charged(impl_->account);
  impl_->context.run([&] { r = impl_->run(); });
  return r;
}

template <class T>
const device_context& stage_executor<T>::context() const {
  return impl_->context;
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
    s.peak_buffered = impl_->mail.peak_buffered;
    s.rank_peak_inflight = impl_->peaks.inflight;
    s.rank_peak_activation_bytes = impl_->peaks.activation_bytes;
    // With a second stream, the sum of its allocator's peak and the rank's: an upper bound.
    s.device_peak_bytes =
        impl_->context.on_gpu()
            ? static_cast<std::int64_t>(impl_->context.memory_stats().peak_in_use +
                                        (impl_->side ? impl_->side->memory_stats().peak_in_use : 0))
            : impl_->account->peak();
    s.optimizer_bytes = st.optimizer->moment_bytes();
    out.push_back(s);
  }
  return out;
}

template <class T>
param_snapshot stage_executor<T>::weights(int stage) const {
  auto& st = impl_->state(stage);
  return impl_->host_version(st.versions.at(st.latest));
}

template <class T>
int stage_executor<T>::steps_done(int stage) const {
  return impl_->state(stage).latest;
}

template <class T>
std::vector<timeline_event> stage_executor<T>::take_events() {
  return impl_->trace.take();
}

template <class T>
std::vector<rank_state> stage_executor<T>::take_snapshots() {
  return impl_->cuts.take_complete();
}

template class stage_executor<float>;
template class stage_executor<double>;

}  // namespace pipeworks
