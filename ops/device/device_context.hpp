// What a rank's kernels run on, owned by its executor: the device and what it needs. On the CPU
// that is a oneTBB arena of the rank's threads (OpenBLAS runs single-threaded inside it); on a GPU
// its stream, caching allocator and cuBLAS handle (gpu_resources, opaque here).
#pragma once
#include <tbb/task_arena.h>

#include <memory>
#include <utility>

#include "ops/device/device.hpp"

namespace pipeworks {

class device_context {
 public:
  // threads > 0: an arena of that many threads; 0: the caller's own threads (hand-driven tests
  // and local runs, which run every rank on one thread).
  static device_context cpu(int threads);
  // GPU `index`: throws pipeworks_error naming it and why when it cannot be had (open_gpu).
  static device_context cuda(int index);
  device_context(device_context&&) noexcept;
  device_context& operator=(device_context&&) noexcept;
  ~device_context();

  const pipeworks::device& where() const { return device_; }
  gpu_resources* gpu() const { return gpu_.get(); }  // null on the CPU
  int threads() const { return threads_; }

  // Runs f with the device's threads: inside the arena on the CPU (f's results go out through
  // what it captures).
  template <class F>
  void run(F&& f) {
    if (arena_) arena_->execute(std::forward<F>(f));
    else f();
  }

 private:
  device_context() = default;

  pipeworks::device device_;
  int threads_ = 0;
  std::unique_ptr<tbb::task_arena> arena_;
  std::shared_ptr<gpu_resources> gpu_;
};

}  // namespace pipeworks
