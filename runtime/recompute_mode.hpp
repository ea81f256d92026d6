// Activation recomputation: what a stage keeps from a forward for its backward (the plan's
// runtime.recompute, train's --recompute).
#pragma once
#include <optional>
#include <string_view>

namespace pipeworks {

// none: the whole stash. full: only the stage's input; the backward runs the forward again first,
// on the same weight version. selective: each block's stash less what its backward makes again
// cheaply (block::drop_recomputable: a GPT block's attention probabilities and GELU output). The
// kernels are deterministic, so the weights come out bit for bit the same in every mode; only the
// memory held and the time spent differ.
enum class recompute_mode { none, full, selective };

inline std::string_view recompute_name(recompute_mode m) {
  switch (m) {
    case recompute_mode::full: return "full";
    case recompute_mode::selective: return "selective";
    case recompute_mode::none: break;
  }
  return "none";
}

inline std::optional<recompute_mode> parse_recompute(std::string_view s) {
  if (s == "none") return recompute_mode::none;
  if (s == "full") return recompute_mode::full;
  if (s == "selective") return recompute_mode::selective;
  return std::nullopt;
}

}  // namespace pipeworks
