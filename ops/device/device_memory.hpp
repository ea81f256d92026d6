// Moving bytes between devices, the explicit copies a tensor makes when it crosses devices (host
// to GPU, GPU to host, GPU to GPU), and zeroing device memory. ops/cuda/ implements them with the
// CUDA runtime; a build without CUDA does the CPU's part and refuses a GPU side by name.
#pragma once
#include <cstddef>
#include <memory>

#include "ops/device/device.hpp"

namespace pipeworks {
class caching_allocator;
}

namespace pipeworks {

// n bytes from src on `from` to dst on `to`. On `stream` (a cudaStream_t) when given; else it
// returns once the copy is done. A host source may be freed once it returns (a copy from
// page-locked memory is waited for) unless `source_kept`: the caller keeps it until the stream
// has done the copy, and nothing waits. A GPU source must live until the stream has done the copy.
void copy_bytes(void* dst, const device& to, const void* src, const device& from, std::size_t n,
                void* stream = nullptr, bool source_kept = false);
// A stream of GPU `on` of its own (destroyed, after its work, with the last pointer to it).
std::shared_ptr<void> new_stream(const device& on);
// n zero bytes at p on `on`, as copy_bytes for the stream.
void zero_bytes(void* p, const device& on, std::size_t n, void* stream = nullptr);
// Returns once the work queued on `stream` (a cudaStream_t of GPU `on`) is done; nothing on the CPU.
void wait_stream(const device& on, void* stream);

// The process's pool of page-locked host memory (cudaHostAlloc; blocks kept for reuse): what a
// GPU's copies to the host land in, so that they run as DMA without a staging copy. Null in a
// build without CUDA.
std::shared_ptr<caching_allocator> pinned_host_pool();

// A CUDA event recorded on `stream` of GPU `on` now (destroyed with the last pointer to it): the
// point in the stream's work after which what is queued so far is done.
std::shared_ptr<void> record_event(const device& on, void* stream);
// Work queued on `stream` from now on waits for `event` (the GPU waits; the caller does not).
void stream_wait_event(const device& on, void* stream, const std::shared_ptr<void>& event);
// Whether the work before `event` is done (never waits).
bool event_done(const device& on, const std::shared_ptr<void>& event);
// Returns once the work before `event` is done (the caller waits).
void wait_event(const device& on, const std::shared_ptr<void>& event);

}  // namespace pipeworks
