// Activation recomputation: what a stage keeps from a forward for its backward (the plan's
// runtime.recompute, train's --recompute).
#pragma once
#include <optional>
#include <string_view>

namespace pipeworks {

// none: the whole stash. full: only the stage's input; the backward runs the forward again first,
// on the same weight version. The kernels are deterministic, so the weights come out bit for bit
// the same in every mode; only the memory held and the time spent differ.
enum class recompute_mode { none, full };

inline std::string_view recompute_name(recompute_mode m) {
  return m == recompute_mode::full ? "full" : "none";
}

inline std::optional<recompute_mode> parse_recompute(std::string_view s) {
  if (s == "none") return recompute_mode::none;
  if (s == "full") return recompute_mode::full;
  return std::nullopt;
}

}  // namespace pipeworks
