// Row reductions (max, sum, dot) written with eight independent accumulators, so gcc vectorises
// them without -ffast-math. The order of additions is fixed: results do not depend on threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>

namespace pipeworks {

inline constexpr int reduce_lanes = 8;

template <class T>
T row_max(const T* x, std::int64_t n) {
  T lane[reduce_lanes];
  const std::int64_t body = n / reduce_lanes * reduce_lanes;
  const T first = n > 0 ? x[0] : T(0);
  for (int l = 0; l < reduce_lanes; l++) lane[l] = first;
  for (std::int64_t i = 0; i < body; i += reduce_lanes)
    for (int l = 0; l < reduce_lanes; l++) lane[l] = std::max(lane[l], x[i + l]);
  T m = first;
  for (int l = 0; l < reduce_lanes; l++) m = std::max(m, lane[l]);
  for (std::int64_t i = body; i < n; i++) m = std::max(m, x[i]);
  return m;
}

template <class T>
T row_sum(const T* x, std::int64_t n) {
  T lane[reduce_lanes] = {};
  const std::int64_t body = n / reduce_lanes * reduce_lanes;
  for (std::int64_t i = 0; i < body; i += reduce_lanes)
    for (int l = 0; l < reduce_lanes; l++) lane[l] += x[i + l];
  T s = 0;
  for (std::int64_t i = body; i < n; i++) s += x[i];
  for (int l = 0; l < reduce_lanes; l++) s += lane[l];
  return s;
}

template <class T>
T row_dot(const T* a, const T* b, std::int64_t n) {
  T lane[reduce_lanes] = {};
  const std::int64_t body = n / reduce_lanes * reduce_lanes;
  for (std::int64_t i = 0; i < body; i += reduce_lanes)
    for (int l = 0; l < reduce_lanes; l++) lane[l] += a[i + l] * b[i + l];
  T s = 0;
  for (std::int64_t i = body; i < n; i++) s += a[i] * b[i];
  for (int l = 0; l < reduce_lanes; l++) s += lane[l];
  return s;
}

// The sum of squares of xs in double, in a fixed order that vectorises: eight running sums over
// the elements i = 8k + j, added together at the end. The same order on every run and in every
// caller (the trainer, the pipeline's stages), so norms are reproducible bit for bit.
template <class T>
double squares(std::span<const T> xs) {
  constexpr std::size_t lanes = 8;
  double part[lanes] = {};
  const std::size_t n = xs.size(), whole = n - n % lanes;
  for (std::size_t i = 0; i < whole; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j)
      part[j] += static_cast<double>(xs[i + j]) * static_cast<double>(xs[i + j]);
  for (std::size_t i = whole; i < n; ++i)
    part[i - whole] += static_cast<double>(xs[i]) * static_cast<double>(xs[i]);
  double sq = 0;
  for (double p : part) sq += p;
  return sq;
}

}  // namespace pipeworks
