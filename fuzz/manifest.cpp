// Fuzz target: the checkpoint manifest.json reader (parse_manifest).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/checkpoint/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)pipeworks::parse_manifest(text, "manifest.json");
  return 0;
}
