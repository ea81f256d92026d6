// handoff_between: GPU tensors stay on the GPU between ranks of one process (one GPU or two),
// and go through the host to the CPU or to another process.
#include <catch2/catch.hpp>

#include "runtime/exec/handoff.hpp"

using namespace pipeworks;

TEST_CASE("a GPU tensor stays on the GPU for a GPU rank of its own process", "[handoff]") {
  const device gpu0{device_kind::cuda, 0}, gpu1{device_kind::cuda, 1};
  CHECK(handoff_between(gpu0, 0, gpu0, 0) == handoff::gpu);  // another stream of the same GPU
  CHECK(handoff_between(gpu0, 0, gpu1, 0) == handoff::gpu);  // a peer copy
  CHECK(handoff_between(gpu1, 2, gpu0, 2) == handoff::gpu);
}

TEST_CASE("a tensor goes through the host to the CPU or to another process", "[handoff]") {
  const device cpu = device::cpu(), gpu0{device_kind::cuda, 0}, gpu1{device_kind::cuda, 1};
  CHECK(handoff_between(gpu0, 0, cpu, 0) == handoff::host);
  CHECK(handoff_between(cpu, 0, gpu0, 0) == handoff::host);
  CHECK(handoff_between(cpu, 0, cpu, 0) == handoff::host);
  CHECK(handoff_between(gpu0, 0, gpu0, 1) == handoff::host);
  CHECK(handoff_between(gpu0, 1, gpu1, 0) == handoff::host);
}
