// device_context: on the CPU a oneTBB arena, on a GPU the resources open_gpu gives.
#include "ops/device/device_context.hpp"

namespace pipeworks {

device_context device_context::cpu(int threads) {
  device_context c;
  c.device_ = device::cpu();
  c.threads_ = threads > 0 ? threads : 0;
  if (threads > 0) c.arena_ = std::make_unique<tbb::task_arena>(threads);
  return c;
}

device_context device_context::cuda(int index) {
  device_context c;
  c.device_ = device{device_kind::cuda, index};
  c.gpu_ = open_gpu(index);
  return c;
}

device_context::device_context(device_context&&) noexcept = default;
device_context& device_context::operator=(device_context&&) noexcept = default;
device_context::~device_context() = default;

}  // namespace pipeworks
