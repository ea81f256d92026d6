// SGD with momentum as one CUDA kernel over a flat parameter arena (fp32): ops/optim's
// sgd_update (PyTorch's semantics), device pointers, on `stream` (a cudaStream_t; null: default).
#pragma once
#include <cstddef>

namespace pipeworks::cuda {

// v = momentum*v + (g + wd*w); w_out = w - lr*v. w_out may alias w.
void sgd_update(float* w_out, const float* w, const float* g, float* velocity, std::size_t n,
                double lr, double momentum, double weight_decay, void* stream = nullptr);

}  // namespace pipeworks::cuda
