// Branch-free exp and tanh for float that the compiler can vectorise (-O3 -march=native),
// with double overloads that call the exact libm functions so gradient checks stay exact.
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

// tanh(x), absolute error below 3e-7: Eigen's 13/6 rational approximation on [-7.9, 7.9],
// where float tanh rounds to +-1.
inline float tanh_approx(float x) {
  constexpr float limit = 7.90531110763549805f;
  const std::int32_t abs_bits =
      std::min(std::bit_cast<std::int32_t>(x) & 0x7fffffff, std::bit_cast<std::int32_t>(limit));
  const float xc = std::copysign(std::bit_cast<float>(abs_bits), x);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p * xc / q;
}

// The kernels call these: fast in float, exact in double.
inline float fast_exp(float x) { return exp_approx(x); }
inline double fast_exp(double x) { return std::exp(x); }
inline float fast_tanh(float x) { return tanh_approx(x); }
inline double fast_tanh(double x) { return std::tanh(x); }

}  // namespace pipeworks
