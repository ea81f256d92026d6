// ZeRO stage 1 as the planners count it (2BW's and PipeDream's alike): the optimizer state a
// replica of a stage keeps when it is shared out over the stage's replicas, and the gather of the
// updated weights that sharing adds to the step's all-reduce.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "partition/profile.hpp"

namespace pipeworks {

// A layer's largest optimizer tensor, the unit ZeRO shares out (the runtime gives each tensor's
// moments whole to one replica): largest_optimizer_bytes, or the whole layer's state when the
// profile does not say.
inline std::int64_t largest_optimizer_tensor(const layer_profile& x) {
  return x.largest_optimizer_bytes > 0 ? x.largest_optimizer_bytes : x.optimizer_bytes;
}

// The optimizer bytes one of w replicas holds under ZeRO 1: ⌈optimizer / w⌉, but at least the
// stage's largest tensor's (`largest`); the whole state with w <= 1.
inline std::int64_t zero_share(std::int64_t optimizer, std::int64_t largest, int w) {
  if (w <= 1) return optimizer;
  return std::min(optimizer, std::max((optimizer + w - 1) / w, largest));
}

// What the other replicas hold for it: optimizer − zero_share.
inline std::int64_t zero_shared_out(std::int64_t optimizer, std::int64_t largest, int w) {
  return optimizer - zero_share(optimizer, largest, w);
}

// The gather after the all-reduce under ZeRO, ms: each of w replicas receives the (w − 1)/w of
// the stage's updated weights the others own, over a ring of ms_per_byte and latency_ms a hop
// (0 for w <= 1). The ring all-reduce before it moves 2(w − 1)/w of them.
inline double zero_gather_ms(int w, double param_bytes, double ms_per_byte, double latency_ms = 0) {
  if (w <= 1) return 0;
  return static_cast<double>(w - 1) / w * param_bytes * ms_per_byte + (w - 1) * latency_ms;
}

// The largest value over a range of layers in O(1) (a sparse table over largest_optimizer_tensor),
// for the programs that ask a stage's largest tensor of many ranges.
class largest_tensor_table {
 public:
  largest_tensor_table() = default;
  explicit largest_tensor_table(const model_profile& profile) {
    std::vector<std::int64_t> row;
    for (const layer_profile& x : profile.layers) row.push_back(largest_optimizer_tensor(x));
    table_.push_back(std::move(row));
    for (std::size_t span = 2; span <= table_[0].size(); span *= 2) {
      const std::vector<std::int64_t>& prev = table_.back();
      std::vector<std::int64_t> next(table_[0].size() - span + 1);
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + span / 2]);
      table_.push_back(std::move(next));
    }
  }
  // The largest over layers i..j (inclusive, i <= j).
  std::int64_t max(int i, int j) const {
    const int level = std::bit_width(static_cast<unsigned>(j - i + 1)) - 1;
    const std::vector<std::int64_t>& row = table_[static_cast<std::size_t>(level)];
    return std::max(row[static_cast<std::size_t>(i)],
                    row[static_cast<std::size_t>(j - (1 << level) + 1)]);
  }

 private:
  std::vector<std::vector<std::int64_t>> table_;  // table_[k][i]: the largest over i..i + 2^k − 1
};

}  // namespace pipeworks
