// device_context: on the CPU a oneTBB arena, on a GPU the resources open_gpu gives.
#include "ops/device/device_context.hpp"

#include <algorithm>
#include <atomic>

#include "base/result.hpp"
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

device_context device_context::cuda(int index, gpu_math math) {
  device_context c;
  c.device_ = device{device_kind::cuda, index};
  c.gpu_ = open_gpu(index, math);
  return c;
}

device_context device_context::open(const device& where, gpu_math math, int cpu_threads) {
  return where.kind == device_kind::cuda ? cuda(where.index, math) : cpu(cpu_threads);
}

std::shared_ptr<caching_allocator> device_context::gpu_memory() const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) return gpu_->memory();
#endif
  return nullptr;
}

void* device_context::stream() const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) return gpu_->stream();
#endif
  return nullptr;
}

void device_context::limit_memory(std::int64_t bytes, const std::string& who) {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) gpu_->memory()->set_limit(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 0)), who);
#else
  (void)bytes;
  (void)who;
#endif
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
  return uninitialized(std::move(shape), dt);
}

tensor device_context::adopt(tensor t) const {
  if (t.empty() || (t.where() == device_ && t.stream() == stream())) return t;
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_) {
    // From the host (copy_bytes is done with the source when it returns); or from a GPU, another
    // one or another rank's stream on this one: a device-to-device copy into this rank's memory,
    // after the producer's ready event on the GPU (a tensor handed over without one was complete
    // when it came), and t kept until the copy is done: only then may the producer's allocator
    // give its memory out again.
    auto kept = std::make_shared<tensor>(std::move(t));
    return copy_of(*kept, kept);
  }
#endif
  return t.copy_to(device_);
}

tensor device_context::copy_of(const tensor& t, std::shared_ptr<const void> keeper) const {
  if (!gpu_) return t.copy_to(device_);  // to the host: complete when it returns
  release_copied(false);
  const bool from_gpu = t.where().kind == device_kind::cuda;
  if (from_gpu && t.ready()) stream_wait_event(device_, stream(), t.ready());
  tensor here = t.copy_to(device_, gpu_memory(), stream());
  if (from_gpu) copied_from_.emplace_back(std::move(keeper), record_event(device_, stream()));
  return here;
}

tensor device_context::to_host(const tensor& t) const {
  if (t.where().kind == device_kind::cpu) return t.clone();
  return host_copy(t, nullptr, true);  // ordered on t's own stream
}

tensor device_context::host_copy(const tensor& t, void* stream, bool wait) const {
  // Into page-locked memory (a DMA, no staging copy); into the heap once none could be had (not
  // asked again: each failed try gives the pool's blocks back). A copy into the heap is done when
  // it returns, whatever `wait` says.
  static std::atomic<bool> pinned_exhausted{false};
  if (auto pool = pinned_host_pool(); pool && !pinned_exhausted.load()) {
    try {
      return t.copy_to(device::cpu(), std::move(pool), stream, wait);
    } catch (const pipeworks_error&) {
      pinned_exhausted.store(true);
    }
  }
  return t.copy_to(device::cpu(), nullptr, stream, true);
}

void* device_context::copy_stream() const {
  if (!copy_stream_) copy_stream_ = new_stream(device_);
  return copy_stream_.get();
}

tensor device_context::offload(tensor t) const {
  if (!gpu_ || t.empty() || t.where().kind == device_kind::cpu) return to_host(t);
  void* copies = copy_stream();
  release_copied(false);
  stream_wait_event(device_, copies, record_event(device_, stream()));  // after t's last write
  tensor h = host_copy(t, copies, false);
  h.set_ready(record_event(device_, copies));
  copied_from_.emplace_back(std::make_shared<tensor>(std::move(t)), h.ready());  // goes once read
  last_offload_ = h.ready();
  return h;
}

void device_context::bound_offloads() const {
  if (!gpu_ || !last_offload_) return;
  // One copy stream: the stash's last copy's event covers the whole stash. The one before has
  // had a whole action to finish.
  offloads_.push_back(std::move(last_offload_));
  last_offload_.reset();
  while (offloads_.size() > 1) {
    wait_event(device_, offloads_.front());
    offloads_.erase(offloads_.begin());
  }
  release_copied(false);
}

tensor device_context::fetch(tensor h) const {
  if (!gpu_ || h.empty() || h.where().kind != device_kind::cpu) return h;
  void* copies = copy_stream();
  release_copied(false);
  if (h.ready()) stream_wait_event(device_, copies, h.ready());  // its copy out is done
  stream_wait_event(device_, copies, record_event(device_, stream()));  // the memory's last users
  tensor d = tensor::on(h.shape(), h.type(), device_, gpu_memory(), stream(), false);
  copy_bytes(d.bytes(), device_, h.bytes(), device::cpu(), h.nbytes(), copies, true);
  d.set_ready(record_event(device_, copies));
  copied_from_.emplace_back(std::make_shared<tensor>(std::move(h)), d.ready());  // goes once read
  return d;
}

void device_context::share_memory_with(const device_context& other) const {
#ifdef PIPEWORKS_HAVE_CUDA
  if (!gpu_ || !other.gpu_) return;
  std::weak_ptr<caching_allocator> mine = gpu_->memory(), theirs = other.gpu_->memory();
  gpu_->memory()->set_reclaim([theirs] {
    if (auto a = theirs.lock()) a->release_cached();
  });
  other.gpu_->memory()->set_reclaim([mine] {
    if (auto a = mine.lock()) a->release_cached();
  });
#else
  (void)other;
#endif
}

void device_context::wait_for(const device_context& other) const {
  if (!gpu_ || !other.gpu_) return;
  stream_wait_event(device_, stream(), record_event(other.device_, other.stream()));
}

void device_context::wait_ready(tensor& t) const {
  if (!gpu_ || !t.ready()) return;
  stream_wait_event(device_, stream(), t.ready());
  t.set_ready(nullptr);
}

void device_context::hand_over(tensor& t) const {
  if (gpu_ && !t.empty()) t.set_ready(record_event(device_, stream()));
}

void device_context::release_copied(bool all) const {
  if (all) {
    copied_from_.clear();
    offloads_.clear();
    last_offload_.reset();
    return;
  }
  std::erase_if(copied_from_, [&](const auto& c) { return event_done(device_, c.second); });
}

void device_context::wait() const {
  if (gpu_) {
    wait_stream(device_, stream());
    if (copy_stream_) wait_stream(device_, copy_stream_.get());
    release_copied(true);  // every copy queued here is done
  }
}

const device_context& host_context() {
  static const device_context host = device_context::cpu(0);
  return host;
}

namespace {

// Sets each worker thread's memory account while it works in the arena (the thread that calls
// execute keeps its own: the executor's account_scope).
class account_observer : public tbb::task_scheduler_observer {
 public:
  account_observer(tbb::task_arena& arena, std::shared_ptr<memory_account> account)
      : tbb::task_scheduler_observer(arena), account_(std::move(account)) {
    observe(true);
  }
  ~account_observer() override { observe(false); }
  void on_scheduler_entry(bool worker) override {
    if (worker) set_current_account(account_);
  }
  void on_scheduler_exit(bool worker) override {
    if (worker) set_current_account(nullptr);
  }

 private:
  std::shared_ptr<memory_account> account_;
};

}  // namespace

void device_context::charge_to(std::shared_ptr<memory_account> account) {
  observer_.reset();
  if (arena_ && account) observer_ = std::make_unique<account_observer>(*arena_, std::move(account));
}

device_context::device_context(device_context&&) noexcept = default;
device_context& device_context::operator=(device_context&& o) noexcept {
  if (this == &o) return *this;
  if (gpu_ && !copied_from_.empty()) {
    try {
      wait();  // the copies from other ranks' memory are done before that memory may go back
    } catch (...) {  // a GPU in error: its memory goes with it
    }
  }
  device_ = o.device_;
  threads_ = o.threads_;
  observer_.reset();  // before the arena it observes
  arena_ = std::move(o.arena_);
  observer_ = std::move(o.observer_);
  gpu_ = std::move(o.gpu_);
  copied_from_ = std::move(o.copied_from_);
  copy_stream_ = std::move(o.copy_stream_);
  offloads_ = std::move(o.offloads_);
  last_offload_ = std::move(o.last_offload_);
  return *this;
}
device_context::~device_context() {
  if (gpu_ && !copied_from_.empty()) {
    try {
      wait();
    } catch (...) {  // a GPU in error: its memory goes with it
    }
  }
}

}  // namespace pipeworks
