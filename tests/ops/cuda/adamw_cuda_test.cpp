// The AdamW kernel against the CPU's adamw_update over a flat arena, several steps, by normalised
// error (<= 1e-5 in fp32). Needs a GPU: skips, saying so, where there is none or no CUDA build.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "ops/device/device.hpp"
#include "ops/optim/optimizer.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#endif

using namespace pipeworks;

namespace {

double normalised_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST_CASE("the CUDA AdamW kernel matches the CPU update", "[cuda]") {
  const gpu_census gpus = find_gpus();
  if (gpus.count == 0) {
    WARN("skipped: " << gpus.why);
    return;
  }
#ifdef PIPEWORKS_HAVE_CUDA
  const std::size_t n = 1000003;  // not a multiple of the block size
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> w(n), m(n, 0.f), v(n, 0.f), g(n);
  for (float& x : w) x = dist(rng);
  std::vector<float> cw = w, cm = m, cv = v;
  float *dw = nullptr, *dg = nullptr, *dm = nullptr, *dv = nullptr;
  PW_CUDA(cudaMalloc(&dw, n * 4));
  PW_CUDA(cudaMalloc(&dg, n * 4));
  PW_CUDA(cudaMalloc(&dm, n * 4));
  PW_CUDA(cudaMalloc(&dv, n * 4));
  PW_CUDA(cudaMemcpy(dw, w.data(), n * 4, cudaMemcpyHostToDevice));
  PW_CUDA(cudaMemcpy(dm, m.data(), n * 4, cudaMemcpyHostToDevice));
  PW_CUDA(cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice));
  for (std::int64_t t = 1; t <= 5; ++t) {
    for (float& x : g) x = dist(rng);
    PW_CUDA(cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice));
    cuda::adamw_update(dw, dw, dg, dm, dv, n, t, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    adamw_update<float>(cw, cw, g, cm, cv, t, 1e-3, 0.9, 0.999, 1e-8, 0.01);
  }
  PW_CUDA(cudaMemcpy(w.data(), dw, n * 4, cudaMemcpyDeviceToHost));
  PW_CUDA(cudaMemcpy(m.data(), dm, n * 4, cudaMemcpyDeviceToHost));
  PW_CUDA(cudaMemcpy(v.data(), dv, n * 4, cudaMemcpyDeviceToHost));
  for (float* p : {dw, dg, dm, dv}) PW_CUDA(cudaFree(p));
  CHECK(normalised_error(w, cw) <= 1e-5);
  CHECK(normalised_error(m, cm) <= 1e-5);
  CHECK(normalised_error(v, cv) <= 1e-5);
#endif
}
