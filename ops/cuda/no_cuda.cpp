// find_gpus and open_gpu in a build without the CUDA toolkit (or with -DPIPEWORKS_CUDA=OFF):
// there are no GPUs.
#include <cstring>
#include <memory>
#include <string>

#include "base/result.hpp"
#include "ops/device/device.hpp"
#include "ops/device/device_memory.hpp"

namespace pipeworks {

namespace {
const char* why_none = "this pipeworks was built without CUDA (no toolkit found, or -DPIPEWORKS_CUDA=OFF)";
}

class gpu_resources {};

gpu_census find_gpus() { return {0, why_none, ""}; }

void copy_bytes(void* dst, const device& to, const void* src, const device& from, std::size_t n,
                void*, bool) {
  for (const device& d : {to, from})
    if (d.kind != device_kind::cpu)
      throw pipeworks_error("a copy to or from " + d.to_string() + " cannot be made: " + why_none);
  if (n > 0) std::memcpy(dst, src, n);
}

void zero_bytes(void* p, const device& on, std::size_t n, void*) {
  if (on.kind != device_kind::cpu)
    throw pipeworks_error(on.to_string() + " memory cannot be zeroed: " + why_none);
  if (n > 0) std::memset(p, 0, n);
}

void wait_stream(const device& on, void*) {
  if (on.kind != device_kind::cpu)
    throw pipeworks_error(on.to_string() + " cannot be waited for: " + why_none);
}

std::shared_ptr<caching_allocator> pinned_host_pool() { return nullptr; }

std::shared_ptr<void> new_stream(const device& on) {
  throw pipeworks_error(on.to_string() + " has no streams: " + std::string(why_none));
}

std::shared_ptr<void> record_event(const device& on, void*) {
  throw pipeworks_error(on.to_string() + " has no events: " + std::string(why_none) +
                        "; run with --device cpu");
}

void stream_wait_event(const device& on, void*, const std::shared_ptr<void>&) {
  throw pipeworks_error(on.to_string() + " has no events: " + std::string(why_none) +
                        "; run with --device cpu");
}

bool event_done(const device& on, const std::shared_ptr<void>&) {
  throw pipeworks_error(on.to_string() + " has no events: " + std::string(why_none) +
                        "; run with --device cpu");
}

void wait_event(const device& on, const std::shared_ptr<void>&) {
  throw pipeworks_error(on.to_string() + " has no events: " + std::string(why_none) +
                        "; run with --device cpu");
}

std::shared_ptr<gpu_resources> open_gpu(int index, gpu_math) {
  throw pipeworks_error("cuda:" + std::to_string(index) + " cannot be used: " + why_none +
                        "; run with --device cpu");
}

}  // namespace pipeworks
