// xoshiro256** with splitmix64 seeding; the reference algorithms by Blackman and Vigna.
#include "ops/data/rng.hpp"

#include <cmath>
#include <numbers>

namespace pipeworks {
namespace {
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

rng::rng(std::uint64_t seed) {
  std::uint64_t sm = seed;
  for (auto& s : s_) s = splitmix64(sm);
}

rng rng::for_stream(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t sm = stream ^ 0x5851f42d4c957f2dULL;
  return rng(seed ^ splitmix64(sm));
}

std::uint64_t rng::next_u64() {
  const std::uint64_t out = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return out;
}

std::uint64_t rng::uniform(std::uint64_t n) {
  if (n <= 1) return 0;
  // Reject the lowest (2^64 mod n) values so that every residue is equally likely.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    std::uint64_t x = next_u64();
    if (x >= threshold) return x % n;
  }
}

double rng::uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform_double();
  while (u1 <= 0.0) u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

void shuffle(std::span<std::int64_t> items, rng& gen) {
  for (std::size_t i = items.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(gen.uniform(i));
    std::swap(items[i - 1], items[j]);
  }
}

std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed,
                                           std::uint64_t stream) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n < 0 ? 0 : n));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
  rng gen = rng::for_stream(seed, stream);
  shuffle(idx, gen);
  return idx;
}

}  // namespace pipeworks
