// find_gpus through the CUDA runtime, and the CUDA checking macro's failure. Without a GPU or a
// driver cudaGetDeviceCount fails (35, cudaErrorInsufficientDriver, or 100, no device) rather
// than reporting 0: both read as "no GPUs", with CUDA's words.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "base/result.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/device/device.hpp"

namespace pipeworks {

namespace cuda {

void fail(cudaError_t e, const char* call, const char* file, int line) {
  std::string hint;
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    hint = "; this machine has no usable GPU: run with --device cpu";
  else if (e == cudaErrorMemoryAllocation)
    hint = "; the GPU is out of memory: lower --batch or raise --microbatches";
  throw pipeworks_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                        ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")" + hint);
}

void fail_message(const std::string& message) { throw pipeworks_error(message); }

}  // namespace cuda

gpu_census find_gpus() {
  gpu_census c;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    c.why = std::string("no GPU: cudaGetDeviceCount says ") + cudaGetErrorName(e) + " (" +
            std::to_string(static_cast<int>(e)) + ", " + cudaGetErrorString(e) + ")";
    (void)cudaGetLastError();  // clear it: later calls must not see it
    return c;
  }
  if (n == 0) {
    c.why = "no GPU: CUDA reports 0 devices";
    return c;
  }
  c.count = n;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    char line[320];
    std::snprintf(line, sizeof line, "%s%s (sm_%d%d)", d ? "; " : "", p.name, p.major, p.minor);
    c.names += line;
  }
  return c;
}

}  // namespace pipeworks
