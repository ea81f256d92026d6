// Optimizer configuration (parsing, defaults, range checks) and the per-block step dispatch.
#include "ops/optim/optimizer.hpp"

#include <cmath>

namespace pipeworks {

result<optimizer_kind> parse_optimizer_kind(std::string_view name) {
  if (name == "sgd") return optimizer_kind::sgd;
  if (name == "adamw") return optimizer_kind::adamw;
  return make_error("unknown optimizer '" + std::string(name) + "' (choose sgd or adamw)");
}

std::string_view optimizer_kind_name(optimizer_kind kind) {
  return kind == optimizer_kind::sgd ? "sgd" : "adamw";
}

optimizer_config default_optimizer_config(optimizer_kind kind) {
  optimizer_config c;
  c.kind = kind;
  if (kind == optimizer_kind::sgd) {
    c.lr = 0.1;
    c.momentum = 0.9;
    c.weight_decay = 0.0;
  } else {
    c.lr = 1e-3;
    c.weight_decay = 0.01;
  }
  return c;
}

status validate(const optimizer_config& c) {
  auto bad = [](const char* field, double v, const char* range) {
    return make_error(std::string("optimizer ") + field + " = " + std::to_string(v) +
                      " is outside " + range);
  };
  if (!std::isfinite(c.lr) || c.lr < 0) return bad("lr", c.lr, "[0, inf)");
  if (!std::isfinite(c.weight_decay) || c.weight_decay < 0)
    return bad("weight_decay", c.weight_decay, "[0, inf)");
  if (c.kind == optimizer_kind::sgd) {
    if (!(c.momentum >= 0 && c.momentum < 1)) return bad("momentum", c.momentum, "[0, 1)");
  } else {
    if (!(c.beta1 >= 0 && c.beta1 < 1)) return bad("beta1", c.beta1, "[0, 1)");
    if (!(c.beta2 >= 0 && c.beta2 < 1)) return bad("beta2", c.beta2, "[0, 1)");
    if (!(c.eps > 0) || !std::isfinite(c.eps)) return bad("eps", c.eps, "(0, inf)");
  }
  return {};
}

template <class T>
status optimizer_step(const optimizer_config& config, double lr, std::span<const T> w,
                      std::span<const T> g, optimizer_state<T>& state, std::span<T> w_out,
                      std::string_view block) {
  const std::size_t n = w.size();
  auto mismatch = [&](const char* what, std::size_t got) {
    return make_error("optimizer step on " + std::string(block) + ": " + what + " has " +
                      std::to_string(got) + " elements, the weights have " + std::to_string(n));
  };
  if (g.size() != n) return mismatch("the gradient", g.size());
  if (w_out.size() != n) return mismatch("the output", w_out.size());
  if (state.m.empty()) state.m.assign(n, T(0));
  if (state.m.size() != n) return mismatch("the optimizer state", state.m.size());
  if (config.kind == optimizer_kind::sgd) {
    sgd_update<T>(w_out, w, g, state.m, lr, config.momentum, config.weight_decay);
  } else {
    if (state.v.empty()) state.v.assign(n, T(0));
    if (state.v.size() != n) return mismatch("the optimizer state", state.v.size());
    adamw_update<T>(w_out, w, g, state.m, state.v, state.step + 1, lr, config.beta1,
                    config.beta2, config.eps, config.weight_decay);
  }
  ++state.step;
  return {};
}

template status optimizer_step<float>(const optimizer_config&, double, std::span<const float>,
                                      std::span<const float>, optimizer_state<float>&,
                                      std::span<float>, std::string_view);
template status optimizer_step<double>(const optimizer_config&, double, std::span<const double>,
                                       std::span<const double>, optimizer_state<double>&,
                                       std::span<double>, std::string_view);

}  // namespace pipeworks
