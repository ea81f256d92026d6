// Test helper: the explorer's states (runtime/explorer.hpp) rebuilt from the deltas a page stores
// into every rank's state at each time, as the page's script (rebuildStates) rebuilds them.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace pipeworks::test {

// The page's "states" with every state's "ranks" whole: a later state's "changed" ranks replace
// those of the state before it.
inline nlohmann::json full_states(const nlohmann::json& page) {
  nlohmann::json out = nlohmann::json::array();
  nlohmann::json ranks;
  for (const nlohmann::json& s : page.at("states")) {
    if (s.contains("ranks")) {
      ranks = s["ranks"];
    } else {
      for (const auto& [r, state] : s.at("changed").items()) ranks.at(std::stoul(r)) = state;
    }
    out.push_back(nlohmann::json{{"time", s.at("time")}, {"ranks", ranks}});
  }
  return out;
}

}  // namespace pipeworks::test
