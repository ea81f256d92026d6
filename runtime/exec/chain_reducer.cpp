// One replica's share of cyclic's p2p reduce across processes: the partial sum waits for the
// local gradient (or the local gradient for the partial sum), every size, index, kind and step is
// checked, and a duplicate is an error; see chain_reducer.hpp.
#include "runtime/exec/chain_reducer.hpp"

#include <cstring>
#include <string>

namespace pipeworks {

namespace {

// into = partial + local, element by element (the chain's order: replicas 0..q-1, then q).
template <class T>
void add_into(std::byte* into, const tensor_payload& partial, const param_set& local) {
  auto* s = reinterpret_cast<T*>(into);
  const auto* a = reinterpret_cast<const T*>(partial.bytes().data());
  const auto* b = reinterpret_cast<const T*>(local.arena().bytes());
  const std::size_t n = partial.nbytes() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) s[i] = a[i] + b[i];
}

}  // namespace

chain_reducer::chain_reducer(int stage, int replica, int replicas)
    : stage_(stage), replica_(replica), replicas_(replicas) {}

std::string chain_reducer::who(int step) const {
  return "the p2p reduce of stage " + std::to_string(stage_) + " at replica " +
         std::to_string(replica_) + ", step " + std::to_string(step);
}

status chain_reducer::check(const tensor_payload& x, int step, const char* what) const {
  if (x.type() != layout_->type || x.shape() != layout_->arena_shape)
    return make_error(who(step) + ": " + what + " holds " + std::string(dtype_name(x.type())) +
                      " " + shape_string(x.shape()) + ", not the stage's " +
                      std::string(dtype_name(layout_->type)) + " " +
                      shape_string(layout_->arena_shape));
  return {};
}

result<chain_reducer::outputs> chain_reducer::add_local(reduce_request request) {
  const bool weights = request.kind == reduce_kind::weights;
  if (request.stage != stage_ || request.replica != replica_ || !request.grads)
    return make_error(who(request.step) + ": a " + (weights ? "version" : "gradient") +
                      " of stage " + std::to_string(request.stage) + ", replica " +
                      std::to_string(request.replica) + (request.grads ? "" : " (null)"));
  const param_set& g = *request.grads;
  if (g.type() != dtype::f32 && g.type() != dtype::f64)
    return make_error(who(request.step) + ": only F32 and F64 gradients can be summed");
  if (!layout_)
    layout_ = layout{g.entries(), g.block_offsets(), g.first_block(), g.type(), g.arena().shape()};
  if (g.type() != layout_->type || g.arena().shape() != layout_->arena_shape)
    return make_error(who(request.step) + ": the local rank's tensors changed layout");
  if (weights) {  // the last replica's new version, to every other replica
    if (replica_ != replicas_ - 1)
      return make_error(who(request.step) + ": only the last replica (" +
                        std::to_string(replicas_ - 1) + ") makes new versions");
    tensor_payload all = tensor_payload::view(request.grads,
                                              reinterpret_cast<const std::byte*>(g.arena().bytes()),
                                              g.type(), g.arena().shape());
    outputs out;
    for (int r = 0; r + 1 < replicas_; ++r)
      out.sums.emplace_back(r, gather_chunk{stage_, request.step, replica_, all,
                                            chunk_kind::chain_version});
    return out;
  }
  step_state& st = steps_[request.step];
  if (st.local) return make_error(who(request.step) + ": the local gradient arrived twice");
  st.local = std::move(request.grads);
  return advance(request.step);
}

result<chain_reducer::outputs> chain_reducer::add_piece(reduce_chunk piece) {
  if (piece.kind != chunk_kind::chain_partial || piece.stage != stage_ ||
      piece.chunk != replica_ || replica_ == 0 || piece.replica != replica_ - 1)
    return make_error(who(piece.step) + ": a partial sum from replica " +
                      std::to_string(piece.replica) + " of stage " + std::to_string(piece.stage) +
                      " for replica " + std::to_string(piece.chunk) +
                      " is not this replica's to add to (it takes replica " +
                      std::to_string(replica_ - 1) + "'s)");
  step_state& st = steps_[piece.step];
  if (st.partial)
    return make_error(who(piece.step) + ": the partial sum arrived twice");
  st.partial = std::move(piece.data);
  return advance(piece.step);
}

result<chain_reducer::outputs> chain_reducer::add_sum(gather_chunk version) {
  if (version.kind != chunk_kind::chain_version || version.stage != stage_ ||
      version.chunk != replicas_ - 1 || replica_ == replicas_ - 1)
    return make_error(who(version.step) + ": a version of stage " + std::to_string(version.stage) +
                      " from replica " + std::to_string(version.chunk) +
                      " is not the last replica's for this one");
  if (!layout_)  // this replica's gradient of that step went out before: its layout is known
    return make_error(who(version.step) + ": a new version before this replica's first gradient");
  if (status ok = check(version.data, version.step, "the new version"); !ok)
    return make_error(ok.message());
  auto whole = param_set::from_parts(layout_->entries, layout_->block_offsets,
                                     layout_->first_block, version.data.take());
  if (!whole) return make_error(who(version.step) + ": " + whole.message());
  outputs out;
  out.result = reduce_result{stage_, version.step,
                             std::make_shared<const param_set>(std::move(*whole)),
                             reduce_kind::weights, {}};
  return out;
}

result<chain_reducer::outputs> chain_reducer::advance(int step) {
  step_state& st = steps_[step];
  outputs out;
  if (!st.local || (replica_ > 0 && !st.partial)) return out;
  const param_set& local = *st.local;
  tensor_payload sum;
  if (replica_ == 0) {  // the chain starts with this gradient, sent as it is (a view, no copy)
    sum = tensor_payload::view(st.local, reinterpret_cast<const std::byte*>(local.arena().bytes()),
                               local.type(), local.arena().shape());
  } else {
    if (status ok = check(*st.partial, step, "the partial sum"); !ok) return make_error(ok.message());
    auto made = tensor_payload::allocate(local.type(), local.arena().shape());
    if (!made) return make_error(who(step) + ": " + made.message());
    if (local.type() == dtype::f32)
      add_into<float>(made->writable_bytes().data(), *st.partial, local);
    else
      add_into<double>(made->writable_bytes().data(), *st.partial, local);
    sum = std::move(*made);
  }
  if (replica_ + 1 < replicas_) {
    out.pieces.emplace_back(replica_ + 1, reduce_chunk{stage_, step, replica_, replica_ + 1,
                                                       std::move(sum), chunk_kind::chain_partial});
  } else {
    auto whole = param_set::from_parts(local.entries(), local.block_offsets(), local.first_block(),
                                       sum.take());
    if (!whole) return make_error(who(step) + ": " + whole.message());
    out.result = reduce_result{stage_, step, std::make_shared<const param_set>(std::move(*whole))};
  }
  steps_.erase(step);
  return out;
}

}  // namespace pipeworks
