// How one optimizer step's minibatch is dealt to the replicas: it is cut into w * m equal
// microbatches, and microbatch j goes to replica j % w as that replica's microbatch j / w.
#pragma once
#include <vector>

#include "base/result.hpp"
#include "ops/train/microbatches.hpp"

namespace pipeworks {

// [replica][k]: replica r's k-th microbatch of the step. An error when w * m does not divide B.
result<std::vector<std::vector<microbatch>>> deal_microbatches(const minibatch& mb, int replicas,
                                                               int microbatches);

}  // namespace pipeworks
