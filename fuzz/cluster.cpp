// Fuzz target: the cluster.json reader (parse_cluster).
#include <cstddef>
#include <cstdint>
#include <string>

#include "partition/cluster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pipeworks::parse_cluster(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
