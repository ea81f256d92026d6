// GPT configurations and the block list of make_gpt.
#include "ops/model/gpt.hpp"

#include "base/result.hpp"

namespace pipeworks {

gpt_config gpt_tiny() {
  return {.context = 64, .layers = 2, .heads = 2, .width = 64, .vocab = 256};
}

gpt_config gpt_small() {
  return {.context = 128, .layers = 8, .heads = 4, .width = 256, .vocab = 256};
}

template <class T>
model<T> make_gpt(const gpt_config& cfg) {
  if (cfg.context < 1 || cfg.layers < 0 || cfg.heads < 1 || cfg.width < 1 || cfg.vocab < 1 ||
      cfg.width % cfg.heads != 0)
    throw pipeworks_error(
        "gpt: invalid configuration (width must be a positive multiple of heads)");
  std::vector<std::unique_ptr<const block<T>>> blocks;
  blocks.push_back(std::make_unique<gpt_embedding_block<T>>(cfg));
  for (int l = 0; l < cfg.layers; ++l)
    blocks.push_back(std::make_unique<gpt_transformer_block<T>>(cfg, l));
  blocks.push_back(std::make_unique<gpt_head_block<T>>(cfg));
  return model<T>("gpt", std::move(blocks));
}

template model<float> make_gpt<float>(const gpt_config&);
template model<double> make_gpt<double>(const gpt_config&);

}  // namespace pipeworks
