// CUDA embeddings against the CPU's: the output and both tables' gradients (with repeated
// tokens, which must add up), by normalised error (<= 1e-5 in fp32). Skips without a GPU.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "ops/layers/embedding.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include "ops/cuda/embedding_cuda.hpp"
#endif

using namespace pipeworks;
using namespace pipeworks::cuda_test;

TEST_CASE("CUDA embeddings match the CPU forward and backward", "[cuda]") {
  if (!have_gpu()) return;
#ifdef PIPEWORKS_HAVE_CUDA
  // More positions than the backward kernel stages at once (1024).
  const int B = 5, Tn = 300, C = 40, V = 11, maxT = 320;
  std::vector<std::int32_t> tokens(std::size_t(B) * Tn);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7) % V);
  const auto wte = random_floats(std::size_t(V) * C, 14), wpe = random_floats(std::size_t(maxT) * C, 15);
  const auto dy = random_floats(std::size_t(B) * Tn * C, 16);
  std::vector<float> out(std::size_t(B) * Tn * C), dwte(wte.size(), 0.5f), dwpe(wpe.size(), 0.25f);
  embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C);
  embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), B, Tn, C);
  gpu_buffer<std::int32_t> gt(tokens);
  gpu_buffer<float> gwte(wte), gwpe(wpe), gdy(dy), gout(out.size());
  gpu_buffer<float> gdwte(std::vector<float>(wte.size(), 0.5f)), gdwpe(std::vector<float>(wpe.size(), 0.25f));
  cuda::embedding_forward(gout.get(), gt.get(), gwte.get(), gwpe.get(), B, Tn, C);
  cuda::embedding_backward(gdwte.get(), gdwpe.get(), gdy.get(), gt.get(), B, Tn, C, V);
  CHECK(normalised_error(gout.download(), out) <= 1e-5);
  CHECK(normalised_error(gdwte.download(), dwte) <= 1e-5);
  CHECK(normalised_error(gdwpe.download(), dwpe) <= 1e-5);
#endif
}
