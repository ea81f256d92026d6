// Reader for IDX files of unsigned bytes (the MNIST format), gzip-compressed or plain, via zlib.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

struct idx_array {
  std::vector<std::int64_t> dims;  // from the header, outermost first
  std::vector<std::uint8_t> values;  // row-major, product(dims) bytes
};

// Reads an IDX file of ubyte data (magic 0x000008NN, NN = rank) with the expected rank.
// Errors name the path; a missing file also names missing_hint (e.g. "install the Debian
// package dataset-fashion-mnist") when it is not empty.
result<idx_array> read_idx_ubyte(const std::string& path, int expected_rank,
                                 const std::string& missing_hint = "");

}  // namespace pipeworks
