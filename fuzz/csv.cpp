// Fuzz target: the CSV schedule reader (parse_csv, PyTorch's _dump_csv format).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pipeworks::parse_csv(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
