// How a GPU rank's matrix products run (--tf32, --bf16); plain C++17 so that CUDA sources can
// include it.
#pragma once
#include <cstdint>

namespace pipeworks {

// How a GPU rank's matrix products run: strict fp32; TF32 tensor cores (about 1e-3 relative
// error); or bf16 (the linear layers' products take bf16 copies of their operands and accumulate
// in fp32, attention runs as with TF32; weights, gradients, activations and the optimizer stay
// fp32: about 1e-2).
enum class gpu_math : std::uint8_t { fp32, tf32, bf16 };
gpu_math gpu_math_of(bool tf32, bool bf16);  // bf16 wins over tf32
const char* to_string(gpu_math m);           // "fp32", "TF32", "bf16"

}  // namespace pipeworks
