// The validator's deadlock report, internal to validate.cpp: the grid of steps x ranks around the
// point where ranks got stuck, with each stuck action in [..] and what it waits for.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/schedule.hpp"

namespace pipeworks::detail {

struct deadlock_state {
  const std::vector<program>& programs;
  const std::vector<std::size_t>& pc;              // [rank]: the next action, stuck or past the end
  const std::vector<int>& last_step;               // [rank]: the step of its last action, or -1
  const std::vector<std::vector<int>>& step_at;    // [rank][position]: the step each action ran at
  const std::vector<int>& stuck;                   // ranks that cannot finish, in order
  const std::vector<std::string>& why;             // [i]: what stuck[i] waits for (first 16)
};

std::string deadlock_report(const deadlock_state& d);

// What the stuck action of rank r (at pc[r]) waits for, in words.
std::string waits_for(const schedule& s, const std::vector<std::size_t>& pc, int r);

}  // namespace pipeworks::detail
