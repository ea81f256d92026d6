// Tests for the per-thread scratch buffers: reuse, growth, and slots kept apart.
#include "ops/kernels/scratch.hpp"

#include <catch2/catch.hpp>
#include <thread>

using namespace pipeworks;

TEST_CASE("thread_scratch reuses its buffer and keeps slots and threads apart", "[ops]") {
  float* a = thread_scratch<float>(100, scratch_slot::attention);
  float* again = thread_scratch<float>(50, scratch_slot::attention);
  CHECK(a == again);  // smaller requests reuse the same memory
  float* other = thread_scratch<float>(100, scratch_slot::layernorm_row);
  CHECK(other != a);
  float* grown = thread_scratch<float>(1 << 20, scratch_slot::attention);
  grown[(1 << 20) - 1] = 1.0f;  // the whole request is usable
  float* elsewhere = nullptr;
  std::thread([&] { elsewhere = thread_scratch<float>(100, scratch_slot::attention); }).join();
  CHECK(elsewhere != thread_scratch<float>(100, scratch_slot::attention));
}
