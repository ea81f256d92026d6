// Test helpers for the layers: a central finite-difference gradient checker, seeded random
// inputs, and ggml-style normalised error for comparing float results against double ones.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace pipeworks::test {

// Uniform values in [lo, hi) from a seed.
inline std::vector<double> random_values(std::int64_t n, std::uint64_t seed, double lo = -1.0,
                                         double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

struct gradcheck_result {
  // max over i of |a_i - n_i| / max(|a_i|, |n_i|, 1e-3 max_j |n_j|): relative per element, with
  // a floor so that gradients far smaller than the largest one are judged on the common scale.
  double max_rel_error = 0;
  std::int64_t worst = -1;  // the element with the largest error
  double analytic = 0;      // at worst
  double numeric = 0;       // at worst
  double max_numeric = 0;   // max_j |n_j|; 0 means the check saw no gradient at all
};

// Compares analytic[i] with (loss(x + h e_i) - loss(x - h e_i)) / 2h for each of the n
// elements of x. loss() must read x afresh on every call; x is restored afterwards.
inline gradcheck_result gradcheck(const std::function<double()>& loss, double* x, std::int64_t n,
                                  const double* analytic, double h = 1e-5) {
  std::vector<double> numeric(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; i++) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    numeric[i] = (up - down) / (2 * h);
  }
  gradcheck_result r;
  for (double v : numeric) r.max_numeric = std::max(r.max_numeric, std::fabs(v));
  const double floor = std::max(1e-3 * r.max_numeric, 1e-12);
  for (std::int64_t i = 0; i < n; i++) {
    const double a = analytic[i], num = numeric[i];
    const double rel = std::fabs(a - num) / std::max({std::fabs(a), std::fabs(num), floor});
    if (rel > r.max_rel_error || r.worst < 0) {
      r.max_rel_error = rel;
      r.worst = i;
      r.analytic = a;
      r.numeric = num;
    }
  }
  return r;
}

// sum((a - b)^2) / sum(b^2), as ggml's test-backend-ops compares two backends.
template <class A>
double nmse(const std::vector<A>& a, const std::vector<double>& b) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < b.size(); i++) {
    const double d = double(a[i]) - b[i];
    err += d * d;
    ref += b[i] * b[i];
  }
  return ref > 0 ? err / ref : err;
}

}  // namespace pipeworks::test
