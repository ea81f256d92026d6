// --init: the weights a new run starts from, read from a safetensors file (such as --save
// writes, or any file with the model's Hugging Face names) or from a checkpoint directory (its
// latest complete checkpoint: the latest weights in its rank files).
#pragma once
#include <string>

#include "ops/model/model.hpp"

namespace pipeworks::cli {

// The whole model's weights; throws pipeworks_error naming the file and the missing tensor.
param_set load_init_weights(const std::string& path, const model<float>& net);

}  // namespace pipeworks::cli
