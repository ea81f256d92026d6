// Moving bytes between devices, the explicit copies a tensor makes when it crosses devices (host
// to GPU, GPU to host, GPU to GPU), and zeroing device memory. ops/cuda/ implements them with the
// CUDA runtime; a build without CUDA does the CPU's part and refuses a GPU side by name.
#pragma once
#include <cstddef>

#include "ops/device/device.hpp"

namespace pipeworks {

// n bytes from src on `from` to dst on `to`. On `stream` (a cudaStream_t) when given; else it
// returns once the copy is done.
void copy_bytes(void* dst, const device& to, const void* src, const device& from, std::size_t n,
                void* stream = nullptr);
// n zero bytes at p on `on`, as copy_bytes for the stream.
void zero_bytes(void* p, const device& on, std::size_t n, void* stream = nullptr);
// Returns once the work queued on `stream` (a cudaStream_t of GPU `on`) is done; nothing on the CPU.
void wait_stream(const device& on, void* stream);

}  // namespace pipeworks
