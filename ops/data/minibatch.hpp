// Deterministic shuffled minibatches over an indexed dataset: epoch e's order is a pure function
// of (seed, e), so any actor can recompute any batch. gather_images copies a batch out.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ops/data/fashion_mnist.hpp"
#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

// The minibatches of one epoch: a shuffle of 0..n-1 seeded by (seed, epoch), cut into batches of
// batch_size; the last, shorter batch is dropped when drop_last is set.
std::vector<std::vector<std::int64_t>> epoch_batches(std::int64_t n, std::int64_t batch_size,
                                                     std::uint64_t seed, std::int64_t epoch,
                                                     bool drop_last = true);

// An endless stream of minibatch indices, epoch after epoch, for step-counted training loops.
class minibatch_sampler {
 public:
  // n > 0 samples, 0 < batch_size <= n; throws pipeworks_error otherwise.
  minibatch_sampler(std::int64_t n, std::int64_t batch_size, std::uint64_t seed,
                    bool drop_last = true);
  // The next batch; valid until the following call.
  std::span<const std::int64_t> next();
  std::int64_t epoch() const { return epoch_; }          // epoch of the last batch returned
  std::int64_t batches_per_epoch() const;

 private:
  std::int64_t n_, batch_size_;
  std::uint64_t seed_;
  bool drop_last_;
  std::int64_t epoch_ = -1;
  std::size_t pos_ = 0;
  std::vector<std::int64_t> order_;
};

struct image_batch {
  tensor images;  // (B, 784) f32
  tensor labels;  // (B) i32
};

// Copies the rows named by indices. An index outside the dataset is an error naming it.
result<image_batch> gather_images(const image_dataset& data,
                                  std::span<const std::int64_t> indices);

}  // namespace pipeworks
