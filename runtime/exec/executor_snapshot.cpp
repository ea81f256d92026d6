// Checkpoints of a stage executor as a consistent cut (Chandy–Lamport with fixed cut points):
// right after its own last STEP of step N a rank records its state and sends a marker to every
// peer; the cut recorder (cut_recorder.hpp) adds what a peer sent before its marker but arrived
// after the cut, and leaves out what it sent after its marker (it will be sent again).
// runtime/checkpoint/cut.hpp checks that no message crosses such a cut backwards for every
// schedule. restore() rebuilds a rank from what it recorded.
#include <algorithm>

#include "ops/train/zero_shards.hpp"
#include "runtime/exec/executor_state.hpp"

namespace pipeworks {
namespace {

std::vector<tensor> clone_all(const std::vector<tensor>& ts) {
  std::vector<tensor> out;
  out.reserve(ts.size());
  for (const tensor& t : ts) out.push_back(t.copy_to(device::cpu()));  // on the host
  return out;
}

template <class T>
tensor vector_tensor(const std::vector<T>& v) {
  if (v.empty()) return {};
  tensor t = tensor::uninitialized({static_cast<std::int64_t>(v.size())}, dtype_of<T>());
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

template <class T>
std::vector<T> tensor_vector(const tensor& t, std::size_t n, const std::string& what) {
  if (t.empty()) return {};
  if (t.type() != dtype_of<T>() || static_cast<std::size_t>(t.numel()) != n)
    throw pipeworks_error(what + " holds " + std::to_string(t.numel()) + " " +
                          std::string(dtype_name(t.type())) + " values, the parameters " +
                          std::to_string(n));
  auto s = t.span<T>();
  return {s.begin(), s.end()};
}

bool all_zero(const param_set& g) {
  if (g.where().kind != device_kind::cpu) return all_zero(g.on(host_context()));
  const std::byte* b = g.arena().bytes();
  return std::all_of(b, b + g.nbytes(), [](std::byte x) { return x == std::byte{0}; });
}

}  // namespace

template <class T>
int stage_executor<T>::impl::sender_of(const message& msg) const {
  if (auto* a = std::get_if<activation_msg>(&msg))
    return a->stage <= 0 || plan.starts_route(a->stage) ? -1 : rank_of_stage(a->stage - 1);
  const int last = plan.virtual_stages - 1;
  if (auto* g = std::get_if<gradient_msg>(&msg)) return rank_of_stage(std::min(last, g->stage + 1));
  if (auto* c = std::get_if<credit_msg>(&msg)) return rank_of_stage(std::clamp(c->stage, 0, last));
  if (auto* mk = std::get_if<marker_msg>(&msg)) return mk->from_rank;
  return -1;
}

template <class T>
void stage_executor<T>::impl::record_snapshot(int n) {
  if (setup.offload.activations) context.wait();  // offloaded stashes are read whole below
  rank_state s;
  s.rank = rank;
  s.step = n;
  s.pc = static_cast<std::int64_t>(pc);
  for (const auto& st : stages) {
    stage_state ss;
    ss.stage = st.stage;
    ss.latest = st.latest;
    ss.forwards_done = static_cast<std::int64_t>(st.forwards_done);
    for (const auto& [v, p] : st.versions) ss.versions.emplace(v, host_version(p));
    for (const auto& [mb, h] : st.held)
      if (!ss.versions.count(h.version)) ss.versions.emplace(h.version, host_version(h.stash.weights));
    for (const optimizer_state<T>& o : st.optimizer->state()) {
      ss.moment1.push_back(vector_tensor(o.m));
      ss.moment2.push_back(vector_tensor(o.v));
      ss.updates.push_back(o.step);
    }
    if (!all_zero(st.grads)) ss.grads = st.grads.on(host_context());
    s.stages.push_back(std::move(ss));
    for (const auto& [mb, h] : st.held) {
      held_state hs;
      hs.stage = st.stage;
      hs.microbatch = mb;
      hs.version = h.version;
      hs.bytes = h.later ? h.bytes : h.stash_bytes;  // recorded whole under recompute full too
      if (!h.later && !h.input.empty())
        hs.input = h.input.copy_to(device::cpu());  // the stash is recomputed from it on restore
      else
        for (const stash& b : h.stash.saved) hs.saved.push_back(clone_all(b.saved));
      hs.deferred = h.later.has_value();
      if (h.later)
        for (const deferred_grads& d : h.later->blocks) hs.later.push_back(clone_all(d.saved));
      hs.batch = h.stash.ctx.batch;
      hs.targets = h.stash.ctx.targets;
      s.held.push_back(std::move(hs));
    }
  }
  for (const auto& [key, msg] : mail.out_f)
    s.to_send_f.push_back(std::get<activation_msg>(on_host(msg)));
  for (const auto& [key, t] : mail.out_b)
    s.to_send_b.push_back(gradient_msg{setup.replica, key.first - 1, key.second,
                                       tensor_payload(t.copy_to(device::cpu()))});
  for (const auto& [key, b] : mail.inbox_f)
    if (!b.from_driver && b.after_marker < n) s.deliver.push_back(on_host(b.msg));
  for (const auto& [key, b] : mail.inbox_b)
    if (b.after_marker < n) s.deliver.push_back(on_host(b.msg));
  s.credits = cuts.credits_at(mail.credits, n);
  for (const auto& [mb, l] : reports.recent_losses)
    if (mb / plan.params.microbatches >= n) s.losses.push_back(l);
  for (int q : cuts.peers) emit(endpoint_kind::rank, q, marker_msg{rank, n});
  cuts.open(n, std::move(s));
}

template <class T>
void stage_executor<T>::impl::restore(rank_state s) {
  const std::string who = "the checkpoint of rank " + std::to_string(rank) + " (step " +
                          std::to_string(s.step) + ")";
  if (s.rank != rank)
    throw pipeworks_error(who + " was recorded by rank " + std::to_string(s.rank));
  std::vector<int> mine;
  for (int st = 0; st < plan.virtual_stages; ++st)
    if (plan.device_of[st] == setup.device) mine.push_back(st);
  if (s.stages.size() != mine.size())
    throw pipeworks_error(who + " holds " + std::to_string(s.stages.size()) +
                          " virtual stages; this rank runs " + std::to_string(mine.size()));
  for (std::size_t i = 0; i < mine.size(); ++i) {
    stage_state& ss = s.stages[i];
    if (ss.stage != mine[i])
      throw pipeworks_error(who + " holds stage " + std::to_string(ss.stage) + " where this rank runs stage " +
                            std::to_string(mine[i]));
    auto latest = ss.versions.find(ss.latest);
    if (latest == ss.versions.end() || !latest->second)
      throw pipeworks_error(who + ": stage " + std::to_string(ss.stage) + " lacks its latest version " +
                            std::to_string(ss.latest));
    for (auto& [v, p] : ss.versions) p = here_version(p);  // onto this rank's device
    virtual_stage_state<T> st;
    st.stage = ss.stage;
    st.stats.stage = ss.stage;
    st.latest = ss.latest;
    st.stats.steps = ss.latest;
    st.forwards_done = static_cast<std::size_t>(ss.forwards_done);
    const param_set& layout = *latest->second;
    st.optimizer.emplace(layout, setup.train);
    if (setup.offload.optimizer) st.optimizer->offload_moments();
    std::vector<optimizer_state<T>> opt(layout.entries().size());
    if (ss.updates.size() != opt.size() || ss.moment1.size() != opt.size() ||
        ss.moment2.size() != opt.size())
      throw pipeworks_error(who + ": stage " + std::to_string(ss.stage) + "'s optimizer state covers " +
                            std::to_string(ss.updates.size()) + " tensors, the stage has " +
                            std::to_string(opt.size()));
    for (std::size_t e = 0; e < opt.size(); ++e) {
      const auto n = static_cast<std::size_t>(layout.entries()[e].numel());
      const std::string what = who + ": the optimizer state of " + layout.entries()[e].name;
      opt[e].m = tensor_vector<T>(ss.moment1[e], n, what);
      opt[e].v = tensor_vector<T>(ss.moment2[e], n, what);
      opt[e].step = ss.updates[e];
    }
    st.optimizer->set_state(std::move(opt));
    if (sharded()) {  // as init_stages: this replica keeps and updates only the tensors it owns
      st.owned = owned_by(shard_owners(layout, plan.params.replicas), setup.replica);
      st.optimizer->own_only(st.owned);
    }
    st.grads = ss.grads ? ss.grads->on(context) : layout.zeros_like();
    st.versions = ss.versions;  // release_versions drops those no later F names
    for (const auto& [v, snap] : st.versions) st.ref(v);
    index_of[ss.stage] = static_cast<int>(stages.size());
    stages.push_back(std::move(st));
  }
  init_program_tables();
  for (held_state& hs : s.held) {
    virtual_stage_state<T>& st = state(hs.stage);
    const stage_state& ss = s.stages[static_cast<std::size_t>(index_of[hs.stage])];
    auto v = ss.versions.find(hs.version);
    if (v == ss.versions.end())
      throw pipeworks_error(who + ": microbatch " + std::to_string(hs.microbatch) + " of stage " +
                            std::to_string(hs.stage) + " used version " + std::to_string(hs.version) +
                            ", which the checkpoint does not hold");
    held_microbatch<T> h;
    h.version = hs.version;
    h.bytes = hs.bytes;
    h.stash.weights = v->second;
    h.stash.ctx = microbatch_ctx{hs.batch, hs.targets};
    h.stash_bytes = hs.bytes;
    if (!hs.input.empty() && !hs.deferred && setup.recompute == recompute_mode::full) {
      // The backward makes the stash again, as it would have in the interrupted run.
      h.input = context.adopt(std::move(hs.input));
      h.recomputes = true;
      h.bytes = static_cast<std::int64_t>(h.input.nbytes());
    } else if (!hs.input.empty() && !hs.deferred) {
      // The forward again, on the same input and weights: the same stash, bit for bit.
      stage_forward again =
          forward_blocks(context, model_, *h.stash.weights, hs.input.clone(), h.stash.ctx);
      const std::int64_t bytes = stash_bytes(again.saved);
      if (bytes != hs.bytes)
        throw pipeworks_error(who + ": recomputing the stash of microbatch " +
                              std::to_string(hs.microbatch) + " of stage " + std::to_string(hs.stage) +
                              " gave " + std::to_string(bytes) + " bytes, the checkpoint recorded " +
                              std::to_string(hs.bytes));
      h.stash.saved = std::move(again.saved);
      h.input = std::move(hs.input);
      if (setup.recompute == recompute_mode::selective) {
        drop_recomputable(model_, *h.stash.weights, h.stash.saved);
        h.bytes = stash_bytes(h.stash.saved);
      }
    } else {
      for (auto& b : hs.saved) {
        for (tensor& t : b) t = context.adopt(std::move(t));
        h.stash.saved.push_back(stash{std::move(b)});
      }
    }
    if (hs.deferred) {
      stage_deferred later;
      for (auto& b : hs.later) {
        for (tensor& t : b) t = context.adopt(std::move(t));
        later.blocks.push_back(deferred_grads{std::move(b)});
      }
      h.later = std::move(later);
    }
    st.activation_bytes += h.bytes;
    st.ref(h.version);
    st.held.emplace(hs.microbatch, std::move(h));
  }
  for (auto& st : stages) {
    release_versions(st);
    st.note_peaks();
  }
  const std::size_t cut = position_after_step(prog, s.step);
  if (cut == 0 || static_cast<std::int64_t>(cut) != s.pc)
    throw pipeworks_error(who + " stands at program position " + std::to_string(s.pc) +
                          ", but this rank's cut after step " + std::to_string(s.step) + " is at " +
                          std::to_string(cut) + ": the checkpoint was made with another schedule");
  pc = cut;
  mail.next_input = mail.input_stage >= 0
                        ? static_cast<int>(stages[index_of[mail.input_stage]].forwards_done)
                        : 0;
  for (activation_msg& a : s.to_send_f) {
    const message_key key{a.stage - 1, a.microbatch};
    mail.out_f.emplace(key, std::move(a));
  }
  for (gradient_msg& g : s.to_send_b)
    mail.out_b.emplace(message_key{g.stage + 1, g.microbatch}, g.data.take());
  mail.credits = std::move(s.credits);
  cuts.restored(static_cast<int>(s.step));
  reports.norms_sent = static_cast<int>(s.step) - 1;
  for (const loss_report& l : s.losses) reports.recent_losses[l.microbatch] = l;
  reports.resend_losses = std::move(s.losses);
  for (message& msg : s.deliver) deliver(std::move(msg));
  if (!bad_message.empty()) throw pipeworks_error(who + ": " + bad_message);
}

#define PIPEWORKS_SNAPSHOT_MEMBERS(T)                                              \
  template int stage_executor<T>::impl::sender_of(const message&) const;           \
  template void stage_executor<T>::impl::record_snapshot(int);                     \
  template void stage_executor<T>::impl::restore(rank_state);
PIPEWORKS_SNAPSHOT_MEMBERS(float)
PIPEWORKS_SNAPSHOT_MEMBERS(double)
#undef PIPEWORKS_SNAPSHOT_MEMBERS

}  // namespace pipeworks
