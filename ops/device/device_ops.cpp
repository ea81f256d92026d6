// The device ops: the CPU kernels of ops/layers/ or the CUDA kernels of ops/cuda/ on the context's
// stream, chosen here and nowhere else.
#include "ops/device/device_ops.hpp"

#include <string>
#include <type_traits>

#include "base/result.hpp"
#include "ops/device/device_memory.hpp"
#include "ops/kernels/reduce.hpp"
#include "ops/layers/activation.hpp"
#include "ops/layers/attention.hpp"
#include "ops/layers/cross_entropy.hpp"
#include "ops/layers/embedding.hpp"
#include "ops/layers/layernorm.hpp"
#include "ops/layers/linear.hpp"
#ifdef PIPEWORKS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/attention_flash_cuda.hpp"
#include "ops/cuda/attention_gemm_cuda.hpp"
#include "ops/cuda/cross_entropy_cuda.hpp"
#include "ops/cuda/elementwise_cuda.hpp"
#include "ops/cuda/embedding_cuda.hpp"
#include "ops/cuda/activation_cuda.hpp"
#include "ops/cuda/gpu_resources.hpp"
#include "ops/cuda/layernorm_cuda.hpp"
#include "ops/cuda/linear_cuda.hpp"
#include "ops/cuda/sgd_cuda.hpp"
#endif

namespace pipeworks {
namespace {

// The context's GPU resources when it is a GPU (and T is f32, the GPU's one type), made the
// thread's current device; else null.
template <class T>
gpu_resources* gpu_for(const device_context& d) {
  if (!d.on_gpu()) return nullptr;
  if constexpr (!std::is_same_v<T, float>)
    throw pipeworks_error(d.where().to_string() +
                          " runs f32 only: run this model in f32 there, or on the CPU");
#ifdef PIPEWORKS_HAVE_CUDA
  d.gpu()->make_current();
#endif
  return d.gpu();
}

#ifdef PIPEWORKS_HAVE_CUDA
// Runs `call` (the CUDA kernel) when d is a GPU and returns true; false on the CPU.
#define PW_ON_GPU(d, call)                          \
  if (gpu_resources* g = gpu_for<T>(d)) {           \
    if constexpr (std::is_same_v<T, float>) { call; } \
    (void)g;                                        \
    return;                                         \
  }
#else
#define PW_ON_GPU(d, call) (void)gpu_for<T>(d);
#endif

}  // namespace

template <class T>
void linear_forward(const device_context& d, T* out, const T* inp, const T* weight, const T* bias,
                    std::int64_t N, int C, int OC, weight_layout layout) {
  PW_ON_GPU(d, cuda::linear_forward(g->blas(), out, inp, weight, bias, N, C, OC, layout));
  linear_forward(out, inp, weight, bias, N, C, OC, layout);
}

template <class T>
void linear_backward(const device_context& d, T* dinp, T* dweight, T* dbias, const T* dout,
                     const T* inp, const T* weight, std::int64_t N, int C, int OC,
                     weight_layout layout, grad_into dinp_into) {
  if (dinp && dinp_into == grad_into::overwrite && d.on_gpu())
    zero_bytes(dinp, d.where(), sizeof(T) * std::size_t(N) * std::size_t(C), d.stream());
  PW_ON_GPU(d, cuda::linear_backward(g->blas(), dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                                     layout));
  linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, layout, dinp_into);
}

template <class T>
void layernorm_forward(const device_context& d, T* out, T* mean, T* rstd, const T* inp,
                       const T* weight, const T* bias, std::int64_t N, int C) {
  PW_ON_GPU(d, cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, g->stream()));
  layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

template <class T>
void layernorm_backward(const device_context& d, T* dinp, T* dweight, T* dbias, const T* dout,
                        const T* inp, const T* weight, const T* mean, const T* rstd,
                        std::int64_t N, int C) {
  PW_ON_GPU(d, cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                        g->stream()));
  layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

template <class T>
void gelu_forward(const device_context& d, T* out, const T* inp, std::int64_t n) {
  PW_ON_GPU(d, cuda::gelu_forward(out, inp, n, g->stream()));
  gelu_forward(out, inp, n);
}

template <class T>
void gelu_backward(const device_context& d, T* dinp, const T* dout, const T* inp, std::int64_t n,
                   grad_into into) {
  if (into == grad_into::overwrite && d.on_gpu())
    zero_bytes(dinp, d.where(), sizeof(T) * std::size_t(n), d.stream());
  PW_ON_GPU(d, cuda::gelu_backward(dinp, dout, inp, n, g->stream()));
  gelu_backward(dinp, dout, inp, n, into);
}

template <class T>
void linear_gelu_backward_input(const device_context& d, T* dpre, const T* dout, const T* weight,
                                const T* pre, std::int64_t N, int C, int OC, weight_layout layout) {
#ifdef PIPEWORKS_HAVE_CUDA
  if (gpu_resources* g = gpu_for<T>(d)) {
    if constexpr (std::is_same_v<T, float>)
      if (cuda::linear_backward_gelu(g->blas(), dpre, dout, weight, pre, N, C, OC, layout)) return;
  }
#endif
  tensor dgelu = d.output({N, C}, dtype_of<T>());  // the gradient of GELU's output
  linear_backward<T>(d, dgelu.data<T>(), nullptr, nullptr, dout, nullptr, weight, N, C, OC, layout,
                     grad_into::overwrite);
  gelu_backward(d, dpre, static_cast<const T*>(dgelu.data<T>()), pre, N * C, grad_into::overwrite);
}

template <class T>
void relu_forward(const device_context& d, T* out, const T* inp, std::int64_t n) {
  PW_ON_GPU(d, cuda::relu_forward(out, inp, n, g->stream()));
  relu_forward(out, inp, n);
}

template <class T>
void relu_backward(const device_context& d, T* dinp, const T* dout, const T* inp, std::int64_t n) {
  PW_ON_GPU(d, cuda::relu_backward(dinp, dout, inp, n, g->stream()));
  relu_backward(dinp, dout, inp, n);
}

namespace {
// Whether a GPU rank runs attention on the flash kernels: with TF32 (their products are TF32) and a
// head size they take.
bool flash_attention(const device_context& d, int B, int C, int NH) {
#ifdef PIPEWORKS_HAVE_CUDA
  return d.on_gpu() && d.gpu()->blas().tf32() && NH > 0 && C % NH == 0 &&
         cuda::flash_attention_supported(C / NH, static_cast<std::int64_t>(B) * NH);
#else
  (void)d, (void)B, (void)C, (void)NH;
  return false;
#endif
}
}  // namespace

shape_t attention_saved_shape(const device_context& d, int B, int Tn, int C, int NH) {
  if (flash_attention(d, B, C, NH)) return {B, NH, Tn};
  return {B, NH, Tn, Tn};
}

template <class T>
void attention_forward(const device_context& d, T* out, T* att, const T* qkv, int B, int Tn, int C,
                       int NH) {
  PW_ON_GPU(d, {
    if (flash_attention(d, B, C, NH))
      cuda::flash_attention_forward(g->stream(), out, att, qkv, B, Tn, C, NH);
    else
      cuda::attention_forward(g->blas(), out, att, qkv, B, Tn, C, NH);
  });
  attention_forward(out, att, qkv, B, Tn, C, NH);
}

template <class T>
void attention_backward(const device_context& d, T* dqkv, const T* dout, const T* out, const T* qkv,
                        const T* att, int B, int Tn, int C, int NH, grad_into into) {
  if (into == grad_into::overwrite && d.on_gpu())
    zero_bytes(dqkv, d.where(), sizeof(T) * std::size_t(B) * Tn * 3 * C, d.stream());
  PW_ON_GPU(d, {
    if (flash_attention(d, B, C, NH)) {
      tensor delta = d.uninitialized({B, NH, Tn}, dtype::f32);
      cuda::flash_attention_backward(g->stream(), dqkv, delta.data<float>(), dout, out, qkv, att,
                                     B, Tn, C, NH);
    } else {
      tensor scratch = d.uninitialized({B, NH, Tn, Tn}, dtype::f32);
      cuda::attention_backward(g->blas(), dqkv, scratch.data<float>(), dout, qkv, att, B, Tn, C,
                               NH);
    }
  });
  (void)out;
  attention_backward(dqkv, dout, qkv, att, B, Tn, C, NH, into);
}

template <class T>
T cross_entropy_forward(const device_context& d, T* probs, const T* logits, const tensor& targets,
                        std::int64_t N, int V) {
  if (gpu_resources* g = gpu_for<T>(d)) {
#ifdef PIPEWORKS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      const tensor here = targets.where() == d.where() ? tensor() : d.adopt(targets.clone());
      const tensor& t = here.empty() ? targets : here;
      tensor row_loss = d.uninitialized({N}, dtype::f32);
      return cuda::cross_entropy_forward(probs, row_loss.data<float>(), logits,
                                         t.data<std::int32_t>(), N, V, g->stream());
    }
#endif
    (void)g;
  }
  return cross_entropy_forward(probs, logits, targets.data<std::int32_t>(), N, V);
}

template <class T>
void cross_entropy_backward(const device_context& d, T* dlogits, const T* probs,
                            const tensor& targets, T dloss, std::int64_t N, int V) {
  PW_ON_GPU(d, {
    const tensor here = targets.where() == d.where() ? tensor() : d.adopt(targets.clone());
    const tensor& t = here.empty() ? targets : here;
    cuda::cross_entropy_backward(dlogits, probs, t.data<std::int32_t>(), dloss, N, V, g->stream());
  });
  cross_entropy_backward(dlogits, probs, targets.data<std::int32_t>(), dloss, N, V);
}

template <class T>
void embedding_forward(const device_context& d, T* out, const std::int32_t* tokens, const T* wte,
                       const T* wpe, int B, int Tn, int C) {
  PW_ON_GPU(d, cuda::embedding_forward(out, tokens, wte, wpe, B, Tn, C, g->stream()));
  embedding_forward(out, tokens, wte, wpe, B, Tn, C);
}

template <class T>
void embedding_backward(const device_context& d, T* dwte, T* dwpe, const T* dout,
                        const std::int32_t* tokens, int B, int Tn, int C, int V) {
  PW_ON_GPU(d, cuda::embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C, V, g->stream()));
  embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C);
}

std::int64_t first_outside(const device_context& d, const tensor& ids, std::int32_t limit,
                           std::int32_t* bad) {
  const tensor host = ids.where().kind == device_kind::cpu ? tensor() : d.to_host(ids);
  const std::int32_t* p = (host.empty() ? ids : host).data<std::int32_t>();
  for (std::int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= limit) {
      *bad = p[i];
      return i;
    }
  return -1;
}

template <class T>
void add(const device_context& d, T* out, const T* a, const T* b, std::int64_t n) {
  PW_ON_GPU(d, cuda::add(out, a, b, n, g->stream()));
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
void add_into(const device_context& d, T* dst, const T* src, std::int64_t n) {
  PW_ON_GPU(d, cuda::add_into(dst, src, n, g->stream()));
  for (std::int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <class T>
double sum_of_squares(const tensor& t, std::int64_t begin, std::int64_t n) {
  const T* x = t.data<T>() + begin;
  if (t.where().kind != device_kind::cpu) {
#ifdef PIPEWORKS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      PW_CUDA(cudaSetDevice(t.where().index));  // the kernel runs on t's GPU and stream
      return cuda::sum_of_squares(x, n, t.stream());
    }
#endif
    throw pipeworks_error(t.where().to_string() + " holds f32 only");
  }
  return squares<T>({x, static_cast<std::size_t>(n)});
}

template <class T>
void scale(tensor& t, T f) {
  if (t.where().kind != device_kind::cpu) {
#ifdef PIPEWORKS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      PW_CUDA(cudaSetDevice(t.where().index));  // the kernel runs on t's GPU and stream
      return cuda::scale(t.data<T>(), f, t.numel(), t.stream());
    }
#endif
    throw pipeworks_error(t.where().to_string() + " holds f32 only");
  }
  for (T& x : t.span<T>()) x *= f;
}

void zero(tensor& t) { zero_bytes(t.bytes(), t.where(), t.nbytes(), t.stream()); }

void gpu_optimizer_step(const optimizer_config& c, double lr, const tensor& w, const tensor& g,
                        tensor& w_out, std::int64_t begin, std::int64_t n, tensor& m, tensor& v,
                        std::int64_t t) {
#ifdef PIPEWORKS_HAVE_CUDA
  PW_CUDA(cudaSetDevice(w_out.where().index));  // the kernel runs on w_out's GPU and stream
  const auto count = static_cast<std::size_t>(n);
  float* out = w_out.data<float>() + begin;
  const float* wp = w.data<float>() + begin;
  const float* gp = g.data<float>() + begin;
  if (c.kind == optimizer_kind::adamw)
    cuda::adamw_update(out, wp, gp, m.data<float>(), v.data<float>(), count, t, lr, c.beta1,
                       c.beta2, c.eps, c.weight_decay, w_out.stream());
  else
    cuda::sgd_update(out, wp, gp, m.data<float>(), count, lr, c.momentum, c.weight_decay,
                     w_out.stream());
#else
  (void)c, (void)lr, (void)g, (void)w_out, (void)begin, (void)n, (void)m, (void)v, (void)t;
  throw pipeworks_error(w.where().to_string() + " cannot be updated: this pipeworks was built "
                        "without CUDA");
#endif
}

#define PW_INSTANTIATE(T)                                                                        \
  template void linear_forward<T>(const device_context&, T*, const T*, const T*, const T*,       \
                                  std::int64_t, int, int, weight_layout);                        \
  template void linear_backward<T>(const device_context&, T*, T*, T*, const T*, const T*,        \
                                   const T*, std::int64_t, int, int, weight_layout, grad_into);  \
  template void layernorm_forward<T>(const device_context&, T*, T*, T*, const T*, const T*,      \
                                     const T*, std::int64_t, int);                               \
  template void layernorm_backward<T>(const device_context&, T*, T*, T*, const T*, const T*,     \
                                      const T*, const T*, const T*, std::int64_t, int);          \
  template void gelu_forward<T>(const device_context&, T*, const T*, std::int64_t);              \
  template void gelu_backward<T>(const device_context&, T*, const T*, const T*, std::int64_t,     \
                                 grad_into);                                                     \
  template void linear_gelu_backward_input<T>(const device_context&, T*, const T*, const T*,     \
                                              const T*, std::int64_t, int, int, weight_layout);  \
  template void relu_forward<T>(const device_context&, T*, const T*, std::int64_t);              \
  template void relu_backward<T>(const device_context&, T*, const T*, const T*, std::int64_t);   \
  template void attention_forward<T>(const device_context&, T*, T*, const T*, int, int, int, int); \
  template void attention_backward<T>(const device_context&, T*, const T*, const T*, const T*,   \
                                      const T*, int, int, int, int, grad_into);                  \
  template T cross_entropy_forward<T>(const device_context&, T*, const T*, const tensor&,        \
                                      std::int64_t, int);                                        \
  template void cross_entropy_backward<T>(const device_context&, T*, const T*, const tensor&, T, \
                                          std::int64_t, int);                                    \
  template void embedding_forward<T>(const device_context&, T*, const std::int32_t*, const T*,   \
                                     const T*, int, int, int);                                   \
  template void embedding_backward<T>(const device_context&, T*, T*, const T*,                   \
                                      const std::int32_t*, int, int, int, int);                  \
  template void add<T>(const device_context&, T*, const T*, const T*, std::int64_t);             \
  template void add_into<T>(const device_context&, T*, const T*, std::int64_t);                  \
  template double sum_of_squares<T>(const tensor&, std::int64_t, std::int64_t);               \
  template void scale<T>(tensor&, T);
PW_INSTANTIATE(float)
PW_INSTANTIATE(double)

}  // namespace pipeworks
