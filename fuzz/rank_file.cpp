// Fuzz target: a rank's checkpoint file: parse_safetensors, then parse_rank_file, which reads the
// "pipeworks.rank_state" metadata JSON and every tensor it names against the model's layout.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/rank_layout.hpp"
#include "runtime/checkpoint/rank_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pipeworks::fuzz::rank_layout l;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  auto file = pipeworks::parse_safetensors(std::vector<std::byte>(bytes, bytes + size), "fuzz");
  if (file) (void)pipeworks::parse_rank_file(*file, l.m, l.boundaries);
  return 0;
}
