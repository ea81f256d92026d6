// A rank's checkpoint file: its rank_state as one safetensors file. The latest weights keep
// their Hugging Face names (so PyTorch and the safetensors library read them as a state dict);
// everything else is under "pipeworks.*" names, described by the "pipeworks.rank_state" metadata:
//   pipeworks.version.V/NAME   an older weight version V still needed (stashes, 2BW's buffer)
//   pipeworks.optim.m/NAME     the optimizer's first moment (SGD's momentum); .v/ the second
//   pipeworks.grad/NAME        the gradient accumulated so far (absent when zero)
//   pipeworks.held.S.K/...     microbatch K of stage S between its forward and backward: its
//                              input (the stash is recomputed from it) or what I left for W
//   pipeworks.send_f.I/..., pipeworks.send_b.I/...  results waiting for their SEND
//   pipeworks.deliver.I/...    messages to deliver again (buffered, or in flight at the cut)
//   pipeworks.losses           losses the driver had not tallied (F64)
#pragma once
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/checkpoint/safetensors.hpp"
#include "ops/model/model.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/rank_state.hpp"

namespace pipeworks {

// Writes the state atomically (write_safetensors) and returns the file's size and sha256.
// `identity` is added to the metadata (model, schedule), for people and for checks.
result<written_file> write_rank_file(const std::string& path, const rank_state& state,
                                     const metadata_map& identity = {});

// Reads a rank's file back. The layout of each of its stages comes from the model and the
// boundaries (stage s holds blocks [b[s], b[s+1])). Errors name the file and the tensor or the
// metadata field; a tensor of another dtype or shape than the layout's is an error (no silent
// conversion: resuming must be bit-exact).
template <class T>
result<rank_state> read_rank_file(const std::string& path, const model<T>& m,
                                  const std::vector<int>& boundaries);
template <class T>
result<rank_state> parse_rank_file(const safetensors_file& file, const model<T>& m,
                                   const std::vector<int>& boundaries);

// Reads and checks a rank's checkpoint file: its size and sha256 against the manifest's, the
// plan fields it records against `identity` (rank_identity of the plan), then its contents
// against the model and boundaries, and its step against `step` (the checkpoint's; -1: any).
// Errors name the file and what is wrong.
template <class T>
result<rank_state> load_rank_checkpoint(const std::string& dir, const checkpoint_file& file,
                                        const model<T>& m, const std::vector<int>& boundaries,
                                        const metadata_map& identity = {},
                                        std::int64_t step = -1);

}  // namespace pipeworks
