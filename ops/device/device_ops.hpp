// The ops a block calls, declared once for every device: each takes the rank's device_context
// and runs the CPU kernel (ops/layers/) or the CUDA one (ops/cuda/) on the context's stream, so
// blocks never branch on the device. Pointers are the device's; contracts as in ops/layers/.
// A GPU runs f32 only: f64 there is refused by name.
#pragma once
#include <cstdint>

#include "ops/device/device_context.hpp"
#include "ops/layers/linear.hpp"
#include "ops/optim/optimizer.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

template <class T>
void linear_forward(const device_context& d, T* out, const T* inp, const T* weight, const T* bias,
                    std::int64_t N, int C, int OC, weight_layout layout);
// dinp_into: as the CPU kernel; a GPU's kernels add, so there overwrite zeroes dinp first.
template <class T>
void linear_backward(const device_context& d, T* dinp, T* dweight, T* dbias, const T* dout,
                     const T* inp, const T* weight, std::int64_t N, int C, int OC,
                     weight_layout layout, grad_into dinp_into = grad_into::accumulate);

template <class T>
void layernorm_forward(const device_context& d, T* out, T* mean, T* rstd, const T* inp,
                       const T* weight, const T* bias, std::int64_t N, int C);
template <class T>
void layernorm_backward(const device_context& d, T* dinp, T* dweight, T* dbias, const T* dout,
                        const T* inp, const T* weight, const T* mean, const T* rstd,
                        std::int64_t N, int C);

template <class T> void gelu_forward(const device_context& d, T* out, const T* inp, std::int64_t n);
template <class T>
void gelu_backward(const device_context& d, T* dinp, const T* dout, const T* inp, std::int64_t n,
                   grad_into into = grad_into::accumulate);
// dpre (N, C) = GELU'(pre) ⊙ (dout (N, OC) · Wᵀ), written whole: the input gradient of a linear
// layer whose input was GELU(pre), taken back through the GELU. On a GPU one GEMM with GELU's
// derivative in its epilogue (cuBLASLt's DGELU) where cuBLASLt has one for the shape; else, and on
// the CPU, linear_backward then gelu_backward (the CPU's bits are theirs).
template <class T>
void linear_gelu_backward_input(const device_context& d, T* dpre, const T* dout, const T* weight,
                                const T* pre, std::int64_t N, int C, int OC, weight_layout layout);
template <class T> void relu_forward(const device_context& d, T* out, const T* inp, std::int64_t n);
template <class T>
void relu_backward(const device_context& d, T* dinp, const T* dout, const T* inp, std::int64_t n);

// What attention_forward saves for backward (`att`): on the CPU, and on a GPU in strict fp32, the
// probabilities (B, NH, T, T); on a GPU with TF32, where the flash kernels take the head size (and
// B x NH is at most 65535), each query row's logsumexp (B, NH, T): no T x T matrix.
shape_t attention_saved_shape(const device_context& d, int B, int Tn, int C, int NH);
template <class T>
void attention_forward(const device_context& d, T* out, T* att, const T* qkv, int B, int Tn, int C,
                       int NH);
// out: attention_forward's output (the flash kernels read it; the others do not).
template <class T>
void attention_backward(const device_context& d, T* dqkv, const T* dout, const T* out, const T* qkv,
                        const T* att, int B, int Tn, int C, int NH,
                        grad_into into = grad_into::accumulate);

// targets: i32 (N) on any device (copied here when elsewhere). Returns the mean loss (on a GPU
// it waits for the stream). A target outside [0, V) throws, naming it.
template <class T>
T cross_entropy_forward(const device_context& d, T* probs, const T* logits, const tensor& targets,
                        std::int64_t N, int V);
template <class T>
void cross_entropy_backward(const device_context& d, T* dlogits, const T* probs,
                            const tensor& targets, T dloss, std::int64_t N, int V);

// tokens: i32 (B, T) on this device.
template <class T>
void embedding_forward(const device_context& d, T* out, const std::int32_t* tokens, const T* wte,
                       const T* wpe, int B, int Tn, int C);
template <class T>
void embedding_backward(const device_context& d, T* dwte, T* dwpe, const T* dout,
                        const std::int32_t* tokens, int B, int Tn, int C, int V);
// The position of the first id of `ids` (i32, on any device) outside [0, limit), its value in
// *bad; -1 when every id is inside.
std::int64_t first_outside(const device_context& d, const tensor& ids, std::int32_t limit,
                           std::int32_t* bad);

// out (n) = a + b; dst (n) += src.
template <class T> void add(const device_context& d, T* out, const T* a, const T* b, std::int64_t n);
template <class T> void add_into(const device_context& d, T* dst, const T* src, std::int64_t n);

// On a tensor's own device and stream (a param_set's arena, say):
// the sum of squares of elements [begin, begin + n) in double, the same value on every run (on a
// GPU it waits for the stream); t *= f; t = 0.
template <class T> double sum_of_squares(const tensor& t, std::int64_t begin, std::int64_t n);
template <class T> void scale(tensor& t, T f);
void zero(tensor& t);
// One optimizer update of elements [begin, begin + n) of f32 arenas on a GPU: w_out from w and g,
// with that tensor's moments m and v (n elements each on the same GPU; v unused by SGD); t is
// this update's step, from 1. The same formulas as the CPU's optimizer_step.
void gpu_optimizer_step(const optimizer_config& c, double lr, const tensor& w, const tensor& g,
                        tensor& w_out, std::int64_t begin, std::int64_t n, tensor& m, tensor& v,
                        std::int64_t t);

}  // namespace pipeworks
