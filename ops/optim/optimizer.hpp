// Optimizers as pure updates over spans: new weights from old weights, gradients and the owner's
// optimizer state (PyTorch's SGD-with-momentum and AdamW semantics). Generic over float and double.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

enum class optimizer_kind { sgd, adamw };

result<optimizer_kind> parse_optimizer_kind(std::string_view name);  // "sgd" | "adamw"
std::string_view optimizer_kind_name(optimizer_kind kind);

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::adamw;
  double lr = 1e-3;  // the base rate; a schedule passes the current one to optimizer_step
  double momentum = 0.9;             // sgd
  double beta1 = 0.9, beta2 = 0.999;  // adamw
  double eps = 1e-8;                  // adamw
  double weight_decay = 0.0;  // sgd: added to the gradient; adamw: decoupled, w *= 1 - lr*wd
};

// PyTorch's defaults for the kind (AdamW: weight decay 0.01; SGD: lr 0.1, momentum 0.9).
optimizer_config default_optimizer_config(optimizer_kind kind);
// An error naming the first field outside its range.
status validate(const optimizer_config& config);

// The state of one parameter block; it belongs to whoever owns the parameters.
template <class T>
struct optimizer_state {
  std::vector<T> m;        // SGD momentum buffer, or Adam's first moment
  std::vector<T> v;        // Adam's second moment (empty for SGD)
  std::int64_t step = 0;   // updates applied so far
};

// v = momentum*v + (g + wd*w); w_out = w - lr*v. w_out may alias w. velocity starts at zero,
// which matches PyTorch's first step (buffer = g + wd*w).
template <class T>
void sgd_update(std::span<T> w_out, std::span<const T> w, std::span<const T> g,
                std::span<T> velocity, double lr, double momentum, double weight_decay);

// w1 = w*(1 - lr*wd); m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²;
// w_out = w1 - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). t is this update's step, from 1.
// w_out may alias w.
template <class T>
void adamw_update(std::span<T> w_out, std::span<const T> w, std::span<const T> g,
                  std::span<T> m, std::span<T> v, std::int64_t t, double lr, double beta1,
                  double beta2, double eps, double weight_decay);

// One update of a block with the config's kind at rate lr: sizes the state on first use, checks
// that every span has w's size (naming block in the message), then increments state.step.
template <class T>
status optimizer_step(const optimizer_config& config, double lr, std::span<const T> w,
                      std::span<const T> g, optimizer_state<T>& state, std::span<T> w_out,
                      std::string_view block = "parameters");

}  // namespace pipeworks
