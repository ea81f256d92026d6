// Fuzz target: the profile.json reader (parse_profile).
#include <cstddef>
#include <cstdint>
#include <string>

#include "partition/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pipeworks::parse_profile(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
