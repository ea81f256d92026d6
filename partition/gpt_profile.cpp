// The analytic GPT profile (see gpt_profile.hpp for the formulas and their sources).
#include "partition/gpt_profile.hpp"

#include <cmath>
#include <string>

namespace pipeworks {

std::int64_t gpt_parameters(const gpt_config& c) {
  const std::int64_t h = c.hidden;
  return c.vocab * h + c.seq * h + static_cast<std::int64_t>(c.layers) * (12 * h * h + 13 * h) + 2 * h;
}

result<model_profile> gpt_profile(const gpt_config& c, const gpt_profile_options& options) {
  if (c.layers < 1 || c.hidden < 1 || c.heads < 1 || c.seq < 1 || c.vocab < 1)
    return make_error("gpt model " + c.name + ": layers, hidden, heads, seq and vocab must be positive");
  if (c.hidden % c.heads != 0)
    return make_error("gpt model " + c.name + ": hidden " + std::to_string(c.hidden) +
                      " is not a multiple of heads " + std::to_string(c.heads));
  if (options.microbatch < 1) return make_error("gpt profile: microbatch must be at least 1");
  if (!(options.flops_per_s > 0) || !std::isfinite(options.flops_per_s))
    return make_error("gpt profile: flops_per_s must be a positive finite number");

  const double b = static_cast<double>(options.microbatch);
  const double s = static_cast<double>(c.seq), h = static_cast<double>(c.hidden);
  const double a = c.heads, V = static_cast<double>(c.vocab);
  const std::int64_t bi = options.microbatch, si = c.seq, hi = c.hidden, Vi = c.vocab;
  const double bwd_factor = options.recompute ? 3.0 : 2.0;
  auto ms = [&](double flops) { return flops / options.flops_per_s * 1000.0; };

  model_profile p;
  p.model = c.name;
  p.microbatch = options.microbatch;

  layer_profile embed;
  embed.name = "embed";
  embed.activation_bytes = 2 * bi * si * hi;
  embed.saved_bytes = bi * si * hi;  // dropout mask (token ids are negligible)
  const std::int64_t embed_params = Vi * hi + si * hi;
  embed.param_bytes = 2 * embed_params;
  embed.optimizer_bytes = 12 * embed_params;
  p.layers.push_back(embed);

  const std::int64_t layer_params = 12 * hi * hi + 13 * hi;
  const double layer_flops = 24.0 * b * s * h * h + 4.0 * b * s * s * h;
  const double full_saved = b * s * h * (34.0 + 5.0 * a * s / h);
  for (int l = 0; l < c.layers; ++l) {
    layer_profile x;
    x.name = "layer" + std::to_string(l);
    x.fwd_ms = ms(layer_flops);
    x.bwd_ms = bwd_factor * x.fwd_ms;
    x.activation_bytes = 2 * bi * si * hi;
    x.saved_bytes = options.recompute ? 2 * bi * si * hi : static_cast<std::int64_t>(std::llround(full_saved));
    x.param_bytes = 2 * layer_params;
    x.optimizer_bytes = 12 * layer_params;
    p.layers.push_back(x);
  }

  layer_profile head;
  head.name = "head";
  head.fwd_ms = ms(2.0 * b * s * h * V);
  head.bwd_ms = 2.0 * head.fwd_ms;  // the head is not recomputed
  head.activation_bytes = 4;
  head.saved_bytes = 4 * bi * si * Vi + 2 * bi * si * hi;
  const std::int64_t head_params = Vi * hi + 2 * hi;  // output embedding copy + final layer norm
  head.param_bytes = 2 * head_params;
  head.optimizer_bytes = 12 * head_params;
  p.layers.push_back(head);
  return p;
}

}  // namespace pipeworks
