// Branch-free exp for float that the compiler can vectorise (-O3 -march=native),
// with a double overload that calls libm's so gradient checks stay exact.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace pipeworks {

// e^x for finite x, relative error below 1e-7; 0 below about -87.5, inf above about 88.7.
// Cephes expf: x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r, 2^n by bits.
inline float exp_approx(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  // The clamp works on integers: float compares before arithmetic stop gcc vectorising.
  std::int32_t i = static_cast<std::int32_t>(n);
  i = std::min(std::max(i, -127), 128);  // -127 gives 0.0f, 128 gives inf
  return e * std::bit_cast<float>((i + 127) << 23);
}

// The kernels call this: fast in float, exact in double.
inline float fast_exp(float x) { return exp_approx(x); }
inline double fast_exp(double x) { return std::exp(x); }

}  // namespace pipeworks
