// SGD with momentum and L2 weight decay, as torch.optim.SGD (dampening 0, no Nesterov).
#include "ops/optim/optimizer.hpp"
#include "ops/optim/parallel_for.hpp"

namespace pipeworks {

template <class T>
void sgd_update(std::span<T> w_out, std::span<const T> w, std::span<const T> g,
                std::span<T> velocity, double lr, double momentum, double weight_decay) {
  const T lr_t = static_cast<T>(lr), mu = static_cast<T>(momentum);
  const T wd = static_cast<T>(weight_decay);
  T* out = w_out.data();
  const T* wp = w.data();
  const T* gp = g.data();
  T* vp = velocity.data();
  optim_detail::for_chunks(w.size(), [=](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const T d = gp[i] + wd * wp[i];
      const T vel = mu * vp[i] + d;
      vp[i] = vel;
      out[i] = wp[i] - lr_t * vel;
    }
  });
}

template void sgd_update<float>(std::span<float>, std::span<const float>, std::span<const float>,
                                std::span<float>, double, double, double);
template void sgd_update<double>(std::span<double>, std::span<const double>,
                                 std::span<const double>, std::span<double>, double, double,
                                 double);

}  // namespace pipeworks
