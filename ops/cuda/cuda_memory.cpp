// device_memory and pinned_buffer on the CUDA runtime.
#include "ops/cuda/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "ops/device/device_memory.hpp"

#include "ops/cuda/cuda_check.hpp"

namespace pipeworks::cuda {

caching_allocator::raw_allocator device_memory(int device) {
  return {[device](std::size_t n) -> void* {
            PW_CUDA(cudaSetDevice(device));
            void* p = nullptr;
            const cudaError_t e = cudaMalloc(&p, n);
            if (e == cudaErrorMemoryAllocation) {
              (void)cudaGetLastError();  // not sticky: clear it, the allocator retries or reports
              return nullptr;
            }
            PW_CUDA(e);
            return p;
          },
          [device](void* p) {
            cudaSetDevice(device);
            cudaFree(p);
          },
          "cuda:" + std::to_string(device)};
}

}  // namespace pipeworks::cuda

namespace pipeworks {

namespace {

// Lets GPU `to` reach GPU `from`'s memory directly (NVLink or PCIe peer to peer), asked once per
// pair: a peer copy between GPUs that cannot is staged through the host by the driver.
void enable_peer_access(int to, int from) {
  static std::mutex mu;
  static std::set<std::pair<int, int>> asked;
  const std::lock_guard<std::mutex> lock(mu);
  if (!asked.insert({to, from}).second) return;
  int can = 0;
  PW_CUDA(cudaDeviceCanAccessPeer(&can, to, from));
  if (!can) return;
  PW_CUDA(cudaSetDevice(to));
  // Enabled before us (another library in the process), or refused (too many peers): either way
  // the copy works, staged by the driver when it must be. The error is not sticky: cleared.
  if (cudaDeviceEnablePeerAccess(from, 0) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace

void copy_bytes(void* dst, const device& to, const void* src, const device& from, std::size_t n,
                void* stream, bool source_kept) {
  if (n == 0) return;
  if (to.kind == device_kind::cpu && from.kind == device_kind::cpu) {
    std::memcpy(dst, src, n);
    return;
  }
  // Unified addressing tells the direction from the pointers; the GPU's own device is made current
  // (the destination's between two GPUs, whose stream the copy is ordered on).
  PW_CUDA(cudaSetDevice(to.kind == device_kind::cuda ? to.index : from.index));
  const auto s = static_cast<cudaStream_t>(stream);
  if (to.kind == device_kind::cuda && from.kind == device_kind::cuda && to.index != from.index) {
    enable_peer_access(to.index, from.index);
    PW_CUDA(cudaSetDevice(to.index));
    PW_CUDA(cudaMemcpyPeerAsync(dst, to.index, src, from.index, n, s));
  } else {
    PW_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
  }
  if (stream == nullptr) {
    PW_CUDA(cudaStreamSynchronize(s));
    return;
  }
  // From the host the source may be freed once this returns: from pageable memory the copy has
  // been staged by then, from page-locked memory (the pinned pool's) it has to be waited for.
  if (from.kind == device_kind::cpu && !source_kept) {
    cudaPointerAttributes a{};
    PW_CUDA(cudaPointerGetAttributes(&a, src));
    if (a.type == cudaMemoryTypeHost) PW_CUDA(cudaStreamSynchronize(s));
  }
}

void zero_bytes(void* p, const device& on, std::size_t n, void* stream) {
  if (n == 0) return;
  if (on.kind == device_kind::cpu) {
    std::memset(p, 0, n);
    return;
  }
  PW_CUDA(cudaSetDevice(on.index));
  const auto s = static_cast<cudaStream_t>(stream);
  PW_CUDA(cudaMemsetAsync(p, 0, n, s));
  if (stream == nullptr) PW_CUDA(cudaStreamSynchronize(s));
}

void wait_stream(const device& on, void* stream) {
  if (on.kind == device_kind::cpu) return;
  PW_CUDA(cudaSetDevice(on.index));
  PW_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

std::shared_ptr<caching_allocator> pinned_host_pool() {
  // Made once and never destroyed: host tensors from it may outlive every other static.
  static auto* pool = new std::shared_ptr<caching_allocator>(std::make_shared<caching_allocator>(
      caching_allocator::raw_allocator{
          [](std::size_t n) -> void* {
            void* p = nullptr;
            const cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocPortable);
            if (e == cudaErrorMemoryAllocation) {
              (void)cudaGetLastError();
              return nullptr;
            }
            PW_CUDA(e);
            return p;
          },
          [](void* p) { cudaFreeHost(p); }, "page-locked host memory"},
      4096));
  return *pool;
}

std::shared_ptr<void> new_stream(const device& on) {
  PW_CUDA(cudaSetDevice(on.index));
  cudaStream_t s = nullptr;
  PW_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int index = on.index;
  return std::shared_ptr<void>(s, [index](void* p) {
    cudaSetDevice(index);
    cudaStreamSynchronize(static_cast<cudaStream_t>(p));
    cudaStreamDestroy(static_cast<cudaStream_t>(p));
  });
}

std::shared_ptr<void> record_event(const device& on, void* stream) {
  PW_CUDA(cudaSetDevice(on.index));
  cudaEvent_t e = nullptr;
  PW_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::shared_ptr<void> event(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  PW_CUDA(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
  return event;
}

void stream_wait_event(const device& on, void* stream, const std::shared_ptr<void>& event) {
  PW_CUDA(cudaSetDevice(on.index));
  PW_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                              static_cast<cudaEvent_t>(event.get()), 0));
}

void wait_event(const device& on, const std::shared_ptr<void>& event) {
  PW_CUDA(cudaSetDevice(on.index));
  PW_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(event.get())));
}

bool event_done(const device& on, const std::shared_ptr<void>& event) {
  PW_CUDA(cudaSetDevice(on.index));
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event.get()));
  if (e == cudaErrorNotReady) return false;
  PW_CUDA(e);
  return true;
}

}  // namespace pipeworks

namespace pipeworks::cuda {

pinned_buffer::pinned_buffer(std::size_t bytes) : n_(bytes) {
  PW_CUDA(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes));
}

pinned_buffer::~pinned_buffer() {
  if (p_) cudaFreeHost(p_);
}

}  // namespace pipeworks::cuda
