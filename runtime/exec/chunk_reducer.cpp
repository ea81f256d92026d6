// The all-reduce share of one replica: pieces are kept until all w have come, then summed in
// replica order; sums are kept until all chunks are in, then laid out in the local gradient's
// layout. Every size, index and step is checked; a duplicate is an error.
#include "runtime/exec/chunk_reducer.hpp"

#include <cstring>
#include <string>

namespace pipeworks {

namespace {

// into = pieces[0] + pieces[1] + ... element by element, in that order, in one pass per piece
// after the first two (no copy of the first).
template <class T>
void sum_into(std::byte* into, const std::vector<std::optional<tensor_payload>>& pieces) {
  auto* s = reinterpret_cast<T*>(into);
  const std::size_t n = pieces[0]->nbytes() / sizeof(T);
  const auto* a = reinterpret_cast<const T*>(pieces[0]->bytes().data());
  if (pieces.size() == 1) {
    std::memcpy(s, a, n * sizeof(T));
    return;
  }
  const auto* b = reinterpret_cast<const T*>(pieces[1]->bytes().data());
  for (std::size_t i = 0; i < n; ++i) s[i] = a[i] + b[i];
  for (std::size_t r = 2; r < pieces.size(); ++r) {
    const auto* v = reinterpret_cast<const T*>(pieces[r]->bytes().data());
    for (std::size_t i = 0; i < n; ++i) s[i] += v[i];
  }
}

}  // namespace

std::pair<std::int64_t, std::int64_t> chunk_range(std::int64_t n, int w, int c) {
  return {n * c / w, n * (c + 1) / w};
}

chunk_reducer::chunk_reducer(int stage, int replica, int replicas)
    : stage_(stage), replica_(replica), replicas_(replicas) {}

std::string chunk_reducer::who(int step) const {
  return "the all-reduce of stage " + std::to_string(stage_) + " at replica " +
         std::to_string(replica_) + ", step " + std::to_string(step);
}

result<chunk_reducer::outputs> chunk_reducer::add_local(reduce_request request) {
  if (request.kind != reduce_kind::gradient || request.stage != stage_ || request.replica != replica_)
    return make_error(who(request.step) + ": a gradient of stage " + std::to_string(request.stage) +
                      ", replica " + std::to_string(request.replica));
  if (!request.grads) return make_error(who(request.step) + ": no gradient (null)");
  const dtype t = request.grads->type();
  if (t != dtype::f32 && t != dtype::f64)
    return make_error(who(request.step) + ": only F32 and F64 gradients can be summed");
  step_state& st = steps_[request.step];
  if (st.local) return make_error(who(request.step) + ": the local gradient arrived twice");
  st.pieces.resize(static_cast<std::size_t>(replicas_));
  st.sums.resize(static_cast<std::size_t>(replicas_));
  st.local = request.grads;
  outputs out;
  const std::int64_t n = st.local->size();
  const std::size_t elem = dtype_size(t);
  const std::byte* all = reinterpret_cast<const std::byte*>(st.local->arena().bytes());
  for (int c = 0; c < replicas_; ++c) {
    const auto [first, last] = chunk_range(n, replicas_, c);
    // A view into the gradient, which it keeps alive: the pieces are not copied.
    tensor_payload piece = tensor_payload::view(st.local, all + first * static_cast<std::int64_t>(elem),
                                                t, {last - first});
    if (c == replica_) {
      if (st.pieces[static_cast<std::size_t>(c)])
        return make_error(who(request.step) + ": its own piece arrived twice");
      st.pieces[static_cast<std::size_t>(c)] = std::move(piece);
    } else {
      out.pieces.emplace_back(c, reduce_chunk{stage_, request.step, replica_, c, std::move(piece)});
    }
  }
  return advance(request.step, std::move(out));
}

result<chunk_reducer::outputs> chunk_reducer::add_piece(reduce_chunk piece) {
  if (piece.kind != chunk_kind::all_reduce || piece.stage != stage_ || piece.chunk != replica_ || piece.replica < 0 ||
      piece.replica >= replicas_ || piece.replica == replica_)
    return make_error(who(piece.step) + ": a piece of chunk " + std::to_string(piece.chunk) +
                      " from replica " + std::to_string(piece.replica) + " of stage " +
                      std::to_string(piece.stage) + " is not this replica's to sum");
  step_state& st = steps_[piece.step];
  st.pieces.resize(static_cast<std::size_t>(replicas_));
  st.sums.resize(static_cast<std::size_t>(replicas_));
  auto& slot = st.pieces[static_cast<std::size_t>(piece.replica)];
  if (slot || st.summed)
    return make_error(who(piece.step) + ": replica " + std::to_string(piece.replica) +
                      "'s piece arrived twice");
  slot = std::move(piece.data);
  return advance(piece.step, {});
}

result<chunk_reducer::outputs> chunk_reducer::add_sum(gather_chunk sum) {
  if (sum.kind != chunk_kind::all_reduce || sum.stage != stage_ || sum.chunk < 0 ||
      sum.chunk >= replicas_ || sum.chunk == replica_)
    return make_error(who(sum.step) + ": a sum of chunk " + std::to_string(sum.chunk) +
                      " of stage " + std::to_string(sum.stage) + " is not another replica's");
  step_state& st = steps_[sum.step];
  st.pieces.resize(static_cast<std::size_t>(replicas_));
  st.sums.resize(static_cast<std::size_t>(replicas_));
  auto& slot = st.sums[static_cast<std::size_t>(sum.chunk)];
  if (slot) return make_error(who(sum.step) + ": the sum of chunk " + std::to_string(sum.chunk) + " arrived twice");
  slot = std::move(sum.data);
  return advance(sum.step, {});
}

result<chunk_reducer::outputs> chunk_reducer::advance(int step, outputs out) {
  step_state& st = steps_[step];
  if (!st.local) return out;  // pieces and sums wait for the local gradient's layout
  const dtype t = st.local->type();
  const std::int64_t n = st.local->size();
  auto check = [&](const tensor_payload& x, int c) -> status {
    const auto [first, last] = chunk_range(n, replicas_, c);
    if (x.type() != t || x.shape() != shape_t{last - first})
      return make_error(who(step) + ": chunk " + std::to_string(c) + " has shape " +
                        shape_string(x.shape()) + ", not [" + std::to_string(last - first) + "]");
    return {};
  };
  const std::size_t elem = dtype_size(t);
  auto at = [&](int c) { return chunk_range(n, replicas_, c).first * static_cast<std::int64_t>(elem); };
  // Reduce-scatter done for my chunk: sum in replica order straight into my chunk of the whole
  // sum's arena, and send views of it to every other replica.
  if (!st.summed) {
    bool all = true;
    for (const auto& p : st.pieces) all = all && p.has_value();
    if (all) {
      for (int r = 0; r < replicas_; ++r)
        if (status s = check(*st.pieces[static_cast<std::size_t>(r)], replica_); !s) return make_error(s.message());
      auto arena = tensor_payload::allocate(t, st.local->arena().shape());
      if (!arena) return make_error(who(step) + ": " + arena.message());
      st.arena = std::move(*arena);
      std::byte* mine = st.arena->writable_bytes().data() + at(replica_);
      if (t == dtype::f32) sum_into<float>(mine, st.pieces);
      else sum_into<double>(mine, st.pieces);
      st.pieces.assign(static_cast<std::size_t>(replicas_), std::nullopt);
      st.summed = true;
      const auto [first, last] = chunk_range(n, replicas_, replica_);
      tensor_payload sum = tensor_payload::view(std::make_shared<tensor_payload>(*st.arena), mine, t,
                                                {last - first});
      for (int r = 0; r < replicas_; ++r)
        if (r != replica_) out.sums.emplace_back(r, gather_chunk{stage_, step, replica_, sum});
    }
  }
  // All-gather done: the whole sum in the local gradient's layout.
  if (!st.summed) return out;
  for (int c = 0; c < replicas_; ++c)
    if (c != replica_ && !st.sums[static_cast<std::size_t>(c)]) return out;
  // The other replicas' chunks join mine in the arena. Views of mine still on their way to other
  // replicas share it; then the arena is copied, else taken over as it is.
  std::byte* into = st.arena->writable_bytes().data();
  for (int c = 0; c < replicas_; ++c) {
    if (c == replica_) continue;
    const tensor_payload& s = *st.sums[static_cast<std::size_t>(c)];
    if (status ok = check(s, c); !ok) return make_error(ok.message());
    std::memcpy(into + at(c), s.bytes().data(), s.nbytes());
  }
  tensor arena = st.arena->take();
  auto whole = param_set::from_parts(st.local->entries(), st.local->block_offsets(),
                                     st.local->first_block(), std::move(arena));
  if (!whole) return make_error(who(step) + ": " + whole.message());
  out.result = reduce_result{stage_, step, std::make_shared<const param_set>(std::move(*whole))};
  steps_.erase(step);
  return out;
}

}  // namespace pipeworks
