// Fuzz target: the costs.json reader (parse_cost_model).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/cost_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pipeworks::parse_cost_model(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
