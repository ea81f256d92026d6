// Epoch shuffles, the endless minibatch stream and batch gathering.
#include "ops/data/minibatch.hpp"

#include <algorithm>
#include <cstring>

#include "ops/data/rng.hpp"

namespace pipeworks {

std::vector<std::vector<std::int64_t>> epoch_batches(std::int64_t n, std::int64_t batch_size,
                                                     std::uint64_t seed, std::int64_t epoch,
                                                     bool drop_last) {
  std::vector<std::vector<std::int64_t>> out;
  if (n <= 0 || batch_size <= 0) return out;
  const auto order = shuffled_indices(n, seed, static_cast<std::uint64_t>(epoch));
  for (std::int64_t b = 0; b < n; b += batch_size) {
    const std::int64_t e = std::min(n, b + batch_size);
    if (drop_last && e - b < batch_size) break;
    out.emplace_back(order.begin() + b, order.begin() + e);
  }
  return out;
}

minibatch_sampler::minibatch_sampler(std::int64_t n, std::int64_t batch_size, std::uint64_t seed,
                                     bool drop_last)
    : n_(n), batch_size_(batch_size), seed_(seed), drop_last_(drop_last) {
  if (n <= 0 || batch_size <= 0 || batch_size > n)
    throw pipeworks_error("minibatch_sampler: batch size " + std::to_string(batch_size) +
                          " must be between 1 and the dataset size " + std::to_string(n));
}

std::int64_t minibatch_sampler::batches_per_epoch() const {
  return drop_last_ ? n_ / batch_size_ : (n_ + batch_size_ - 1) / batch_size_;
}

std::span<const std::int64_t> minibatch_sampler::next() {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t b = static_cast<std::size_t>(batch_size_);
  const bool exhausted = order_.empty() || pos_ >= n || (drop_last_ && pos_ + b > n);
  if (exhausted) {
    ++epoch_;
    order_ = shuffled_indices(n_, seed_, static_cast<std::uint64_t>(epoch_));
    pos_ = 0;
  }
  const std::size_t len = std::min(b, n - pos_);
  std::span<const std::int64_t> out(order_.data() + pos_, len);
  pos_ += len;
  return out;
}

result<image_batch> gather_images(const image_dataset& data,
                                  std::span<const std::int64_t> indices) {
  const std::int64_t n = data.size();
  const std::int64_t d = data.images.dim(1);
  const auto b = static_cast<std::int64_t>(indices.size());
  image_batch out{tensor({b, d}, dtype::f32), tensor({b}, dtype::i32)};
  const float* src = data.images.data<float>();
  const std::int32_t* lab = data.labels.data<std::int32_t>();
  float* dst = out.images.data<float>();
  std::int32_t* dlab = out.labels.data<std::int32_t>();
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int64_t k = indices[static_cast<std::size_t>(i)];
    if (k < 0 || k >= n)
      return make_error("gather_images: index " + std::to_string(k) + " at batch position " +
                        std::to_string(i) + " is outside the dataset of " + std::to_string(n) +
                        " samples");
    std::memcpy(dst + i * d, src + k * d, static_cast<std::size_t>(d) * sizeof(float));
    dlab[i] = lab[k];
  }
  return out;
}

}  // namespace pipeworks
