// What a rank's kernels run on, owned by its executor: the device and what it needs. On the CPU
// that is a oneTBB arena of the rank's threads (OpenBLAS runs single-threaded inside it); on a GPU
// its stream, caching allocator and cuBLAS handle (gpu_resources, opaque here).
#pragma once
#include <tbb/parallel_invoke.h>
#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

#include <memory>
#include <utility>
#include <vector>

#include "ops/device/caching_allocator.hpp"
#include "ops/device/device.hpp"
#include "ops/memory_account.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

class device_context {
 public:
  // threads > 0: an arena of that many threads; 0: the caller's own threads (hand-driven tests
  // and local runs, which run every rank on one thread).
  static device_context cpu(int threads);
  // GPU `index`, its matrix products run as `math` says: throws pipeworks_error naming it and
  // why when it cannot be had (open_gpu).
  static device_context cuda(int index, gpu_math math = gpu_math::fp32);
  // The one way to open a rank's device from its device value: cuda(where.index, math) for a
  // GPU, cpu(cpu_threads) for the CPU.
  static device_context open(const device& where, gpu_math math, int cpu_threads);
  device_context(device_context&&) noexcept;
  device_context& operator=(device_context&&) noexcept;
  ~device_context();

  const pipeworks::device& where() const { return device_; }
  gpu_resources* gpu() const { return gpu_.get(); }  // null on the CPU
  int threads() const { return threads_; }
  bool on_gpu() const { return gpu_ != nullptr; }

  // Tensors on this device, ordered on its stream: zeroed, or with every byte left for the
  // caller to write.
  tensor zeros(shape_t shape, dtype dt) const;
  tensor uninitialized(shape_t shape, dtype dt) const;
  // The output of an op that writes every element, left unset: every forward kernel, CPU and
  // CUDA, writes its whole output (zero-filling them first cost 3% of a gpt-small CPU step).
  tensor output(shape_t shape, dtype dt) const;
  // t itself when it is on this device (on this context's stream), else a copy here: the explicit
  // crossing of devices, or a device-to-device copy from another rank's stream on the same GPU.
  // That copy waits on the GPU for t's ready event (hand_over), not on the host; t is kept until
  // the copy is done and then goes back to its own allocator.
  tensor adopt(tensor t) const;
  // A copy here of t, which someone else owns and which is only read: from the host, or from
  // another stream or GPU after t's ready event (hand_over); `keeper` (what owns t) is held until
  // the copy is done. Always a copy, on this device's stream.
  tensor copy_of(const tensor& t, std::shared_ptr<const void> keeper) const;
  // Marks t, made on this GPU's stream, for another stream to read: records the event that t's
  // contents are complete at (the producer does not wait). Nothing on the CPU.
  void hand_over(tensor& t) const;
  // A copy of t on the CPU, complete when it returns.
  tensor to_host(const tensor& t) const;
  // Activation offload on a copy stream of its own, so that the copies overlap compute. offload:
  // t's copy into page-locked host memory, queued after the work queued here so far; it returns
  // at once with the host tensor, whose ready event marks the copy done (t is kept until then).
  // On the CPU a plain copy (to_host).
  tensor offload(tensor t) const;
  // The tensors offloaded since the last call are one stash: the host waits here until the stash
  // offloaded before it is out (the memory plan counts one stash on its way out). Nothing on the
  // CPU.
  void bound_offloads() const;
  // An offloaded h back on this GPU, queued on the copy stream after h's copy out and after the
  // work queued here so far (the new memory's earlier users); it returns at once, the copy's
  // ready event on the tensor: wait_ready before this stream reads it. h is kept until the copy
  // is done. A tensor on the GPU already (fetched before), and anything on the CPU, is returned as
  // it is.
  tensor fetch(tensor h) const;
  // This stream waits (on the GPU, not the caller) for t's ready event, which is then cleared.
  void wait_ready(tensor& t) const;
  // This stream waits (on the GPU) for the work queued on `other`'s stream so far (another stream
  // of the same GPU, or another GPU's). Nothing on the CPU.
  void wait_for(const device_context& other) const;
  // Two contexts of one GPU (a rank's stream and its second one): when either allocator finds the
  // GPU full, the other gives back its cache before it gives up. Nothing on the CPU.
  void share_memory_with(const device_context& other) const;
  // Returns once the work queued on this device, its copy stream's too, is done (at once on the
  // CPU).
  void wait() const;
  // Lets go of what the copies already done here read or wrote (never waits).
  void release_done() const { release_copied(false); }
  void* stream() const;  // a GPU's cudaStream_t, null on the CPU
  // A GPU's caching allocator's figures (its peak is the rank's device memory peak); zeros on
  // the CPU.
  allocator_stats memory_stats() const;
  // On the CPU: the host tensors made by the arena's worker threads are charged to `account`
  // (the rank's; its own thread charges it with account_scope). Nothing on a GPU.
  void charge_to(std::shared_ptr<memory_account> account);
  // On a GPU: its caching allocator hands out at most `bytes` at once (0: no limit), refusing
  // past it with an error naming `who` (the CPU's limit is its memory account's). Nothing on the
  // CPU.
  void limit_memory(std::int64_t bytes, const std::string& who);

  // Runs f with the device's threads: inside the arena on the CPU (f's results go out through
  // what it captures).
  template <class F>
  void run(F&& f) {
    if (arena_) arena_->execute(std::forward<F>(f));
    else f();
  }
  // Runs f and g at once, each with a share of the device's threads, on a CPU arena of two
  // threads or more; one after the other otherwise (one thread, or a GPU's one stream).
  template <class F, class G>
  void run_both(F&& f, G&& g) {
    if (arena_ && threads_ > 1) {
      arena_->execute([&] { tbb::parallel_invoke(f, g); });
    } else {
      run(f);
      run(g);
    }
  }

 private:
  device_context() = default;

  pipeworks::device device_;
  int threads_ = 0;
  std::unique_ptr<tbb::task_arena> arena_;
  std::unique_ptr<tbb::task_scheduler_observer> observer_;  // of arena_: charge_to's account
  std::shared_ptr<gpu_resources> gpu_;
  // What the copies queued here read or write (tensors of other ranks' streams, offloaded and
  // fetched stashes), each kept until the event after its copy is done (then let go by later
  // calls).
  mutable std::vector<std::pair<std::shared_ptr<const void>, std::shared_ptr<void>>> copied_from_;
  mutable std::shared_ptr<void> copy_stream_;  // offload's copies (a cudaStream_t), made when needed
  mutable std::vector<std::shared_ptr<void>> offloads_;  // the events of stashes on their way out
  mutable std::shared_ptr<void> last_offload_;           // the latest offload's event
  void release_copied(bool all) const;
  void* copy_stream() const;
  std::shared_ptr<caching_allocator> gpu_memory() const;  // a GPU's caching allocator; null on the CPU
  // t's copy into host memory on `stream`: page-locked (the process's pool) while it lasts; waited
  // for, or only queued when `wait` is false.
  tensor host_copy(const tensor& t, void* stream, bool wait) const;
};

// The CPU on the caller's own threads (device_context::cpu(0)): what code that runs blocks
// outside a rank uses (evaluation, sampling, the profiler, tests).
const device_context& host_context();

}  // namespace pipeworks
