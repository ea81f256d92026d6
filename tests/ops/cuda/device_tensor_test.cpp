// Tensors on a GPU: made zeroed from the GPU's caching allocator, copied there and back bit for
// bit, cloned on the GPU, and refused as payloads until copied to the CPU. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cstring>

#include "gpu_test_util.hpp"
#include "ops/tensor.hpp"
#include "ops/tensor_payload.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/gpu_resources.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("tensors go to a GPU and back by explicit copies", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  auto gpu = open_gpu(0);
  const device d = parse_device("cuda:0").value();
  tensor z = tensor::on({1000}, dtype::f32, d, gpu->memory());
  CHECK(z.where() == d);
  CHECK(z.copy_to(device::cpu()).span<float>()[999] == 0.f);
  tensor a({3, 5}, dtype::f64);
  for (int i = 0; i < 15; ++i) a.data<double>()[i] = i * 1.25;
  tensor g = a.copy_to(d, gpu->memory());
  tensor g2 = g.clone();  // on the GPU
  CHECK(g2.where() == d);
  tensor back = g2.copy_to(device::cpu());
  CHECK(std::memcmp(back.bytes(), a.bytes(), a.nbytes()) == 0);
  CHECK(gpu->memory()->stats().in_use >= 2 * a.nbytes());
  // A GPU tensor in a payload (between ranks on one GPU in one process): its bytes are refused,
  // copies stay on the GPU, on_host() and take() give it back.
  tensor_payload p(std::move(g));
  CHECK(p.where() == d);
  CHECK_THROWS_WITH(p.bytes(), Catch::Contains("copy it to the host first"));
  const tensor_payload shared = p;  // shares the buffer: take() copies, on the GPU
  const tensor_payload host = p.on_host();
  CHECK(host.where() == device::cpu());
  CHECK(std::memcmp(host.bytes().data(), a.bytes(), a.nbytes()) == 0);
  tensor t = p.take();
  CHECK(t.where() == d);
  CHECK(std::memcmp(t.copy_to(device::cpu()).bytes(), a.bytes(), a.nbytes()) == 0);
#endif
}
