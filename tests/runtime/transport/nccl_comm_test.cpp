// NCCL on one GPU (NCCL refuses two ranks on one device): a one-rank communicator all-reduces a
// buffer to itself and sends to and receives from itself; an id of the wrong size and a rank
// that does not exist are refused by name. Skips without a GPU or without NCCL.
#include <catch2/catch.hpp>

#include <vector>

#include "ops/device/device.hpp"
#ifdef PIPEWORKS_HAVE_NCCL
#include <cuda_runtime.h>

#include "runtime/transport/nccl_comm.hpp"
#endif

using namespace pipeworks;

TEST_CASE("a one-rank NCCL communicator all-reduces and sends to itself", "[cuda]") {
  const gpu_census gpus = find_gpus();
  if (gpus.count == 0) {
    WARN("skipped: " << gpus.why);
    return;
  }
#ifndef PIPEWORKS_HAVE_NCCL
  WARN("skipped: this build has no NCCL");
#else
  const auto id = new_nccl_id();
  CHECK_THROWS_WITH(nccl_comm(std::vector<std::uint8_t>(5), 1, 0, 0, std::chrono::seconds(5)),
                    Catch::Contains("not 5"));
  CHECK_THROWS_WITH(nccl_comm(id, 1, 1, 0, std::chrono::seconds(5)),
                    Catch::Contains("rank 1 of 1 does not exist"));
  nccl_comm comm(id, 1, 0, 0, std::chrono::seconds(30));
  const std::size_t n = 4097;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
  float *a = nullptr, *b = nullptr;
  REQUIRE(cudaMalloc(&a, n * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, n * 4) == cudaSuccess);
  REQUIRE(cudaMemcpy(a, host.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  comm.all_reduce_sum(a, n, nullptr);  // one rank: the sum is the buffer itself
  comm.group_start();
  comm.send(a, n, 0, nullptr);
  comm.recv(b, n, 0, nullptr);
  comm.group_end();
  comm.wait(nullptr);
  std::vector<float> back(n);
  REQUIRE(cudaMemcpy(back.data(), b, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);
  cudaFree(a);
  cudaFree(b);
  comm.abort_communicator();
  CHECK(comm.aborted());
#endif
}
