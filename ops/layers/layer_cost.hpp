// What a layer reports for the partitioner: parameter bytes, bytes saved for backward and
// output bytes per sample, and FLOPs per sample (forward; backward is about twice that).
#pragma once
#include <cstdint>

namespace pipeworks {

struct layer_cost {
  std::int64_t param_bytes = 0;
  std::int64_t saved_bytes_per_sample = 0;
  std::int64_t output_bytes_per_sample = 0;
  std::int64_t flops_per_sample = 0;  // forward FLOPs (a multiply-add counts 2)

  layer_cost& operator+=(const layer_cost& o) {
    param_bytes += o.param_bytes;
    saved_bytes_per_sample += o.saved_bytes_per_sample;
    output_bytes_per_sample = o.output_bytes_per_sample;  // a sequence's output is its last layer's
    flops_per_sample += o.flops_per_sample;
    return *this;
  }
};

}  // namespace pipeworks
