// AdamW as one CUDA kernel over a flat parameter arena (fp32): the same formula, in the same
// order, as ops/optim/adamw.cpp. Pointers are device memory; `stream` is a cudaStream_t (null:
// the default stream).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pipeworks::cuda {

// w1 = w*(1 - lr*wd); m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²;
// w_out = w1 - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). w_out may alias w.
void adamw_update(float* w_out, const float* w, const float* g, float* m, float* v, std::size_t n,
                  std::int64_t t, double lr, double beta1, double beta2, double eps,
                  double weight_decay, void* stream = nullptr);

}  // namespace pipeworks::cuda
