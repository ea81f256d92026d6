// Durable, atomic file replacement for checkpoints: write to a hidden temporary file beside the
// target while hashing the bytes, fsync, rename over the target, fsync the directory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/result.hpp"

namespace pipeworks {

// What was written: the file's size and the SHA-256 of its bytes (64 lowercase hex digits).
struct written_file {
  std::uint64_t bytes = 0;
  std::string sha256;
};

// Writes the parts, in order and straight from the caller's memory, to ".NAME.tmp.PID.N" in
// path's directory, hashing them as they are written; fsyncs and closes it, renames it over path
// and fsyncs the directory, so a reader sees the old file or the whole new one. A large file
// streams to disk as it is written, and every file leaves the page cache once it is durable, so a
// checkpoint neither evicts the trainer's memory nor makes the kernel find fresh pages each time. Refuses, writing nothing, when path exists and
// is a symbolic link or not a regular file. On failure the temporary file is removed and the
// error names the path and the OS's reason.
result<written_file> write_file_atomic(const std::string& path,
                                       std::span<const std::span<const std::byte>> parts);

// fsyncs a directory, making the creation, renaming or removal of its entries durable.
status fsync_directory(const std::string& dir);

}  // namespace pipeworks
