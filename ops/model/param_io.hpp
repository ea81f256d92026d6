// Saving a param_set as a safetensors checkpoint (Hugging Face names, its own dtype) and
// loading one into a param_set, with every name and shape checked.
#pragma once
#include <string>

#include "ops/checkpoint/safetensors.hpp"
#include "ops/model/param_set.hpp"
#include "base/result.hpp"

namespace pipeworks {

// Writes every tensor of p, atomically (temporary file, then rename).
status save_params(const std::string& path, const param_set& p, const metadata_map& metadata = {});

// Fills every tensor of p from the file: a missing tensor or a wrong shape is an error naming
// the tensor and both shapes. Extra tensors in the file are ignored.
status load_params(const std::string& path, param_set& p);
status load_params(const safetensors_file& file, param_set& p);

}  // namespace pipeworks
