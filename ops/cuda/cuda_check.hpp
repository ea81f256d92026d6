// The one checking macro for CUDA runtime calls: a failure becomes a pipeworks_error naming the
// call, the file and line, CUDA's own words and a hint (as llm.c's cudaCheck does).
#pragma once
#include <cuda_runtime_api.h>

#include <string>


namespace pipeworks::cuda {

[[noreturn]] void fail(cudaError_t e, const char* call, const char* file, int line);
// Throws a pipeworks_error with this message (for .cu files, which do not include base/).
[[noreturn]] void fail_message(const std::string& message);

}  // namespace pipeworks::cuda

#define PW_CUDA(call)                                                        \
  do {                                                                       \
    const cudaError_t pw_cuda_e_ = (call);                                   \
    if (pw_cuda_e_ != cudaSuccess) ::pipeworks::cuda::fail(pw_cuda_e_, #call, __FILE__, __LINE__); \
  } while (0)
