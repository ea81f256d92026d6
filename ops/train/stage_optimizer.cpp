// The optimizer step of one parameter set: gradient norm, clipping, update into a new snapshot.
#include "ops/train/stage_optimizer.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <utility>

#include <tbb/parallel_for.h>

#include "ops/device/device_memory.hpp"
#include "ops/device/device_ops.hpp"
#include "ops/device/optimizer_update.hpp"
#include "ops/optim/lr_schedule.hpp"

namespace pipeworks {

template <class T>
std::vector<double> tensor_squares(const param_set& g) {
  std::vector<double> out;
  out.reserve(g.entries().size());
  for (const param_entry& e : g.entries()) out.push_back(sum_of_squares<T>(g.arena(), e.offset, e.numel()));
  return out;
}

double fold_squares(const std::vector<double>& tensor_sq, double start) {
  for (double x : tensor_sq) start += x;
  return start;
}

template <class T>
double sum_of_squares(const param_set& g) {
  return fold_squares(tensor_squares<T>(g));
}

template <class T>
stage_optimizer<T>::stage_optimizer(const param_set& layout, train_config cfg)
    : cfg_(cfg), state_(layout.entries().size()) {}

template <class T>
stage_optimizer<T>::~stage_optimizer() {
  if (account_) account_->credit(static_cast<std::size_t>(charged_));
  try {  // offloaded moments are freed after the GPU's last update of them
    for (const device_moments& d : on_device_) settle_moments(d);
  } catch (const std::exception&) {
    // A GPU that fails here has failed the run already; its error is reported there.
  }
}

// Host moments are std::vectors, not tensors: their growth is charged here, to the account of
// the thread that stepped (a GPU's moments are its allocator's).
template <class T>
void stage_optimizer<T>::charge_moments() {
  std::int64_t host = 0;
  for (const optimizer_state<T>& s : state_)
    host += static_cast<std::int64_t>((s.m.size() + s.v.size()) * sizeof(T));
  if (host == charged_) return;
  if (!account_) account_ = current_account();
  if (!account_) return;
  if (host > charged_) account_->charge(static_cast<std::size_t>(host - charged_));
  else account_->credit(static_cast<std::size_t>(charged_ - host));
  charged_ = host;
}

template <class T>
double stage_optimizer<T>::lr_for(std::int64_t step) const {
  return lr_at(lr_schedule{cfg_.optim.lr, cfg_.min_lr, cfg_.warmup_steps, cfg_.steps}, step);
}

template <class T>
result<param_snapshot> stage_optimizer<T>::apply(const param_snapshot& latest, param_set& g,
                                                 std::int64_t step, std::optional<double> global_sq,
                                                 const std::vector<double>* g_squares) {
  last_grad_norm_ = std::sqrt(g_squares ? fold_squares(*g_squares) : sum_of_squares<T>(g));
  if (!std::isfinite(last_grad_norm_))
    return make_error("the gradient is not finite at step " + std::to_string(step + 1));
  const double norm = global_sq ? std::sqrt(*global_sq) : last_grad_norm_;
  if (!std::isfinite(norm))
    return make_error("the global gradient norm is not finite at step " + std::to_string(step + 1));
  if (cfg_.clip_grad_norm > 0 && norm > cfg_.clip_grad_norm) {
    const T f = static_cast<T>(cfg_.clip_grad_norm / (norm + 1e-6));
    scale<T>(g.arena(), f);
  }
  // A version nobody holds any more (only this object) is the next output buffer, so a run in
  // which no one keeps old versions allocates nothing per step.
  // use_count is a relaxed load: the fence orders the reuse after other threads' last reads
  // of the buffer (their releases of the pointer).
  const bool unheld = spare_ && spare_.use_count() == 1;
  if (unheld) std::atomic_thread_fence(std::memory_order_acquire);
  std::shared_ptr<param_set> next =
      unheld ? std::move(spare_) : std::make_shared<param_set>(latest->uninitialized_like());
  spare_.reset();
  const double lr = lr_for(step);
  const auto& entries = latest->entries();
  if (on_device_.size() != entries.size()) on_device_.resize(entries.size());
  std::vector<status> done(entries.size());
  auto update = [&](std::size_t i) {
    const param_entry& e = entries[i];
    if (!owns(i)) {  // another replica's: its values stay the latest's until that owner's come
      const std::size_t elem = sizeof(T);
      copy_bytes(next->arena().bytes() + e.offset * elem, next->arena().where(),
                 latest->arena().bytes() + e.offset * elem, latest->arena().where(),
                 static_cast<std::size_t>(e.numel()) * elem, next->arena().stream());
      return;
    }
    optimizer_config oc = cfg_.optim;
    if (e.shape.size() < 2 && !cfg_.decay_vectors) oc.weight_decay = 0;
    on_device_[i].in_host = offload_;  // read when the moments are made
    done[i] = optimizer_update<T>(oc, lr, latest->arena(), std::as_const(g).arena(), next->arena(),
                                  e.offset, e.numel(), state_[i], on_device_[i], e.name);
  };
  // On the CPU every tensor's update is one task of a single parallel loop (each splits itself
  // again when large), not a loop of parallel loops: one wait for all instead of one per tensor.
  // The tensors are disjoint and the updates elementwise, so the bits do not change. A GPU's
  // updates go onto its stream in order.
  if (latest->arena().where().kind == device_kind::cpu)
    tbb::parallel_for(std::size_t{0}, entries.size(), update);
  else
    for (std::size_t i = 0; i < entries.size(); ++i) update(i);
  for (const status& s : done)
    if (!s) return make_error(s.message());
  charge_moments();
  // Keep the retired version's buffer when it is one this optimizer made.
  // Under ZeRO (owned_ set) the latest is the replicas' gathered version, which others share
  // without this optimizer seeing their references: its buffer is never reused here.
  if (owned_.empty() && mine_ == latest.get()) spare_ = std::const_pointer_cast<param_set>(latest);
  mine_ = next.get();
  return param_snapshot(std::move(next));
}

template <class T>
const std::vector<optimizer_state<T>>& stage_optimizer<T>::state() const {
  for (std::size_t i = 0; i < on_device_.size(); ++i)
    read_moments<T>(on_device_[i], cfg_.optim.kind, state_[i]);
  return state_;
}

template <class T>
std::int64_t stage_optimizer<T>::moment_bytes() const {
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const bool on_device = i < on_device_.size() && (!on_device_[i].m.empty() || !on_device_[i].v.empty());
    if (on_device)
      bytes += static_cast<std::int64_t>(on_device_[i].m.nbytes() + on_device_[i].v.nbytes());
    else
      bytes += static_cast<std::int64_t>((state_[i].m.size() + state_[i].v.size()) * sizeof(T));
  }
  return bytes;
}

template <class T>
void stage_optimizer<T>::own_only(std::vector<bool> owned) {
  if (owned.size() != state_.size())
    throw pipeworks_error("own_only: " + std::to_string(owned.size()) + " marks for " +
                          std::to_string(state_.size()) + " tensors");
  owned_ = std::move(owned);
  for (std::size_t i = 0; i < state_.size(); ++i)
    if (!owned_[i]) state_[i] = optimizer_state<T>{};  // no moments for another's tensor
  charge_moments();
}

template <class T>
void stage_optimizer<T>::set_state(std::vector<optimizer_state<T>> s) {
  state_ = std::move(s);
  for (const device_moments& d : on_device_) settle_moments(d);  // offloaded: freed after the GPU
  on_device_.clear();  // the next update on a GPU uploads the restored moments
  charge_moments();
}

template class stage_optimizer<float>;
template class stage_optimizer<double>;
template double sum_of_squares<float>(const param_set&);
template double sum_of_squares<double>(const param_set&);
template std::vector<double> tensor_squares<float>(const param_set&);
template std::vector<double> tensor_squares<double>(const param_set&);

}  // namespace pipeworks
