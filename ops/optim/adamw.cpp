// AdamW with decoupled weight decay and bias correction, in the order torch.optim.AdamW uses.
// The loop is written with std::experimental::simd: plain std::sqrt keeps GCC from vectorizing
// (errno handling) unless the whole build uses -fno-math-errno. Every element, the ragged end
// included, goes through the same vector code, so chunking never changes a result.
#include <algorithm>
#include <cmath>
#include <experimental/simd>

#include "ops/optim/adamw_coeffs.hpp"
#include "ops/optim/optimizer.hpp"
#include "ops/optim/parallel_for.hpp"

namespace pipeworks {
namespace {

namespace stdx = std::experimental;

// One SIMD vector of elements.
template <class V, class T>
void adamw_lane(V& w, V& m, V& v, const V& g, const adamw_coeffs<T>& c) {
  m = c.b1 * m + c.one_b1 * g;
  v = c.b2 * v + c.one_b2 * g * g;
  const V denom = stdx::sqrt(v) / c.bc2_sqrt + c.eps;
  w = w * c.decay - c.step_size * (m / denom);
}

template <class T>
void adamw_range(T* out, const T* wp, const T* gp, T* mp, T* vp, std::size_t b, std::size_t e,
                 const adamw_coeffs<T>& c) {
  using V = stdx::native_simd<T>;
  constexpr std::size_t L = V::size();
  std::size_t i = b;
  for (; i + L <= e; i += L) {
    V w(wp + i, stdx::element_aligned), g(gp + i, stdx::element_aligned);
    V m(mp + i, stdx::element_aligned), v(vp + i, stdx::element_aligned);
    adamw_lane<V, T>(w, m, v, g, c);
    m.copy_to(mp + i, stdx::element_aligned);
    v.copy_to(vp + i, stdx::element_aligned);
    w.copy_to(out + i, stdx::element_aligned);
  }
  if (i < e) {
    // The ragged end goes through the same vector code, zero-padded, so that every element sees
    // identical operations (a scalar loop may be contracted into FMAs differently).
    const std::size_t r = e - i;
    T tw[L] = {}, tg[L] = {}, tm[L] = {}, tv[L] = {};
    std::copy_n(wp + i, r, tw);
    std::copy_n(gp + i, r, tg);
    std::copy_n(mp + i, r, tm);
    std::copy_n(vp + i, r, tv);
    V w(tw, stdx::element_aligned), g(tg, stdx::element_aligned);
    V m(tm, stdx::element_aligned), v(tv, stdx::element_aligned);
    adamw_lane<V, T>(w, m, v, g, c);
    m.copy_to(tm, stdx::element_aligned);
    v.copy_to(tv, stdx::element_aligned);
    w.copy_to(tw, stdx::element_aligned);
    std::copy_n(tm, r, mp + i);
    std::copy_n(tv, r, vp + i);
    std::copy_n(tw, r, out + i);
  }
}

}  // namespace

template <class T>
void adamw_update(std::span<T> w_out, std::span<const T> w, std::span<const T> g,
                  std::span<T> m, std::span<T> v, std::int64_t t, double lr, double beta1,
                  double beta2, double eps, double weight_decay) {
  const adamw_coeffs<T> c = adamw_coefficients<T>(t, lr, beta1, beta2, eps, weight_decay);
  T* out = w_out.data();
  const T* wp = w.data();
  const T* gp = g.data();
  T* mp = m.data();
  T* vp = v.data();
  optim_detail::for_chunks(w.size(), [&](std::size_t b, std::size_t e) {
    adamw_range(out, wp, gp, mp, vp, b, e, c);
  });
}

template void adamw_update<float>(std::span<float>, std::span<const float>,
                                  std::span<const float>, std::span<float>, std::span<float>,
                                  std::int64_t, double, double, double, double, double);
template void adamw_update<double>(std::span<double>, std::span<const double>,
                                   std::span<const double>, std::span<double>, std::span<double>,
                                   std::int64_t, double, double, double, double, double);

}  // namespace pipeworks
