// stage_optimizer<T>: what STEP does to one set of parameters: optional clipping, the optimizer
// update into a new immutable snapshot, and the lr schedule. Shared by the trainer and a stage.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ops/device/optimizer_update.hpp"
#include "ops/memory_account.hpp"
#include "ops/model/param_set.hpp"
#include "ops/optim/optimizer.hpp"
#include "base/result.hpp"
#include "ops/train/trainer_config.hpp"

namespace pipeworks {

template <class T>
class stage_optimizer {
 public:
  stage_optimizer(const param_set& layout, train_config cfg);
  ~stage_optimizer();
  stage_optimizer(stage_optimizer&&) noexcept = default;
  stage_optimizer& operator=(stage_optimizer&&) noexcept = default;

  // The new version made from `latest` and the gradient g (same layout) at rate lr_for(step).
  // g is clipped in place when the config asks for it: to the norm whose square is global_sq
  // when given (the whole model's, summed over stages), else to g's own. g's own squares are
  // tensor_squares(g) unless given (ZeRO stage 2: g holds only this replica's tensors' sums, and
  // the owners computed the others'). The buffer of a retired version that nobody else holds
  // any more is reused. An error when the gradient is not finite.
  result<param_snapshot> apply(const param_snapshot& latest, param_set& g, std::int64_t step,
                               std::optional<double> global_sq = std::nullopt,
                               const std::vector<double>* g_squares = nullptr);

  double lr_for(std::int64_t step) const;
  double last_grad_norm() const { return last_grad_norm_; }  // g's own, before clipping
  const train_config& config() const { return cfg_; }
  // The moments and update counts, one per tensor in entry order (checkpoints); a GPU's moments
  // are copied to the host first.
  const std::vector<optimizer_state<T>>& state() const;
  void set_state(std::vector<optimizer_state<T>> s);
  // Sharded optimizer state (ZeRO stage 1, ops/train/zero_shards.hpp): from now on this
  // optimizer updates, and keeps moments for, only the tensors marked owned (one per entry); in
  // each new version the others keep the latest's values until their owners' replace them.
  void own_only(std::vector<bool> owned);
  // The bytes of the moments this optimizer holds (on its device or the host).
  std::int64_t moment_bytes() const;
  // Optimizer offload (the plan's runtime.offload): from now on a GPU's moments are made in
  // page-locked host memory, where its update kernels read and write them (device_moments::
  // in_host): the same bits, less GPU memory. Nothing changes on the CPU, whose moments are host
  // memory already.
  void offload_moments() { offload_ = true; }

 private:
  bool owns(std::size_t entry) const { return owned_.empty() || owned_[entry]; }
  train_config cfg_;
  mutable std::vector<optimizer_state<T>> state_;  // one per tensor, in entry order
  std::vector<device_moments> on_device_;  // a GPU's copies of the moments, one per tensor
  std::shared_ptr<param_set> spare_;       // the version before the latest: reused when unheld
  const param_set* mine_ = nullptr;        // the latest version this optimizer made
  std::vector<bool> owned_;                // per tensor; empty: every tensor
  bool offload_ = false;                   // a GPU's moments in page-locked host memory
  double last_grad_norm_ = 0;
  // The host moments' bytes charged to the memory account current when they grew (the rank's:
  // ops/memory_account.hpp), credited back when this optimizer goes.
  std::shared_ptr<memory_account> account_;
  std::int64_t charged_ = 0;
  void charge_moments();
};

// The sum of squares of g's values, in double: per tensor of g (each summed over its values in
// order), then the tensors' sums added left to right (fold_squares). A pipeline that sums each
// stage's tensor sums in order gets the single-device value bit for bit, and so does a ZeRO
// replica that adds the sums its tensors' owners computed.
template <class T>
double sum_of_squares(const param_set& g);
template <class T>
std::vector<double> tensor_squares(const param_set& g);
double fold_squares(const std::vector<double>& tensor_sq, double start = 0.0);

}  // namespace pipeworks
