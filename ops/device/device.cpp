// parse_device, named devices, device::to_string and the names of a GPU's kinds of matrix
// products.
#include "ops/device/device.hpp"

#include <charconv>

namespace pipeworks {

result<device> parse_device(std::string_view text) {
  if (text == "cpu") return device{device_kind::cpu, 0};
  if (text == "cuda") return device{device_kind::cuda, 0};
  constexpr std::string_view prefix = "cuda:";
  if (text.substr(0, prefix.size()) == prefix && text.size() > prefix.size() && text.size() <= prefix.size() + 4) {
    const std::string_view digits = text.substr(prefix.size());
    int n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc{} && end == digits.data() + digits.size() && n >= 0)
      return device{device_kind::cuda, n};
  }
  return make_error("device \"" + std::string(text.substr(0, 40)) +
                    "\" is not one of cpu, cuda, cuda:N (N: a GPU's number, from 0)");
}

result<named_device> parse_named_device(std::string_view text) {
  auto d = parse_device(text);
  if (!d) return d.err();
  named_device n;
  n.where = *d;
  n.numbered = text.substr(0, 5) == "cuda:";
  return n;
}

named_device::named_device(const char* text) : named_device(parse_named_device(text).value()) {}

std::string named_device::to_string() const {
  return where.kind == device_kind::cuda && !numbered ? "cuda" : where.to_string();
}

std::string device::to_string() const {
  return kind == device_kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

gpu_math gpu_math_of(bool tf32, bool bf16) {
  return bf16 ? gpu_math::bf16 : tf32 ? gpu_math::tf32 : gpu_math::fp32;
}

const char* to_string(gpu_math m) {
  return m == gpu_math::bf16 ? "bf16" : m == gpu_math::tf32 ? "TF32" : "fp32";
}

}  // namespace pipeworks
