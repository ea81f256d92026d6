// predict_memory replays each rank's program with the executor's bookkeeping (held microbatches,
// weight versions kept for later F's, recomputation); measure_stage_bytes runs each stage once.
#include "runtime/memory_plan.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ops/memory_account.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/model/param_split.hpp"
#include "ops/train/microbatches.hpp"
#include "ops/train/zero_shards.hpp"

namespace pipeworks {
namespace {

// One virtual stage on one rank, as runtime/exec/executor_state.hpp keeps it.
struct walked_stage {
  int latest = 0;
  std::set<int> kept{0};            // versions held for the latest or a later F
  std::map<int, int> last_named;    // version -> 1 + the index of the last F naming it
  std::size_t forwards_done = 0;
  struct held {
    int version = 0;
    bool deferred = false;
    std::int64_t bytes = 0;
  };
  std::map<int, held> in_flight;    // by microbatch
  std::int64_t bytes = 0;
  stage_memory peak;

  void release() {
    for (auto it = kept.begin(); it != kept.end();) {
      auto named = last_named.find(*it);
      const bool later = named != last_named.end() && static_cast<std::size_t>(named->second) > forwards_done;
      it = *it != latest && !later ? kept.erase(it) : std::next(it);
    }
  }
  void note() {
    std::set<int> live = kept;
    for (const auto& [mb, h] : in_flight) live.insert(h.version);
    peak.peak_versions = std::max(peak.peak_versions, static_cast<int>(live.size()));
    peak.peak_inflight = std::max(peak.peak_inflight, static_cast<int>(in_flight.size()));
    peak.activations = std::max(peak.activations, bytes);
  }
};

}  // namespace

std::vector<stage_memory> predict_memory(const schedule& s, const std::vector<stage_bytes>& bytes,
                                         recompute_mode mode, int credit_window) {
  const int S = s.virtual_stages;
  if (static_cast<int>(bytes.size()) != s.route_stages())  // with routes, per piece of the model
    throw pipeworks_error("predict_memory: " + std::to_string(bytes.size()) + " stage sizes for " +
                          std::to_string(s.route_stages()) + " stages of the model");
  std::vector<stage_memory> out(static_cast<std::size_t>(S));
  for (int st = 0; st < S; ++st) out[st].stage = st;
  for (const program& prog : s.programs) {
    std::map<int, walked_stage> stages;
    for (const action& a : prog) {
      if (a.kind != action_kind::forward) continue;
      walked_stage& w = stages[a.stage];
      w.last_named[s.versions.at(a.stage).at(a.microbatch).forward] = static_cast<int>(++w.forwards_done);
    }
    for (auto& [st, w] : stages) {
      w.forwards_done = 0;
      w.note();
    }
    for (const action& a : prog) {
      if (!stages.count(a.stage)) continue;
      walked_stage& w = stages[a.stage];
      const stage_bytes& b = bytes[static_cast<std::size_t>(s.piece_of(a.stage))];
      switch (a.kind) {
        case action_kind::forward: {
          const int v = s.versions.at(a.stage).at(a.microbatch).forward;
          w.in_flight[a.microbatch] = {v, false, b.stash};
          w.bytes += b.stash;
          ++w.forwards_done;
          w.release();
          w.note();
          break;
        }
        case action_kind::backward:
        case action_kind::input_grad: {
          auto it = w.in_flight.find(a.microbatch);
          if (it == w.in_flight.end() || it->second.deferred)
            throw pipeworks_error("predict_memory: a backward of stage " + std::to_string(a.stage) +
                                  " microbatch " + std::to_string(a.microbatch) + " before its forward");
          if (mode == recompute_mode::full) {  // the stash made again, held during the backward
            w.bytes += b.whole_stash - it->second.bytes;
            it->second.bytes = b.whole_stash;
            w.note();
          }
          w.bytes -= it->second.bytes;
          if (a.kind == action_kind::input_grad) {
            it->second = {it->second.version, true, b.deferred};
            w.bytes += b.deferred;
          } else {
            w.in_flight.erase(it);
          }
          w.note();
          break;
        }
        case action_kind::weight_grad: {
          auto it = w.in_flight.find(a.microbatch);
          if (it == w.in_flight.end() || !it->second.deferred)
            throw pipeworks_error("predict_memory: a W of stage " + std::to_string(a.stage) +
                                  " microbatch " + std::to_string(a.microbatch) + " before its I");
          w.bytes -= it->second.bytes;
          w.in_flight.erase(it);
          w.note();
          break;
        }
        case action_kind::step:
          ++w.latest;
          w.kept.insert(w.latest);
          w.release();
          w.note();
          break;
        default:
          break;
      }
    }
    for (const auto& [st, w] : stages) {
      stage_memory& o = out[static_cast<std::size_t>(st)];
      o.peak_inflight = std::max(o.peak_inflight, w.peak.peak_inflight);
      o.peak_versions = std::max(o.peak_versions, w.peak.peak_versions);
      o.activations = std::max(o.activations, w.peak.activations);
    }
  }
  for (int st = 0; st < S; ++st) {
    stage_memory& o = out[static_cast<std::size_t>(st)];
    const stage_bytes& b = bytes[static_cast<std::size_t>(s.piece_of(st))];
    o.weights = o.peak_versions * b.weights;
    o.gradients = b.weights;
    o.moments = b.moments;
    o.workspace = b.workspace;
    const std::int64_t window = credit_window > 0 ? credit_window : s.params.microbatches;
    o.messages = window * ((s.ends_route(st) ? 0 : b.output) + (s.starts_route(st) ? 0 : b.input));
  }
  return out;
}

void offload_to_host(stage_memory& m, const stage_bytes& b, offload_spec o, recompute_mode mode) {
  m.host = 0;
  if (o.optimizer) m.host += m.moments;
  if (o.activations) {
    const std::int64_t one =
        std::max({b.stash, mode == recompute_mode::full ? b.whole_stash : 0, b.deferred});
    m.host += m.activations - std::min(m.activations, offload_resident_microbatches * one);
  }
}

minibatch example_microbatch(const model_spec& spec, std::int64_t samples) {
  if (spec.is_gpt()) {
    const std::int64_t T = spec.gpt().context;
    return minibatch{tensor({samples, T}, dtype::i32), tensor({samples, T}, dtype::i32)};
  }
  return minibatch{tensor({samples, spec.mlp().inputs}, dtype::f32), tensor({samples}, dtype::i32)};
}

template <class T>
result<std::vector<stage_bytes>> measure_stage_bytes(const model<T>& m, const minibatch& sample,
                                                     const std::vector<int>& boundaries,
                                                     recompute_mode mode, optimizer_kind optimizer,
                                                     int shards) {
  const std::int64_t samples = sample.inputs.rank() > 0 ? sample.inputs.dim(0) : 0;
  if (samples < 1) return make_error("a microbatch needs at least one sample");
  const param_set whole = m.init_params(1);
  auto cut = split_params(whole, boundaries);
  if (!cut) return cut.err();
  microbatch mb = make_microbatch(sample, 0, samples);
  tensor input = std::move(mb.input);
  std::vector<stage_bytes> out;
  for (const param_set& p : *cut) {
    stage_bytes b;
    b.weights = static_cast<std::int64_t>(p.nbytes());
    // The replica that owns the most bytes of the stage's tensors holds its moments' peak.
    const std::vector<int> owners = shard_owners(p, std::max(1, shards));
    std::vector<std::int64_t> owned(static_cast<std::size_t>(std::max(1, shards)), 0);
    for (std::size_t i = 0; i < owners.size(); ++i)
      owned[static_cast<std::size_t>(owners[i])] +=
          p.entries()[i].numel() * static_cast<std::int64_t>(sizeof(T));
    b.moments = (optimizer == optimizer_kind::adamw ? 2 : 1) * *std::max_element(owned.begin(), owned.end());
    const std::int64_t input_bytes = static_cast<std::int64_t>(input.nbytes());
    // What the forward and backward allocate is counted from here (the input is not).
    auto account = std::make_shared<memory_account>("the memory plan", 0);
    std::optional<account_scope> counted(std::in_place, account);
    stage_forward f = forward_blocks(m, p, input.clone(), mb.ctx);
    std::int64_t whole_stash = 0;
    for (const stash& s : f.saved)
      for (const tensor& t : s.saved) whole_stash += static_cast<std::int64_t>(t.nbytes());
    b.whole_stash = whole_stash;
    b.stash = whole_stash;
    if (mode == recompute_mode::full) b.stash = input_bytes;
    std::vector<stash> kept = std::move(f.saved);
    if (mode == recompute_mode::selective) {
      drop_recomputable(m, p, kept);
      b.stash = 0;
      for (const stash& s : kept)
        for (const tensor& t : s.saved) b.stash += static_cast<std::int64_t>(t.nbytes());
    }
    const bool last = p.end_block() == m.size();
    tensor dout = last ? scalar_tensor<T>(T(1)) : tensor(f.output.shape(), f.output.type());
    stage_deferred later;
    {
      tensor din = backward_input_blocks(m, p, std::move(kept), std::move(dout), mb.ctx, later);
      counted.reset();
    }
    b.deferred = later.bytes();
    b.input = input_bytes;
    b.output = static_cast<std::int64_t>(f.output.nbytes());
    b.workspace = std::max<std::int64_t>(0, account->peak() - b.whole_stash);
    out.push_back(b);
    input = std::move(f.output);
  }
  return out;
}

template result<std::vector<stage_bytes>> measure_stage_bytes<float>(
    const model<float>&, const minibatch&, const std::vector<int>&, recompute_mode, optimizer_kind,
    int);
template result<std::vector<stage_bytes>> measure_stage_bytes<double>(
    const model<double>&, const minibatch&, const std::vector<int>&, recompute_mode, optimizer_kind,
    int);

}  // namespace pipeworks
