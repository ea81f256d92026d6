// A model's per-layer profile: forward and backward time, activation, saved, parameter and
// optimizer-state bytes at one microbatch size; the planners' input, read from and written to
// profile.json.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "runtime/recompute_mode.hpp"

namespace pipeworks {

// A layer's figures in another recompute mode than the profile's own: what the mode changes (the
// forward, activation, parameter and optimizer figures are the same in every mode).
struct mode_figures {
  double bwd_ms = 0;
  std::int64_t saved_bytes = 0;
  bool operator==(const mode_figures&) const = default;
};

struct layer_profile {
  std::string name;
  double fwd_ms = 0;
  double bwd_ms = 0;
  std::int64_t activation_bytes = 0;  // the layer's output, sent to the next stage
  std::int64_t saved_bytes = 0;       // kept from forward to backward
  std::int64_t param_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  // The largest tensor's part of optimizer_bytes: ZeRO shares whole tensors out, so no replica
  // holds less of a stage than this. 0: unknown (the planners take the whole layer's).
  std::int64_t largest_optimizer_bytes = 0;
  // The same layer measured in other modes (`pipeworks profile --recompute all`): empty in a
  // profile of one mode. Every layer carries the same modes, never the profile's own.
  std::map<recompute_mode, mode_figures> other_modes;
};

// The most layers a profile may hold: the planners' exact searches grow with L² and more (a 2000-layer
// profile under a memory limit took 2BW's planner 20 s, 5000 hours).
inline constexpr std::size_t max_profile_layers = 1024;

struct model_profile {
  std::string model;
  std::int64_t microbatch = 1;  // samples per microbatch the times were taken at
  // The mode the layers were measured in, and the one a plan made from them runs in (the run
  // plan's runtime.recompute). none: saved_bytes is each layer's whole stash. selective: the stash
  // less what block::drop_recomputable drops, and bwd_ms includes making it again. full:
  // saved_bytes is the whole stash (what a stage holds for one microbatch during its backward) and
  // bwd_ms includes the forward run again.
  recompute_mode recompute = recompute_mode::none;
  std::vector<layer_profile> layers;
};

// The modes a profile carries figures for: its own and each of its layers' other_modes, in the
// order of preference on a tie (none, selective, full: less recomputation first).
std::vector<recompute_mode> profile_modes(const model_profile& p);
// none 0, selective 1, full 2: how much a mode recomputes (a tie between plans goes to the lower).
int recompute_rank(recompute_mode m);
// The profile as measured in `mode` alone (one of profile_modes(p)): that mode's bwd_ms and
// saved_bytes in every layer, recompute = mode, no other modes. A profile of one mode comes back
// as it is.
model_profile profile_in_mode(const model_profile& p, recompute_mode mode);
// One profile carrying every mode's figures: `base`'s own, and each of `others`' bwd_ms and
// saved_bytes as other modes. An error when the layers or the microbatch differ, or two profiles
// share a mode. With `base` in none, another mode's bwd_ms is at least none's: its backward does
// none's work and remakes what it dropped, so a live timing below none's is noise, and left as
// it is it could make a planner prefer recomputation that only adds work.
result<model_profile> merge_modes(model_profile base, const std::vector<model_profile>& others);

// The bytes of layer i's input: layer i − 1's output (activation_bytes). Layer 0's input (the
// model's data: token ids or images) is not in the profile, so it counts 0.
inline std::int64_t input_bytes(const model_profile& p, int i) {
  return i <= 0 ? 0 : p.layers[static_cast<std::size_t>(i) - 1].activation_bytes;
}

// The most bytes any byte field (activation, saved, param, optimizer) may total over all layers:
// 2^50 (about 1 PB). Below it the planners' sums (3·param + optimizer, prefix sums, a stash of
// up to 2^10 microbatches at 4× the profile's microbatch) stay far from 2^63.
constexpr std::int64_t max_profile_total_bytes = std::int64_t{1} << 50;
// A layer's forward or backward time is at most 1e9 ms (11.6 days) and the profiled microbatch at
// most 2^31-1 samples: beyond, a value is a mistake of units, and sums and products of them would
// overflow (a time to infinity, a size past int64).
constexpr double max_layer_ms = 1e9;
constexpr std::int64_t max_profile_microbatch = (std::int64_t{1} << 31) - 1;

// An error when a byte field is negative or its running total over layers 0, 1, .. passes
// max_profile_total_bytes, naming the field and the layer where it does, and what to do. Every
// planner calls it (profiles can be built by hand, not only read by parse_profile).
status check_profile_totals(const model_profile& p);

// k · bytes, or max_profile_total_bytes · 2^12 when that is larger (a "does not fit" value that
// stays far from overflow when summed), for k >= 0 and bytes >= 0. Inline: the planners' inner
// loops call it for every stage they try.
inline std::int64_t stash_product(std::int64_t k, std::int64_t bytes) {
  constexpr std::int64_t cap = max_profile_total_bytes << 12;
  std::int64_t out = 0;
  if (k <= 0 || bytes <= 0) return 0;
  if (__builtin_mul_overflow(k, bytes, &out) || out > cap) return cap;
  return out;
}

// The stashed activations of a stage with `in_flight` microbatches in flight, the runtime's model
// for each mode, from the stage's Σsaved_bytes and its input's bytes (input_bytes of its first
// layer), both for one microbatch:
//   none, selective: in_flight · Σsaved   (selective's saved is already the reduced stash)
//   full:            in_flight · input + Σsaved   (every microbatch in flight keeps its input;
//                    one backward at a time runs the forward again and holds its whole stash)
// Capped as stash_product is, so a huge in_flight never wraps.
inline std::int64_t stash_bytes(recompute_mode mode, std::int64_t in_flight, std::int64_t saved,
                                std::int64_t input) {
  if (mode != recompute_mode::full) return stash_product(in_flight, saved);
  if (in_flight <= 0) return 0;
  // saved <= 4 · 2^50 (the planners scale a profile by at most 4), the product <= 2^62: no overflow.
  return stash_product(in_flight, input) + saved;
}

// {"model": .., "microbatch": .., "recompute": "none"|"selective"|"full" (optional: none),
//  "layers": [{"name": .., "fwd_ms": .., "bwd_ms": ..,
//  "activation_bytes": .., "saved_bytes": .., "param_bytes": .., "optimizer_bytes": ..,
//  "modes": {"selective": {"bwd_ms": .., "saved_bytes": ..}, "full": {..}} (optional: the layer
//  in other modes; every layer names the same ones, never the profile's "recompute")}, ...]}
std::string to_json(const model_profile& p);
// An error names the field and the layer when something is missing, negative or not finite, or
// when a byte field's total over the layers passes max_profile_total_bytes (check_profile_totals).
result<model_profile> parse_profile(const std::string& json_text);
result<model_profile> load_profile(const std::string& path);

}  // namespace pipeworks
