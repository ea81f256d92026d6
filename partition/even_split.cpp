// even_split: the contiguous split of blocks over stages whose largest stage has the fewest FLOPs;
// stage_flops: what each stage of a split costs.
#include "partition/even_split.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace pipeworks {

namespace {

// Forward plus backward FLOPs of one block per sample: backward is about twice the forward.
constexpr double train_flops_factor = 3.0;

}  // namespace

result<std::vector<int>> even_split(const std::vector<layer_cost>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  if (stages < 1)
    return make_error("cannot split a model into " + std::to_string(stages) +
                      " stages; use at least 1");
  if (n < stages)
    return make_error("cannot split " + std::to_string(n) + " blocks into " +
                      std::to_string(stages) + " stages: every stage needs at least one block; " +
                      "use at most " + std::to_string(n) + " stages");
  for (int i = 0; i < n; ++i)
    if (costs[i].flops_per_sample < 0)
      return make_error("block " + std::to_string(i) + " reports negative FLOPs (" +
                        std::to_string(costs[i].flops_per_sample) + ")");
  // prefix[i] = FLOPs of blocks [0, i). Forward FLOPs stand for forward plus backward: the two
  // are proportional, so the same split minimises both.
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + static_cast<double>(costs[i].flops_per_sample);
  auto cost = [&](int i, int j) { return prefix[j] - prefix[i]; };  // blocks [i, j)

  // best[k][j]: the smallest possible largest stage when blocks [0, j) go to k stages, each with
  // at least one block; cut[k][j] is the first block of the k-th stage in that split.
  //   best[1][j] = cost(0, j)
  //   best[k][j] = min over i in [k-1, j-1] of max(best[k-1][i], cost(i, j))
  // The answer is best[stages][n]. Ties keep the smallest i: of equally good splits, the last
  // stage starts earliest.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  for (int j = 1; j <= n; ++j) best[1][j] = cost(0, j);
  for (int k = 2; k <= stages; ++k)
    for (int j = k; j <= n; ++j)
      for (int i = k - 1; i <= j - 1; ++i) {
        const double c = std::max(best[k - 1][i], cost(i, j));
        if (c < best[k][j]) {
          best[k][j] = c;
          cut[k][j] = i;
        }
      }
  std::vector<int> b(stages + 1, 0);
  b[stages] = n;
  for (int k = stages, j = n; k >= 2; --k) {
    j = cut[k][j];
    b[k - 1] = j;
  }
  return b;
}

std::vector<double> stage_flops(const std::vector<layer_cost>& costs, const std::vector<int>& b) {
  std::vector<double> out;
  for (std::size_t s = 0; s + 1 < b.size(); ++s) {
    double f = 0;
    for (int i = b[s]; i < b[s + 1]; ++i)
      f += static_cast<double>(costs.at(static_cast<std::size_t>(i)).flops_per_sample);
    out.push_back(train_flops_factor * f);
  }
  return out;
}

}  // namespace pipeworks
