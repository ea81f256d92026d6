// Softmax cross-entropy on the GPU (fp32): ops/layers/cross_entropy.hpp's contract, device
// pointers, on `stream` (a cudaStream_t; null: the default stream).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// probs (N, V) saved for backward; logits (N, V); targets (N); row_loss (N) device scratch that
// receives logsumexp - logit[target] per row. Returns the mean loss (it waits for the stream and
// sums the rows on the host in double, in row order). A target outside [0, V) throws.
float cross_entropy_forward(float* probs, float* row_loss, const float* logits,
                            const std::int32_t* targets, std::int64_t N, int V,
                            void* stream = nullptr);
// dlogits (N, V) += (probs - onehot(target)) * dloss / N.
void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                            float dloss, std::int64_t N, int V, void* stream = nullptr);

}  // namespace pipeworks::cuda
