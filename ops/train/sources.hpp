// Minibatch sources for the trainer: shuffled Fashion-MNIST epochs and random text windows,
// both deterministic from a seed; plus the held-out sets used for evaluation.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/data/fashion_mnist.hpp"
#include "ops/data/text.hpp"
#include "ops/train/trainer.hpp"

namespace pipeworks {

// Shuffled epochs of the dataset (drop-last batches of `batch`), seeded by seed: step t's batch
// depends on (seed, t) alone, so steps may be asked for in any order.
minibatch_fn image_minibatches(std::shared_ptr<const image_dataset> data, std::int64_t batch,
                               std::uint64_t seed);

// batch random windows of context+1 bytes from text per step, drawn from (seed, step).
// text must stay alive while the function is used.
minibatch_fn text_minibatches(std::span<const std::uint8_t> text, std::int64_t batch,
                              std::int64_t context, std::uint64_t seed);

// The whole image set as one minibatch (images, labels).
minibatch image_set(const image_dataset& data);

// The first count non-overlapping windows of context+1 bytes (all that fit when count <= 0).
result<minibatch> text_windows(std::span<const std::uint8_t> text, std::int64_t count,
                               std::int64_t context, const std::string& source = "text");

}  // namespace pipeworks
