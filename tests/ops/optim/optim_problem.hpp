// The small problem both optimizer tests step through: five weights pulled toward c by the
// gradient of sum (w - c)^2, plus a step-dependent offset (the torch.optim reference values use it).
#pragma once
#include <cstddef>
#include <vector>

namespace pipeworks::optim_test {

inline const std::vector<double> w0 = {0.5, -1.25, 2.0, 0.0, -0.75};
inline const std::vector<double> c = {0.1, 0.2, -0.3, 0.4, -0.5};
inline double grad(double w, std::size_t i, int k) {
  return 2.0 * (w - c[i]) + 0.01 * (k + 1) * (static_cast<double>(i) - 2.0);
}

}  // namespace pipeworks::optim_test
