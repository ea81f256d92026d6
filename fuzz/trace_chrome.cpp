// Fuzz target: the Chrome trace reader behind `trace html` (parse_chrome_trace), and the explorer's
// page data for what it reads (a trace that reads must page or be refused, never crash).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/explorer.hpp"
#include "runtime/trace_chrome_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto t = pipeworks::parse_chrome_trace(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (t) (void)pipeworks::explorer_json(*t);
  return 0;
}
