// --init: the weights a new run starts from, read from a safetensors file (such as --save
// writes, or any file with the model's Hugging Face names) or from a checkpoint directory (its
// latest complete checkpoint: the latest weights in its rank files).
#pragma once
#include <cstdint>
#include <string>

#include "ops/model/model.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"

namespace pipeworks::cli {

// The whole model's weights. A tensor that does not fit (one of the model's missing from the
// file, one of the file's the model lacks, or another shape) is refused naming the first, as
// CLI::ValidationError under `flag` (--init, or --plan when its init.from named the weights);
// with `partial` (--init-partial) the tensors that fit are loaded, the others keep their seeded
// values, and both are listed on stderr. A file that cannot be read throws pipeworks_error.
param_set load_init_weights(const std::string& path, const model<float>& net, std::uint64_t seed,
                            bool partial, const std::string& flag);

// Fills every tensor of `whole` (the model's layout) from the rank files of checkpoint c: their
// latest weights, under the model's own names (the files are verified first). An error names a
// damaged file or the first tensor of the model that no file holds with its shape.
status gather_checkpoint_weights(const chosen_checkpoint& c, param_set& whole);

}  // namespace pipeworks::cli
