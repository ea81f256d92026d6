// Fuzz target: the action-text reader (parse_action, and parse_program over a whole line).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/action.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)pipeworks::parse_action(text);
  (void)pipeworks::parse_program(text);
  return 0;
}
