// Fuzz target: the safetensors reader (parse_safetensors over the bytes in memory), then a copy
// of every tensor it accepted (safetensors_file::get).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/checkpoint/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  auto file = pipeworks::parse_safetensors(std::vector<std::byte>(bytes, bytes + size), "fuzz");
  if (!file) return 0;
  for (const pipeworks::safetensors_info& t : file->tensors) (void)file->get(t.name);
  return 0;
}
