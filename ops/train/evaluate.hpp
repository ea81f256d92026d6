// Evaluation at fixed weights: mean loss over a set of samples or text windows, and
// classification accuracy, run in batches with no gradients.
#pragma once
#include <cstdint>

#include "ops/model/model.hpp"
#include "base/result.hpp"
#include "ops/train/microbatches.hpp"

namespace pipeworks {

// Mean loss over all rows of data (each row weighs the same), in batches of at most batch rows.
// For gpt: rows are windows, inputs (N, T) and targets (N, T); the loss is the mean cross-entropy
// over every position. The order of work is fixed, so equal weights give a bit-identical loss.
template <class T>
result<double> mean_loss(const model<T>& m, const param_set& p, const minibatch& data,
                         std::int64_t batch);

// The fraction of rows whose largest logit is the label (mlp: inputs (N, 784), labels (N)).
template <class T>
result<double> accuracy(const model<T>& m, const param_set& p, const minibatch& data,
                        std::int64_t batch);

}  // namespace pipeworks
