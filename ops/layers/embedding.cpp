// Token plus position embedding; the backward scatters into wte split by channels, so no two
// tasks ever add into the same row element.
#include "ops/layers/embedding.hpp"

#include "ops/kernels/parallel.hpp"

namespace pipeworks {
namespace {

constexpr std::int64_t elements_grain = 1 << 13;

}  // namespace

// B = batch, T = sequence length, C = channels.
template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B,
                       int Tn, int C) {
  parallel_for(std::int64_t(B) * Tn, std::max(1, int(elements_grain / C)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t bt = lo; bt < hi; bt++) {
                   const T* te = wte + std::int64_t(tokens[bt]) * C;
                   const T* pe = wpe + (bt % Tn) * C;
                   T* o = out + bt * C;
                   for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
                 }
               });
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn,
                        int C) {
  const std::int64_t BT = std::int64_t(B) * Tn;
  // dwte: each task owns a slice of channels and walks every position
  const std::int64_t channel_grain = std::max<std::int64_t>(16, elements_grain / BT);
  parallel_for(C, channel_grain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t bt = 0; bt < BT; bt++) {
      T* d = dwte + std::int64_t(tokens[bt]) * C;
      const T* g = dout + bt * C;
      for (std::int64_t i = lo; i < hi; i++) d[i] += g[i];
    }
  });
  // dwpe: each task owns some positions and sums over the batch
  parallel_for(Tn, std::max<std::int64_t>(1, elements_grain / (std::int64_t(B) * C)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t t = lo; t < hi; t++)
                   for (int b = 0; b < B; b++) {
                     const T* g = dout + (std::int64_t(b) * Tn + t) * C;
                     for (int i = 0; i < C; i++) dwpe[t * C + i] += g[i];
                   }
               });
}

// Counted: one add per output element. Saved: the token ids (4 bytes each).
layer_cost embedding_cost(int Tn, int V, int maxT, int C, int elem_bytes) {
  layer_cost c;
  c.param_bytes = (std::int64_t(V) + maxT) * C * elem_bytes;
  c.saved_bytes_per_sample = std::int64_t(Tn) * sizeof(std::int32_t);
  c.output_bytes_per_sample = std::int64_t(Tn) * C * elem_bytes;
  c.flops_per_sample = std::int64_t(Tn) * C;
  return c;
}

#define PIPEWORKS_EMBEDDING(T)                                                                    \
  template void embedding_forward<T>(T*, const std::int32_t*, const T*, const T*, int, int, int); \
  template void embedding_backward<T>(T*, T*, const T*, const std::int32_t*, int, int, int);
PIPEWORKS_EMBEDDING(float)
PIPEWORKS_EMBEDDING(double)
#undef PIPEWORKS_EMBEDDING

}  // namespace pipeworks
