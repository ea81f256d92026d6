// Where each rank is in its program: written by the rank after every run, read by the driver to
// name the action of a rank that died without a word (an in-process side channel, no messages).
#pragma once
#include <map>
#include <mutex>
#include <optional>

#include "runtime/action.hpp"

namespace pipeworks {

class rank_board {
 public:
  void set(int rank, std::optional<action> at) {
    std::lock_guard lock(mu_);
    at_[rank] = at;
  }
  std::optional<action> at(int rank) const {
    std::lock_guard lock(mu_);
    auto it = at_.find(rank);
    return it == at_.end() ? std::nullopt : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<int, std::optional<action>> at_;
};

}  // namespace pipeworks
