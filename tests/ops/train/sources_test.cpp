// Tests for the minibatch sources: shapes, determinism from (seed, step), and the fixed windows.
#include "ops/train/sources.hpp"

#include <catch2/catch.hpp>

using namespace pipeworks;

TEST_CASE("text minibatches are windows of context + 1 bytes, fixed by seed and step", "[ops]") {
  std::vector<std::uint8_t> text(1000);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>(i % 251);
  minibatch_fn next = text_minibatches(text, 4, 16, 7);
  auto a = next(3), b = next(3), c = next(4);
  REQUIRE(a->inputs.shape() == shape_t{4, 16});
  REQUIRE(a->targets.shape() == shape_t{4, 16});
  // targets are the inputs shifted by one byte
  REQUIRE((a->inputs.data<std::int32_t>()[1] + 0) == a->targets.data<std::int32_t>()[0]);
  REQUIRE(std::equal(a->inputs.span<std::int32_t>().begin(), a->inputs.span<std::int32_t>().end(),
                     b->inputs.span<std::int32_t>().begin()));
  REQUIRE_FALSE(std::equal(a->inputs.span<std::int32_t>().begin(),
                           a->inputs.span<std::int32_t>().end(),
                           c->inputs.span<std::int32_t>().begin()));
}

TEST_CASE("text_windows takes the first windows from offset 0, or all that fit", "[ops]") {
  std::vector<std::uint8_t> text(100);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::uint8_t>(i);
  auto w = text_windows(text, 3, 9);
  REQUIRE(w->inputs.shape() == shape_t{3, 9});
  REQUIRE(w->inputs.data<std::int32_t>()[9] == 10);  // window 1 starts at byte 10
  REQUIRE(w->targets.data<std::int32_t>()[8] == 9);
  REQUIRE(text_windows(text, 0, 9)->inputs.dim(0) == 10);
  REQUIRE_FALSE(text_windows(text, 11, 9).ok());
}

TEST_CASE("image minibatches cycle through shuffled epochs", "[ops]") {
  auto data = std::make_shared<image_dataset>();
  data->images = tensor({10, 784}, dtype::f32);
  data->labels = tensor({10}, dtype::i32);
  for (int i = 0; i < 10; ++i) data->labels.data<std::int32_t>()[i] = i;
  minibatch_fn next = image_minibatches(data, 5, 1);
  std::vector<int> seen;
  for (int s = 0; s < 2; ++s) {
    auto b = next(s);
    REQUIRE(b->inputs.shape() == shape_t{5, 784});
    for (int i = 0; i < 5; ++i) seen.push_back(b->targets.data<std::int32_t>()[i]);
  }
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}
