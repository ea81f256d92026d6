// The checking macro for cuBLAS calls (a failure becomes a pipeworks_error naming the call, the
// file and line and cuBLAS's words) and the raw handle of a blas_handle.
#pragma once
#include <cublas_v2.h>

#include <string>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/linear_cuda.hpp"

#define PW_CUBLAS(call)                                                                     \
  do {                                                                                      \
    const cublasStatus_t pw_blas_s_ = (call);                                               \
    if (pw_blas_s_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::pipeworks::cuda::fail_message(std::string(#call) + " failed at " + __FILE__ + ":" + \
                                      std::to_string(__LINE__) + ": " +                     \
                                      cublasGetStatusString(pw_blas_s_));                   \
  } while (0)

namespace pipeworks::cuda {

inline cublasHandle_t handle_of(const blas_handle& b) { return static_cast<cublasHandle_t>(b.get()); }

}  // namespace pipeworks::cuda
