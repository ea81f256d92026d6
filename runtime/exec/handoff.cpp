// How a tensor one rank made reaches another rank: on the GPU within a process, else by the host.
#include "runtime/exec/handoff.hpp"

namespace pipeworks {

handoff handoff_between(const device& from, int from_process, const device& to, int to_process) {
  const bool gpus = from.kind == device_kind::cuda && to.kind == device_kind::cuda;
  return gpus && from_process == to_process ? handoff::gpu : handoff::host;
}

}  // namespace pipeworks
