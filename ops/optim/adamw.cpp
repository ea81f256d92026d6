// AdamW with decoupled weight decay and bias correction, in the order torch.optim.AdamW uses.
#include <cmath>

#include "ops/optim/optimizer.hpp"
#include "ops/optim/parallel_for.hpp"

namespace pipeworks {

template <class T>
void adamw_update(std::span<T> w_out, std::span<const T> w, std::span<const T> g,
                  std::span<T> m, std::span<T> v, std::int64_t t, double lr, double beta1,
                  double beta2, double eps, double weight_decay) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  const T decay = static_cast<T>(1.0 - lr * weight_decay);
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T one_b1 = static_cast<T>(1.0 - beta1), one_b2 = static_cast<T>(1.0 - beta2);
  const T step_size = static_cast<T>(lr / bc1);
  const T bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  const T eps_t = static_cast<T>(eps);
  T* out = w_out.data();
  const T* wp = w.data();
  const T* gp = g.data();
  T* mp = m.data();
  T* vp = v.data();
  optim_detail::for_chunks(w.size(), [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const T gi = gp[i];
      const T mi = b1 * mp[i] + one_b1 * gi;
      const T vi = b2 * vp[i] + one_b2 * gi * gi;
      mp[i] = mi;
      vp[i] = vi;
      const T denom = std::sqrt(vi) / bc2_sqrt + eps_t;
      out[i] = wp[i] * decay - step_size * (mi / denom);
    }
  });
}

template void adamw_update<float>(std::span<float>, std::span<const float>,
                                  std::span<const float>, std::span<float>, std::span<float>,
                                  std::int64_t, double, double, double, double, double);
template void adamw_update<double>(std::span<double>, std::span<const double>,
                                   std::span<const double>, std::span<double>, std::span<double>,
                                   std::int64_t, double, double, double, double, double);

}  // namespace pipeworks
