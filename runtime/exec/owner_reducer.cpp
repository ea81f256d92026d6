// ZeRO's exchanges across processes, by tensor owner: pieces are kept until every replica's has
// come, then summed in replica order; squared norms and updated tensors are kept until every
// owner's has come. Every size, kind, index and step is checked; a duplicate is an error.
#include "runtime/exec/owner_reducer.hpp"

#include <cstring>
#include <string>

#include "ops/device/device_ops.hpp"
#include "ops/train/zero_shards.hpp"

namespace pipeworks {

namespace {

// The elements of `owner`'s tensors of s, in entry order.
std::int64_t owned_numel(const param_set& s, const std::vector<int>& owners, int owner) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < owners.size(); ++i)
    if (owners[i] == owner) n += s.entries()[i].numel();
  return n;
}

// `owner`'s tensors of s, concatenated in entry order.
result<tensor_payload> pack(const param_set& s, const std::vector<int>& owners, int owner) {
  const std::size_t elem = dtype_size(s.type());
  auto out = tensor_payload::allocate(s.type(), {owned_numel(s, owners, owner)});
  if (!out) return make_error(out.message());
  std::byte* to = out->writable_bytes().data();
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (owners[i] != owner) continue;
    const param_entry& e = s.entries()[i];
    const std::size_t n = static_cast<std::size_t>(e.numel()) * elem;
    std::memcpy(to, s.arena().bytes() + e.offset * static_cast<std::int64_t>(elem), n);
    to += n;
  }
  return std::move(*out);
}

// into's `owner` tensors from a pack of them.
void unpack(param_set& into, const std::vector<int>& owners, int owner, const tensor_payload& p) {
  const std::size_t elem = dtype_size(into.type());
  const std::byte* from = p.bytes().data();
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (owners[i] != owner) continue;
    const param_entry& e = into.entries()[i];
    const std::size_t n = static_cast<std::size_t>(e.numel()) * elem;
    std::memcpy(into.arena().bytes() + e.offset * static_cast<std::int64_t>(elem), from, n);
    from += n;
  }
}

// sum's tensor e = the replicas' values added in replica order; values[r] points at replica r's.
template <class T>
void add_in_order(param_set& sum, const param_entry& e, const std::vector<const std::byte*>& values) {
  T* s = reinterpret_cast<T*>(sum.arena().bytes()) + e.offset;
  const auto n = static_cast<std::size_t>(e.numel());
  std::memcpy(s, values[0], n * sizeof(T));
  for (std::size_t r = 1; r < values.size(); ++r) {
    const T* v = reinterpret_cast<const T*>(values[r]);
    for (std::size_t i = 0; i < n; ++i) s[i] += v[i];
  }
}

}  // namespace

owner_reducer::owner_reducer(int stage, int replica, int replicas)
    : stage_(stage), replica_(replica), replicas_(replicas) {}

std::string owner_reducer::who(int step) const {
  return "the ZeRO exchange of stage " + std::to_string(stage_) + " at replica " +
         std::to_string(replica_) + ", step " + std::to_string(step);
}

owner_reducer::exchange& owner_reducer::at(std::map<int, exchange>& by_step, int step) {
  exchange& x = by_step[step];
  x.from.resize(static_cast<std::size_t>(replicas_));
  x.squares.resize(static_cast<std::size_t>(replicas_));
  return x;
}

status owner_reducer::check_layout(const param_set& local) {
  if (local.type() != dtype::f32 && local.type() != dtype::f64)
    return make_error("only F32 and F64 values can be exchanged");
  if (local.where().kind != device_kind::cpu) return make_error("the values are not on the host");
  if (owners_.empty()) owners_ = shard_owners(local, replicas_);
  if (owners_.size() != local.entries().size())
    return make_error(std::to_string(local.entries().size()) + " tensors, not the " +
                      std::to_string(owners_.size()) + " of the stage's earlier steps");
  return {};
}

result<owner_reducer::outputs> owner_reducer::add_local(reduce_request request) {
  const int step = request.step;
  if (request.stage != stage_ || request.replica != replica_)
    return make_error(who(step) + ": a request of stage " + std::to_string(request.stage) +
                      ", replica " + std::to_string(request.replica));
  if (!request.grads) return make_error(who(step) + ": no values (null)");
  if (status s = check_layout(*request.grads); !s) return make_error(who(step) + ": " + s.message());
  const bool weights = request.kind == reduce_kind::weights;
  exchange& x = at(weights ? weights_ : grads_, step);
  if (x.local) return make_error(who(step) + ": the local values arrived twice");
  x.local = std::move(request.grads);
  outputs out;
  if (weights) {
    auto mine = pack(*x.local, owners_, replica_);
    if (!mine) return make_error(who(step) + ": " + mine.message());
    for (int r = 0; r < replicas_; ++r)
      if (r != replica_)
        out.sums.emplace_back(r, gather_chunk{stage_, step, replica_, *mine, chunk_kind::owned_weights});
    return advance_weights(step, std::move(out));
  }
  for (int o = 0; o < replicas_; ++o) {
    if (o == replica_) continue;
    auto piece = pack(*x.local, owners_, o);
    if (!piece) return make_error(who(step) + ": " + piece.message());
    out.pieces.emplace_back(o, reduce_chunk{stage_, step, replica_, o, std::move(*piece),
                                            chunk_kind::owned_gradient});
  }
  return advance_gradient(step, std::move(out));
}

result<owner_reducer::outputs> owner_reducer::add_piece(reduce_chunk piece) {
  if (piece.kind != chunk_kind::owned_gradient || piece.stage != stage_ || piece.chunk != replica_ ||
      piece.replica < 0 || piece.replica >= replicas_ || piece.replica == replica_)
    return make_error(who(piece.step) + ": a piece of kind " + std::to_string(piece.kind) +
                      " for owner " + std::to_string(piece.chunk) + " from replica " +
                      std::to_string(piece.replica) + " of stage " + std::to_string(piece.stage) +
                      " is not this replica's to sum (it sums kind " +
                      std::to_string(chunk_kind::owned_gradient) + " for itself, from the " +
                      std::to_string(replicas_ - 1) + " other replicas)");
  exchange& x = at(grads_, piece.step);
  auto& slot = x.from[static_cast<std::size_t>(piece.replica)];
  if (slot || x.sum)
    return make_error(who(piece.step) + ": replica " + std::to_string(piece.replica) +
                      "'s gradient piece arrived twice");
  slot = std::move(piece.data);
  return advance_gradient(piece.step, {});
}

result<owner_reducer::outputs> owner_reducer::add_gathered(gather_chunk share) {
  const bool weights = share.kind == chunk_kind::owned_weights;
  if ((!weights && share.kind != chunk_kind::owned_squares) || share.stage != stage_ ||
      share.chunk < 0 || share.chunk >= replicas_ || share.chunk == replica_)
    return make_error(who(share.step) + ": a share of kind " + std::to_string(share.kind) +
                      " from owner " + std::to_string(share.chunk) + " of stage " +
                      std::to_string(share.stage) + " is not another replica's squared norms (kind " +
                      std::to_string(chunk_kind::owned_squares) + ") or tensors (kind " +
                      std::to_string(chunk_kind::owned_weights) + ")");
  exchange& x = at(weights ? weights_ : grads_, share.step);
  auto& slot = weights ? x.from[static_cast<std::size_t>(share.chunk)]
                       : x.squares[static_cast<std::size_t>(share.chunk)];
  if (slot)
    return make_error(who(share.step) + ": owner " + std::to_string(share.chunk) + "'s " +
                      (weights ? "tensors" : "squared norms") + " arrived twice");
  slot = std::move(share.data);
  return weights ? advance_weights(share.step, {}) : advance_gradient(share.step, {});
}

result<owner_reducer::outputs> owner_reducer::advance_gradient(int step, outputs out) {
  exchange& x = grads_[step];
  if (!x.local) return out;  // pieces and norms wait for the local gradient's layout
  const param_set& local = *x.local;
  const dtype t = local.type();
  if (!x.sum) {
    for (int r = 0; r < replicas_; ++r)
      if (r != replica_ && !x.from[static_cast<std::size_t>(r)]) return out;
    const std::int64_t n = owned_numel(local, owners_, replica_);
    for (int r = 0; r < replicas_; ++r) {
      const auto& p = x.from[static_cast<std::size_t>(r)];
      if (r != replica_ && (p->type() != t || p->shape() != shape_t{n}))
        return make_error(who(step) + ": replica " + std::to_string(r) + "'s piece has shape " +
                          shape_string(p->shape()) + ", not [" + std::to_string(n) + "]");
    }
    x.sum = std::make_shared<param_set>(local.zeros_like());
    std::vector<std::int64_t> at_in_pack(static_cast<std::size_t>(replicas_), 0);
    std::vector<double> mine;
    const std::size_t elem = dtype_size(t);
    for (std::size_t i = 0; i < owners_.size(); ++i) {
      if (owners_[i] != replica_) continue;
      const param_entry& e = local.entries()[i];
      std::vector<const std::byte*> values;
      for (int r = 0; r < replicas_; ++r) {
        if (r == replica_) {
          values.push_back(local.arena().bytes() + e.offset * static_cast<std::int64_t>(elem));
        } else {
          auto& off = at_in_pack[static_cast<std::size_t>(r)];
          values.push_back(x.from[static_cast<std::size_t>(r)]->bytes().data() + off);
          off += e.numel() * static_cast<std::int64_t>(elem);
        }
      }
      if (t == dtype::f32) {
        add_in_order<float>(*x.sum, e, values);
        mine.push_back(sum_of_squares<float>(x.sum->arena(), e.offset, e.numel()));
      } else {
        add_in_order<double>(*x.sum, e, values);
        mine.push_back(sum_of_squares<double>(x.sum->arena(), e.offset, e.numel()));
      }
    }
    x.from.assign(static_cast<std::size_t>(replicas_), std::nullopt);
    auto packed = tensor_payload::allocate(dtype::f64, {static_cast<std::int64_t>(mine.size())});
    if (!packed) return make_error(who(step) + ": " + packed.message());
    if (!mine.empty()) std::memcpy(packed->writable_bytes().data(), mine.data(), mine.size() * sizeof(double));
    x.squares[static_cast<std::size_t>(replica_)] = *packed;
    for (int r = 0; r < replicas_; ++r)
      if (r != replica_)
        out.sums.emplace_back(r, gather_chunk{stage_, step, replica_, *packed, chunk_kind::owned_squares});
  }
  for (const auto& s : x.squares)
    if (!s) return out;
  // Every owner's squared norms are in: each tensor's, in entry order.
  std::vector<double> squares(owners_.size());
  std::vector<std::size_t> next(static_cast<std::size_t>(replicas_), 0);
  for (int o = 0; o < replicas_; ++o) {
    const tensor_payload& s = *x.squares[static_cast<std::size_t>(o)];
    std::size_t count = 0;
    for (int owner : owners_) count += owner == o ? 1 : 0;
    if (s.type() != dtype::f64 || s.shape() != shape_t{static_cast<std::int64_t>(count)})
      return make_error(who(step) + ": owner " + std::to_string(o) + " sent " +
                        shape_string(s.shape()) + " squared norms for its " + std::to_string(count) +
                        " tensors");
  }
  for (std::size_t i = 0; i < owners_.size(); ++i) {
    const auto o = static_cast<std::size_t>(owners_[i]);
    std::memcpy(&squares[i], x.squares[o]->bytes().data() + next[o]++ * sizeof(double), sizeof(double));
  }
  out.result = reduce_result{stage_, step, std::move(x.sum), reduce_kind::gradient, std::move(squares)};
  grads_.erase(step);
  return out;
}

result<owner_reducer::outputs> owner_reducer::advance_weights(int step, outputs out) {
  exchange& x = weights_[step];
  if (!x.local) return out;
  for (int o = 0; o < replicas_; ++o)
    if (o != replica_ && !x.from[static_cast<std::size_t>(o)]) return out;
  const param_set& local = *x.local;
  auto version = std::make_shared<param_set>(local.clone());
  for (int o = 0; o < replicas_; ++o) {
    if (o == replica_) continue;
    const tensor_payload& p = *x.from[static_cast<std::size_t>(o)];
    const std::int64_t n = owned_numel(local, owners_, o);
    if (p.type() != local.type() || p.shape() != shape_t{n})
      return make_error(who(step) + ": owner " + std::to_string(o) + "'s tensors have shape " +
                        shape_string(p.shape()) + ", not [" + std::to_string(n) + "]");
    unpack(*version, owners_, o, p);
  }
  out.result = reduce_result{stage_, step, std::move(version), reduce_kind::weights, {}};
  weights_.erase(step);
  return out;
}

}  // namespace pipeworks
