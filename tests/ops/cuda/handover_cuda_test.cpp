// Crossing streams and devices on a GPU: a tensor handed over with its ready event is read after
// its last write and freed after the copy; copies to the host land in page-locked memory.
#include <catch2/catch.hpp>

#include <vector>

#include "ops/device/caching_allocator.hpp"
#include "ops/device/device_context.hpp"
#include "ops/device/device_memory.hpp"
#include "ops/device/device_ops.hpp"
#include "tests/ops/cuda/gpu_test_util.hpp"

using namespace pipeworks;

namespace {

// 200 everywhere: ones (from the host) added 200 times on `on`'s stream, queued and not waited
// for (64 MB keeps the stream busy).
tensor busy_sum(const device_context& on, std::int64_t n) {
  tensor h({n}, dtype::f32);
  for (float& v : h.span<float>()) v = 1.f;
  const tensor src = on.adopt(std::move(h));
  tensor t = on.zeros({n}, dtype::f32);
  for (int i = 0; i < 200; ++i) add_into<float>(on, t.data<float>(), src.data<float>(), n);
  return t;
}

}  // namespace

TEST_CASE("a tensor handed over between two streams of one GPU is read after its last write", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const device_context producer = device_context::cuda(0), consumer = device_context::cuda(0);
  REQUIRE(producer.stream() != consumer.stream());
  const std::int64_t n = std::int64_t{1} << 24;
  for (int round = 0; round < 3; ++round) {
    tensor t = busy_sum(producer, n);
    producer.hand_over(t);  // no wait: the producer's stream is still adding
    REQUIRE(t.ready() != nullptr);
    const std::size_t before = producer.memory_stats().in_use;
    tensor here = consumer.adopt(std::move(t));
    CHECK(here.where() == consumer.where());
    CHECK(here.stream() == consumer.stream());
    const tensor back = consumer.to_host(here);
    std::int64_t wrong = 0;
    for (float v : back.span<float>()) wrong += v != 200.f;
    CHECK(wrong == 0);
    consumer.wait();  // the copy is done: t has gone back to the producer's allocator
    CHECK(producer.memory_stats().in_use + n * sizeof(float) == before);
  }
}

TEST_CASE("a tensor handed over to another GPU arrives by peer copy after its last write", "[cuda]") {
  if (!cuda_test::have_gpus(2)) return;
  const device_context producer = device_context::cuda(0), consumer = device_context::cuda(1);
  const std::int64_t n = std::int64_t{1} << 24;
  for (int round = 0; round < 3; ++round) {
    tensor t = busy_sum(producer, n);
    producer.hand_over(t);  // the producer's stream is still adding
    const std::size_t before = producer.memory_stats().in_use;
    tensor there = consumer.adopt(std::move(t));
    CHECK(there.where() == device{device_kind::cuda, 1});
    CHECK(there.stream() == consumer.stream());
    // The consumer adds on its own GPU after the copy, then reads back.
    add_into<float>(consumer, there.data<float>(), there.data<float>(), n);
    const tensor back = consumer.to_host(there);
    std::int64_t wrong = 0;
    for (float v : back.span<float>()) wrong += v != 400.f;
    CHECK(wrong == 0);
    consumer.wait();  // the copy is done: t has gone back to GPU 0's allocator
    CHECK(producer.memory_stats().in_use + n * sizeof(float) == before);
  }
}

TEST_CASE("an offloaded tensor comes back by the copy stream after its last write", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const device_context gpu = device_context::cuda(0);
  const std::int64_t n = std::int64_t{1} << 24;
  for (int round = 0; round < 3; ++round) {
    const std::size_t before = gpu.memory_stats().in_use;
    tensor host = gpu.offload(busy_sum(gpu, n));  // queued behind the adds; returns at once
    CHECK(host.where() == device::cpu());
    REQUIRE(host.ready() != nullptr);
    tensor back = gpu.fetch(std::move(host));
    CHECK(back.where() == gpu.where());
    CHECK(back.stream() == gpu.stream());
    gpu.wait_ready(back);
    CHECK(back.ready() == nullptr);
    add_into<float>(gpu, back.data<float>(), back.data<float>(), n);  // after the copy, here
    const tensor seen = gpu.to_host(back);
    std::int64_t wrong = 0;
    for (float v : seen.span<float>()) wrong += v != 400.f;
    CHECK(wrong == 0);
    back = tensor();
    gpu.wait();  // every copy done: the offloaded GPU tensor has gone back to the allocator
    CHECK(gpu.memory_stats().in_use == before);
  }
}

TEST_CASE("a GPU tensor comes to the host in page-locked memory that goes back to its pool", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const device_context gpu = device_context::cuda(0);
  tensor h({1000}, dtype::f32);
  for (int i = 0; i < 1000; ++i) h.data<float>()[i] = static_cast<float>(i) * 0.5f;
  const tensor d = gpu.adopt(h.clone());
  const std::size_t before = pinned_host_pool()->stats().in_use;
  {
    const tensor back = gpu.to_host(d);
    CHECK(back.where() == device::cpu());
    CHECK(pinned_host_pool()->stats().in_use >= before + back.nbytes());
    CHECK(std::vector<float>(back.span<float>().begin(), back.span<float>().end()) ==
          std::vector<float>(h.span<float>().begin(), h.span<float>().end()));
  }
  CHECK(pinned_host_pool()->stats().in_use == before);
}

TEST_CASE("a page-locked host tensor adopted by a GPU may be reused at once", "[cuda]") {
  if (!cuda_test::have_gpu()) return;
  const device_context a = device_context::cuda(0), b = device_context::cuda(0);
  const std::int64_t n = std::int64_t{1} << 22;
  auto filled = [&](float v) {
    tensor h({n}, dtype::f32);
    for (float& x : h.span<float>()) x = v;
    return a.adopt(std::move(h));
  };
  const tensor ones = filled(1.f), twos = filled(2.f);
  for (int round = 0; round < 5; ++round) {
    tensor host = a.to_host(ones);  // page-locked, from the pool
    const tensor here = b.adopt(std::move(host));  // its block goes back to the pool now
    const tensor other = a.to_host(twos);          // and is written again at once
    const tensor back = b.to_host(here);
    std::int64_t wrong = 0;
    for (float v : back.span<float>()) wrong += v != 1.f;
    CHECK(wrong == 0);
  }
}
