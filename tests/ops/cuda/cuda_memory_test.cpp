// GPU memory through the caching allocator (a block comes back from the cache, the peak is what
// was in use at once, a request beyond the GPU names it) and a pinned round trip host -> device ->
// host with cudaMemcpyAsync. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cstring>

#include "gpu_test_util.hpp"
#include "ops/device/caching_allocator.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/cuda_memory.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("GPU memory comes from the caching allocator and pinned copies round trip", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  caching_allocator a(cuda::device_memory(0));
  void* x = a.allocate(1 << 20);
  void* y = a.allocate(3 << 20);
  a.deallocate(x);
  CHECK(a.allocate(1 << 20) == x);
  CHECK(a.stats().peak_in_use == (4u << 20));
  CHECK(a.stats().raw_allocations == 2);
  CHECK_THROWS_WITH(a.allocate(std::size_t(1) << 50), Catch::Contains("cuda:0 is out of memory"));
  cuda::pinned_buffer in(1 << 20), out(1 << 20);
  for (std::size_t i = 0; i < in.size(); ++i) static_cast<unsigned char*>(in.data())[i] = static_cast<unsigned char>(i * 31);
  PW_CUDA(cudaMemcpyAsync(y, in.data(), in.size(), cudaMemcpyHostToDevice, nullptr));
  PW_CUDA(cudaMemcpyAsync(out.data(), y, out.size(), cudaMemcpyDeviceToHost, nullptr));
  PW_CUDA(cudaStreamSynchronize(nullptr));
  CHECK(std::memcmp(in.data(), out.data(), in.size()) == 0);
  a.deallocate(x);
  a.deallocate(y);
#endif
}
