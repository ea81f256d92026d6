// find_gpus in a build without the CUDA toolkit (or with -DPIPEWORKS_CUDA=OFF): there are none.
#include "ops/device/device.hpp"

namespace pipeworks {

gpu_census find_gpus() {
  return {0, "this pipeworks was built without CUDA (no toolkit found, or -DPIPEWORKS_CUDA=OFF)", ""};
}

}  // namespace pipeworks
