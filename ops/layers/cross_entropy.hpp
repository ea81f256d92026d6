// Softmax cross-entropy with natural log, averaged over the N positions.
#pragma once
#include <cstdint>

#include "ops/layers/layer_cost.hpp"

namespace pipeworks {

// probs (N, V) saved for backward; logits (N, V); targets (N). Returns the mean loss.
template <class T>
T cross_entropy_forward(T* probs, const T* logits, const std::int32_t* targets, std::int64_t N,
                        int V);

// dlogits (N, V) += (probs - onehot(target)) * dloss / N.
template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets, T dloss,
                            std::int64_t N, int V);

layer_cost cross_entropy_cost(std::int64_t positions, int V, int elem_bytes);

}  // namespace pipeworks
