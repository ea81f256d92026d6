// Offload to host memory for GPU ranks: what a rank keeps in page-locked host memory instead of
// its device's (the plan's runtime.offload, train's --offload).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace pipeworks {

// optimizer: the optimizer moments live in page-locked host memory, and the GPU's update kernel
// reads and writes them there over the bus (ops/device/optimizer_update.hpp; under --bf16 the
// weights stay fp32 on the device, so there is no separate master copy to move). activations:
// the stash of each microbatch in flight goes to page-locked host memory after its forward and
// comes back before its backward (runtime/exec: copies on the rank's stream, not yet overlapped
// with compute). Both only move bytes: the weights come out bit for bit the same as without
// them. A CPU rank's memory is host memory already, so a plan refuses them there.
struct offload_spec {
  bool optimizer = false;
  bool activations = false;
  bool any() const { return optimizer || activations; }
  bool operator==(const offload_spec&) const = default;
};

// "none", "optimizer", "activations" or "optimizer,activations" (that order).
inline std::string offload_name(offload_spec o) {
  if (o.optimizer && o.activations) return "optimizer,activations";
  if (o.optimizer) return "optimizer";
  if (o.activations) return "activations";
  return "none";
}

// "none", or a comma list of optimizer and activations (each at most once, any order); nothing
// for anything else.
inline std::optional<offload_spec> parse_offload(std::string_view s) {
  if (s == "none") return offload_spec{};
  offload_spec o;
  while (true) {
    const std::size_t comma = s.find(',');
    const std::string_view part = s.substr(0, comma);
    if (part == "optimizer" && !o.optimizer) o.optimizer = true;
    else if (part == "activations" && !o.activations) o.activations = true;
    else return std::nullopt;
    if (comma == std::string_view::npos) return o;
    s.remove_prefix(comma + 1);
  }
}

}  // namespace pipeworks
