// Byte-level text for GPT training: a corpus from a file or a directory, a train/validation split,
// random context windows deterministic from (seed, step), and the fixed evaluation windows.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

inline constexpr const char* fortunes_default_dir = "/usr/share/games/fortunes";

struct text_corpus {
  std::vector<std::uint8_t> bytes;
  std::vector<std::string> sources;  // the files read, in order
  std::span<const std::uint8_t> view() const { return bytes; }
};

// A regular file is read whole. A directory contributes its regular files (not symlinks, not
// subdirectories) in sorted name order, skipping fortune's *.dat index files and *.u8 links.
// A missing path is an error naming it (and the Debian package fortunes for its directory).
result<text_corpus> load_text(const std::string& path);

struct text_split {
  std::span<const std::uint8_t> train;       // the first bytes
  std::span<const std::uint8_t> validation;  // the last round(fraction * size) bytes
};
// fraction in [0, 1).
text_split split_text(std::span<const std::uint8_t> text, double validation_fraction = 0.05);

struct token_batch {
  tensor inputs;   // (B, T) i32: bytes [s, s+T) of each window
  tensor targets;  // (B, T) i32: bytes [s+1, s+T+1)
};

// B windows of T+1 bytes at uniformly random starts, drawn from rng::for_stream(seed, step).
// An error when the text is shorter than T+1 bytes.
result<token_batch> random_windows(std::span<const std::uint8_t> text, std::int64_t batch,
                                   std::int64_t context, std::uint64_t seed, std::uint64_t step);

// The first count non-overlapping windows of T+1 bytes from offset 0: window i starts at i*(T+1).
// An error, naming source, when the text is too short.
result<token_batch> eval_windows(std::span<const std::uint8_t> text, std::int64_t count,
                                 std::int64_t context, const std::string& source = "text");

}  // namespace pipeworks
