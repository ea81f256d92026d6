// `pipeworks train`'s data: the plan's text or Fashion-MNIST read once, its held-out set for the
// final evaluation, and the run's minibatches for the resolved plan.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/data/fashion_mnist.hpp"
#include "ops/data/text.hpp"
#include "ops/train/microbatches.hpp"
#include "runtime/exec/run_api.hpp"

namespace pipeworks::cli {

// The training data and the held-out set of a plan's data source.
struct loaded_data {
  std::shared_ptr<const image_dataset> images;
  std::shared_ptr<const text_corpus> corpus;
  text_split text;
  minibatch held_out;
};

// Reads the plan's data. A text's held-out part gives eval_windows windows (fewer when it has no
// room for them, unless windows_given: then --eval-windows is refused); a text too small for one
// window is refused naming --data.
loaded_data load_data(const run_plan& plan, std::int64_t eval_windows, bool windows_given);

// The run's minibatches for a resolved plan (its batch may be the planner's); `d` must outlive it.
data_factory data_of(const loaded_data& d, const run_plan& plan);

}  // namespace pipeworks::cli
