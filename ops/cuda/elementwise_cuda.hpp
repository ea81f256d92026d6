// The small element-wise kernels that blocks and the optimizer need around the layers (fp32):
// residual sums, accumulation, scaling and the gradient's sum of squares. Device pointers, on
// `stream` (a cudaStream_t; null: the default stream).
#pragma once
#include <cstdint>

namespace pipeworks::cuda {

// out (n) = a + b (out may alias a or b).
void add(float* out, const float* a, const float* b, std::int64_t n, void* stream = nullptr);
// dst (n) += src.
void add_into(float* dst, const float* src, std::int64_t n, void* stream = nullptr);
// x (n) *= f.
void scale(float* x, float f, std::int64_t n, void* stream = nullptr);
// dst (C) += the column sums of x (N, C), deterministic: fixed chunks of rows summed in a fixed
// order, then the chunks in order (a bias's or a layernorm's parameter gradient).
void column_sums_into(float* dst, const float* x, std::int64_t N, int C, void* stream = nullptr);
// The sum of x² in double, reproducible bit for bit: fixed partial sums per block of the grid,
// added on the host in block order. Waits for the stream.
double sum_of_squares(const float* x, std::int64_t n, void* stream = nullptr);

}  // namespace pipeworks::cuda
