// Devices by name ("cpu", "cuda", "cuda:N") and the GPUs this process can see. The CUDA side of
// the census lives in ops/cuda/ (compiled when the toolkit exists); without it there are none.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "ops/device/gpu_math.hpp"

namespace pipeworks {

enum class device_kind : std::uint8_t { cpu, cuda };

struct device {
  device_kind kind = device_kind::cpu;
  int index = 0;  // the GPU's ordinal (cuda:N); 0 for the CPU
  static device cpu() { return {}; }
  std::string to_string() const;  // "cpu", "cuda:0"
  bool operator==(const device&) const = default;
};

// "cpu", "cuda" (GPU 0) or "cuda:N"; anything else is an error naming the text and the forms.
result<device> parse_device(std::string_view text);

// A device as a run plan or a cluster names it, parsed once where the plan is read: the device,
// and whether it was written with its number ("cuda:0") or without ("cuda"), so that it is
// written back as it was read.
struct named_device {
  device where;
  bool numbered = false;  // "cuda:N" rather than "cuda"

  named_device() = default;
  // A name written in code ("cpu", "cuda:1"); throws pipeworks_error when it names no device.
  named_device(const char* text);
  std::string to_string() const;  // "cpu", "cuda" or "cuda:N", as read
  bool on_gpu() const { return where.kind == device_kind::cuda; }
  bool operator==(const named_device&) const = default;
};
// parse_device, keeping how the device was written; the same errors.
result<named_device> parse_named_device(std::string_view text);

// The GPUs CUDA reports. count is 0 with `why` saying so when there are none: a build without
// the toolkit, no driver, or cudaGetDeviceCount's error (35, no driver, on machines without a
// GPU: not 0 devices). Never throws.
struct gpu_census {
  int count = 0;
  std::string why;  // "" when count > 0
  std::string names;  // "NVIDIA H100 80GB HBM3 (sm_90)" per device, "; "-separated
};
gpu_census find_gpus();

// What a GPU rank's kernels need, owned by its device context: a stream of its own, a caching
// allocator of the GPU's memory and a cuBLAS handle on that stream (ops/cuda/gpu_resources.hpp).
class gpu_resources;
// Opens GPU `index` for a rank. Throws pipeworks_error naming the GPU and why when it cannot be
// had: no such GPU (saying how many there are), no GPU at all, or a build without CUDA.
std::shared_ptr<gpu_resources> open_gpu(int index, gpu_math math = gpu_math::fp32);

}  // namespace pipeworks
