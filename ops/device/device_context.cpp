// device_context: on the CPU a oneTBB arena, on a GPU the resources open_gpu gives.
#include "ops/device/device_context.hpp"

#include "ops/device/device_memory.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/gpu_resources.hpp"
#endif

namespace pipeworks {

device_context device_context::cpu(int threads) {
  device_context c;
  c.device_ = device::cpu();
  c.threads_ = threads > 0 ? threads : 0;
  if (threads > 0) c.arena_ = std::make_unique<tbb::task_arena>(threads);
  return c;
}

device_context device_context::cuda(int index, bool tf32) {
  device_context c;
  c.device_ = device{device_kind::cuda, index};
  c.gpu_ = open_gpu(index, tf32);
  return c;
}

void* device_context::stream() const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) return gpu_->stream();
#endif
  return nullptr;
}

allocator_stats device_context::memory_stats() const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) return gpu_->memory()->stats();
#endif
  return {};
}

tensor device_context::zeros(shape_t shape, dtype dt) const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) return tensor::on(std::move(shape), dt, device_, gpu_->memory(), gpu_->stream());
#endif
  return tensor(std::move(shape), dt);
}

tensor device_context::uninitialized(shape_t shape, dtype dt) const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_)
    return tensor::on(std::move(shape), dt, device_, gpu_->memory(), gpu_->stream(), false);
#endif
  return tensor::uninitialized(std::move(shape), dt);
}

tensor device_context::output(shape_t shape, dtype dt) const {
  return gpu_ ? uninitialized(std::move(shape), dt) : zeros(std::move(shape), dt);
}

tensor device_context::adopt(tensor t) const {
  if (t.empty() || (t.where() == device_ && t.stream() == stream())) return t;
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) {
    // From the host or another GPU; or from another rank's stream on this GPU: a device-to-device
    // copy into this rank's memory (the producer waited for its stream before handing t over),
    // complete before t goes back to the producer's allocator.
    const bool same_gpu = t.where() == device_;
    tensor here = t.copy_to(device_, gpu_->memory(), gpu_->stream());
    if (same_gpu) wait();
    return here;
  }
#endif
  return t.copy_to(device_);
}

tensor device_context::to_host(const tensor& t) const {
  if (t.where().kind == device_kind::cpu) return t.clone();
  return t.copy_to(device::cpu());  // ordered on t's own stream
}

void device_context::wait() const {
  if (gpu_) wait_stream(device_, stream());
}

const device_context& host_context() {
  static const device_context host = device_context::cpu(0);
  return host;
}

device_context::device_context(device_context&&) noexcept = default;
device_context& device_context::operator=(device_context&&) noexcept = default;
device_context::~device_context() = default;

}  // namespace pipeworks
