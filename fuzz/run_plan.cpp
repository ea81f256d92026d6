// Fuzz target: the run plan reader (parse_run_plan, which also checks the plan it read).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/run_plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)pipeworks::parse_run_plan(text, "plan.json");
  return 0;
}
