// rng: a small, portable random generator (xoshiro256** seeded by splitmix64) whose output is the
// same on every platform and standard library, plus uniform integers, shuffles and normals.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pipeworks {

// One splitmix64 step: advances state and returns the next output.
std::uint64_t splitmix64(std::uint64_t& state);

class rng {
 public:
  explicit rng(std::uint64_t seed);
  // An independent stream for (seed, stream), e.g. (run seed, step number): reproducible without
  // replaying earlier streams.
  static rng for_stream(std::uint64_t seed, std::uint64_t stream);

  std::uint64_t next_u64();
  // Uniform in [0, n), unbiased (rejection sampling). n must be > 0.
  std::uint64_t uniform(std::uint64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double uniform_double();
  // Standard normal (Box–Muller; one of each pair is kept for the next call).
  double normal();

 private:
  std::uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Fisher–Yates shuffle in place.
void shuffle(std::span<std::int64_t> items, rng& gen);
// 0..n-1 in the order of a shuffle seeded by (seed, stream).
std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed,
                                           std::uint64_t stream = 0);

}  // namespace pipeworks
