// The balanced contiguous split behind the 2BW planner and its baselines: per-layer times into
// p stages on devices of given speeds, minimising the slowest stage, under a per-stage rule.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

namespace pipeworks {

// Contiguous split of L layers into p stages minimising the slowest stage's time(s, i, j) (stage
// s on layers i..j − 1; it must not fall as i falls: a longer stage takes at least as long), over
// the splits where allowed(s, i, j) holds for every stage (a rule that, like a memory limit, also
// holds for every shorter stage: allowed(s, i, j) implies allowed(s, i', j) for i <= i'):
//   best[s][j] = min over i < j of max(best[s−1][i], time(s − 1, i, j))
// Returns the first layer of each stage (p entries), or nothing when no split is allowed. On a
// tie, each stage (from the last) starts at the earliest layer that reaches the optimum.
// The scan over i runs from j − 1 down and stops once the last stage alone exceeds the best found
// (it only grows as i falls), or the rule refuses it. That keeps the result of the full scan and
// makes 10,000 layers take a fraction of a second, not minutes. Stage times by several profiles
// (the slowest of a stage's replicas, each by its own device's profile and speed) use this.
template <class Time, class Allowed>
std::vector<int> balanced_split_by(int L, int p, Time time, Allowed allowed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= p; ++s)
    for (int j = s; j <= L - (p - s); ++j) {
      double& b = best[s][j];
      // Stage 1 starts at layer 0: best[0][i] is finite only for i = 0.
      for (int i = s == 1 ? 0 : j - 1; i >= s - 1; --i) {
        const double last = time(s - 1, i, j);
        if (last > b) break;
        if (!allowed(s - 1, i, j)) break;  // nor is any longer stage
        if (best[s - 1][i] == inf) continue;
        const double v = std::max(best[s - 1][i], last);
        if (v <= b) {  // on a tie the earlier cut wins, as a scan upwards would choose
          b = v;
          cut[s][j] = i;
        }
      }
    }
  if (best[p][L] == inf) return {};
  std::vector<int> first(p);
  for (int s = p, j = L; s >= 1; --s) {
    first[s - 1] = cut[s][j];
    j = cut[s][j];
  }
  return first;
}

// Per-layer times (as a prefix sum) on devices of given speeds: time = Σtime / speed[s].
template <class Allowed>
std::vector<int> balanced_split(const std::vector<double>& prefix, const std::vector<double>& speed,
                                Allowed allowed) {
  return balanced_split_by(
      static_cast<int>(prefix.size()) - 1, static_cast<int>(speed.size()),
      [&](int s, int i, int j) { return (prefix[j] - prefix[i]) / speed[s]; }, allowed);
}

// The same split with no rule. On devices of one speed it takes O(p·L): best[s−1][i] then grows
// with i (a longer prefix never splits better) and the last stage's time falls, so for each j the
// optimum sits where they cross, and the crossing only moves right as j grows; the same result as
// the scan above, ties included. Mixed speeds break that order (fewer layers can force a layer
// onto a slow device), and take the scan.
inline std::vector<int> balanced_split(const std::vector<double>& prefix,
                                       const std::vector<double>& speed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const int L = static_cast<int>(prefix.size()) - 1;
  const int p = static_cast<int>(speed.size());
  if (p < 1 || L < p) return {};
  if (std::any_of(speed.begin(), speed.end(), [&](double x) { return x != speed[0]; }))
    return balanced_split(prefix, speed, [](int, int, int) { return true; });
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(L + 1, 0));
  for (int j = 1; j <= L - (p - 1); ++j) best[1][j] = prefix[j] / speed[0];
  for (int s = 2; s <= p; ++s) {
    const std::vector<double>& a = best[s - 1];
    const double sp = speed[s - 1];
    int c = s - 1;  // the first i where a[i] >= the last stage's time, for the current j
    for (int j = s; j <= L - (p - s); ++j) {
      auto last = [&](int i) { return (prefix[j] - prefix[i]) / sp; };
      while (c < j && a[c] < last(c)) ++c;
      // i >= c: a[i] rules and grows, so i = c is best there; i < c: the last stage rules and
      // falls as i grows, so i = c − 1 is best there.
      double v = c < j ? a[c] : inf;
      int at = c;
      if (c > s - 1 && last(c - 1) <= v) {
        v = last(c - 1);
        at = c - 1;
        while (at > s - 1 && last(at - 1) <= v) --at;  // equal times: the earliest cut
      }
      best[s][j] = v;
      cut[s][j] = at;
    }
  }
  if (best[p][L] == inf) return {};  // times past the largest double
  std::vector<int> first(p);
  for (int s = p, j = L; s >= 1; --s) {
    first[s - 1] = cut[s][j];
    j = cut[s][j];
  }
  return first;
}

}  // namespace pipeworks
