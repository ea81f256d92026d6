// Adapters from the data layer's samplers to the trainer's minibatch_fn.
#include "ops/train/sources.hpp"

#include "ops/data/minibatch.hpp"

namespace pipeworks {

minibatch_fn image_minibatches(std::shared_ptr<const image_dataset> data, std::int64_t batch,
                               std::uint64_t seed) {
  if (batch < 1 || batch > data->size())
    throw pipeworks_error("batch " + std::to_string(batch) + " is outside 1.." +
                          std::to_string(data->size()));
  auto sampler = std::make_shared<minibatch_sampler>(data->size(), batch, seed);
  return [data, sampler](std::int64_t) -> result<minibatch> {
    auto b = gather_images(*data, sampler->next());
    if (!b) return b.err();
    return minibatch{std::move(b->images), std::move(b->labels)};
  };
}

minibatch_fn text_minibatches(std::span<const std::uint8_t> text, std::int64_t batch,
                              std::int64_t context, std::uint64_t seed) {
  return [text, batch, context, seed](std::int64_t step) -> result<minibatch> {
    auto b = random_windows(text, batch, context, seed, static_cast<std::uint64_t>(step));
    if (!b) return b.err();
    return minibatch{std::move(b->inputs), std::move(b->targets)};
  };
}

minibatch image_set(const image_dataset& data) {
  return {data.images.clone(), data.labels.clone()};
}

result<minibatch> text_windows(std::span<const std::uint8_t> text, std::int64_t count,
                               std::int64_t context, const std::string& source) {
  if (count <= 0) count = static_cast<std::int64_t>(text.size()) / (context + 1);
  auto b = eval_windows(text, count, context, source);
  if (!b) return b.err();
  return minibatch{std::move(b->inputs), std::move(b->targets)};
}

}  // namespace pipeworks
