// Weight-init fills over a span. Each named tensor draws from its own portable rng stream
// (seed, hash of the name), so init does not depend on the order of tensors or the split.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "ops/data/rng.hpp"

namespace pipeworks {

// FNV-1a: a stable 64-bit hash of a tensor name.
inline std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <class T>
void fill_normal(std::span<T> w, std::uint64_t seed, std::string_view name, double std_dev) {
  rng r = rng::for_stream(seed, name_hash(name));
  for (auto& x : w) x = static_cast<T>(std_dev * r.normal());
}

// Uniform in [-bound, bound).
template <class T>
void fill_uniform(std::span<T> w, std::uint64_t seed, std::string_view name, double bound) {
  rng r = rng::for_stream(seed, name_hash(name));
  for (auto& x : w) x = static_cast<T>(bound * (2.0 * r.uniform_double() - 1.0));
}

template <class T>
void fill_value(std::span<T> w, T v) {
  for (auto& x : w) x = v;
}

}  // namespace pipeworks
