// The optimizer step of one parameter set: gradient norm, clipping, update into a new snapshot.
#include "ops/train/stage_optimizer.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <utility>

#include "ops/device/device_memory.hpp"
#include "ops/device/device_ops.hpp"
#include "ops/optim/lr_schedule.hpp"

namespace pipeworks {

template <class T>
std::vector<double> block_squares(const param_set& g) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(g.block_count()));
  for (int b = g.first_block(); b < g.end_block(); ++b) out.push_back(sum_of_squares<T>(g.arena(), g.block_begin(b), g.block_end(b) - g.block_begin(b)));
  return out;
}

double fold_squares(const std::vector<double>& block_sq, double start) {
  for (double x : block_sq) start += x;
  return start;
}

template <class T>
double sum_of_squares(const param_set& g) {
  return fold_squares(block_squares<T>(g));
}

template <class T>
stage_optimizer<T>::stage_optimizer(const param_set& layout, train_config cfg)
    : cfg_(cfg), state_(layout.entries().size()) {}

template <class T>
double stage_optimizer<T>::lr_for(std::int64_t step) const {
  return lr_at(lr_schedule{cfg_.optim.lr, cfg_.min_lr, cfg_.warmup_steps, cfg_.steps}, step);
}

template <class T>
result<param_snapshot> stage_optimizer<T>::apply(const param_snapshot& latest, param_set& g,
                                                 std::int64_t step, std::optional<double> global_sq) {
  last_grad_norm_ = std::sqrt(sum_of_squares<T>(g));
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
  if (latest->where().kind != device_kind::cpu) {
    if (status s = apply_on_gpu(*latest, g, *next, lr); !s) return make_error(s.message());
  } else {
  const auto& entries = latest->entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const param_entry& e = entries[i];
    optimizer_config oc = cfg_.optim;
    if (e.shape.size() < 2 && !cfg_.decay_vectors) oc.weight_decay = 0;
    if (status s = optimizer_step<T>(oc, lr, latest->values<T>(e), std::as_const(g).values<T>(e),
                                     state_[i], next->values<T>(e), e.name);
        !s)
      return make_error(s.message());
  }
  }
  // Keep the retired version's buffer when it is one this optimizer made.
  if (mine_ == latest.get()) spare_ = std::const_pointer_cast<param_set>(latest);
  mine_ = next.get();
  return param_snapshot(std::move(next));
}

template <class T>
status stage_optimizer<T>::apply_on_gpu(const param_set& latest, const param_set& g,
                                        param_set& next, double lr) {
  const auto& entries = latest.entries();
  if (gpu_m_.empty()) {  // first update here, or moments restored from a checkpoint
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::int64_t n = entries[i].numel();
      auto upload = [&](const std::vector<T>& host) {
        tensor t = latest.arena().zeros_beside({n}, dtype_of<T>());
        if (host.empty()) return t;
        if (static_cast<std::int64_t>(host.size()) != n)
          throw pipeworks_error("optimizer state of " + entries[i].name + " has " +
                                std::to_string(host.size()) + " elements, the weights " +
                                std::to_string(n));
        copy_bytes(t.bytes(), t.where(), host.data(), device::cpu(), t.nbytes(), t.stream());
        return t;
      };
      gpu_m_.push_back(upload(state_[i].m));
      gpu_v_.push_back(upload(state_[i].v));
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const param_entry& e = entries[i];
    optimizer_config oc = cfg_.optim;
    if (e.shape.size() < 2 && !cfg_.decay_vectors) oc.weight_decay = 0;
    gpu_optimizer_step(oc, lr, latest.arena(), g.arena(), next.arena(), e.offset, e.numel(),
                       gpu_m_[i], gpu_v_[i], state_[i].step + 1);
    ++state_[i].step;
  }
  return {};
}

template <class T>
const std::vector<optimizer_state<T>>& stage_optimizer<T>::state() const {
  for (std::size_t i = 0; i < gpu_m_.size(); ++i) {
    auto down = [](const tensor& d, std::vector<T>& host) {
      const tensor h = d.copy_to(device::cpu());
      host.assign(h.span<T>().begin(), h.span<T>().end());
    };
    down(gpu_m_[i], state_[i].m);
    if (cfg_.optim.kind == optimizer_kind::adamw) down(gpu_v_[i], state_[i].v);
  }
  return state_;
}

template <class T>
void stage_optimizer<T>::set_state(std::vector<optimizer_state<T>> s) {
  state_ = std::move(s);
  gpu_m_.clear();  // the next GPU update uploads the restored moments
  gpu_v_.clear();
}

template class stage_optimizer<float>;
template class stage_optimizer<double>;
template double sum_of_squares<float>(const param_set&);
template double sum_of_squares<double>(const param_set&);
template std::vector<double> block_squares<float>(const param_set&);
template std::vector<double> block_squares<double>(const param_set&);

}  // namespace pipeworks
