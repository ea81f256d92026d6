// Where each rank is in its program: written by the rank after every run, read by the driver to
// name the action of a rank that died without a word (an in-process side channel, no messages).
#pragma once
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/action.hpp"

namespace pipeworks {

class rank_board {
 public:
  explicit rank_board(int ranks) : at_(static_cast<std::size_t>(ranks)) {}

  void set(int rank, std::optional<action> at) {
    std::lock_guard lock(mu_);
    at_.at(static_cast<std::size_t>(rank)) = at;
  }
  std::optional<action> at(int rank) const {
    std::lock_guard lock(mu_);
    return at_.at(static_cast<std::size_t>(rank));
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::optional<action>> at_;
};

}  // namespace pipeworks
