// find_gpus and open_gpu in a build without the CUDA toolkit (or with -DPIPEWORKS_CUDA=OFF):
// there are no GPUs.
#include "base/result.hpp"
#include "ops/device/device.hpp"

namespace pipeworks {

namespace {
const char* why_none = "this pipeworks was built without CUDA (no toolkit found, or -DPIPEWORKS_CUDA=OFF)";
}

class gpu_resources {};

gpu_census find_gpus() { return {0, why_none, ""}; }

std::shared_ptr<gpu_resources> open_gpu(int index) {
  throw pipeworks_error("cuda:" + std::to_string(index) + " cannot be used: " + why_none +
                        "; run with --device cpu");
}

}  // namespace pipeworks
