// The model and split of the run that wrote the rank-file seeds (corpus/rank_file, and their
// metadata alone in corpus/rank_state), shared by fuzz/rank_file.cpp and fuzz/rank_state.cpp.
#pragma once
#include <vector>

#include "ops/model/mlp.hpp"

namespace pipeworks::fuzz {

// pipeworks train --model MLP.json ('{"type": "mlp", "hidden": [1]}') --optimizer sgd
// --schedule 1f1b or 2bw --stages 2 --microbatches 2 --batch 4 --save-every 1: split 0,1.
struct rank_layout {
  model<float> m = make_mlp<float>({.hidden = {1}});
  std::vector<int> boundaries{0, 1, m.size()};
};

}  // namespace pipeworks::fuzz
