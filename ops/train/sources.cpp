// Adapters from the data layer's samplers to the trainer's minibatch_fn.
#include "ops/train/sources.hpp"

#include "ops/data/minibatch.hpp"
#include "ops/data/rng.hpp"

namespace pipeworks {

minibatch_fn image_minibatches(std::shared_ptr<const image_dataset> data, std::int64_t batch,
                               std::uint64_t seed) {
  if (batch < 1 || batch > data->size())
    throw pipeworks_error("batch " + std::to_string(batch) + " is outside 1.." +
                          std::to_string(data->size()));
  // Step t is batch t % per_epoch of epoch t / per_epoch, whose order is a shuffle seeded by
  // (seed, epoch): the same batches minibatch_sampler deals in order, but any step can be asked
  // for first (a resumed run starts in the middle). The current epoch's order is kept.
  struct epoch_cache {
    std::int64_t epoch = -1;
    std::vector<std::int64_t> order;
  };
  auto cache = std::make_shared<epoch_cache>();
  const std::int64_t per_epoch = data->size() / batch;
  return [data, cache, batch, per_epoch, seed](std::int64_t step) -> result<minibatch> {
    if (step < 0) return make_error("step " + std::to_string(step) + " has no minibatch");
    const std::int64_t epoch = step / per_epoch, b = step % per_epoch;
    if (cache->epoch != epoch) {
      cache->order = shuffled_indices(data->size(), seed, static_cast<std::uint64_t>(epoch));
      cache->epoch = epoch;
    }
    std::span<const std::int64_t> rows(cache->order.data() + b * batch, static_cast<std::size_t>(batch));
    auto got = gather_images(*data, rows);
    if (!got) return got.err();
    return minibatch{std::move(got->images), std::move(got->labels)};
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
