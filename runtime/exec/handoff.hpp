// How a tensor one rank made reaches another rank: kept on the GPU (the consumer copies it on its
// own stream after the producer's ready event), or copied to host memory first.
#pragma once
#include "ops/device/device.hpp"

namespace pipeworks {

// gpu: the producer records its ready event and sends the GPU tensor itself; the consumer's
// device_context::adopt copies it: device to device on one GPU, or by peer copy
// (cudaMemcpyPeerAsync) to another GPU of the same process. host: through host memory (to_host),
// from a GPU to the CPU or to any rank of another process.
enum class handoff { gpu, host };

// The way from a rank on `from` in process `from_process` to one on `to` in `to_process`.
handoff handoff_between(const device& from, int from_process, const device& to, int to_process);

}  // namespace pipeworks
