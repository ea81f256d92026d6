// Durable, atomic file replacement for every output (checkpoints, weights, traces, plans): write
// to an unnamed temporary file beside the target while hashing the bytes, fsync, rename over it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace pipeworks {

// What was written: the file's size and the SHA-256 of its bytes (64 lowercase hex digits).
struct written_file {
  std::uint64_t bytes = 0;
  std::string sha256;
};

// Whether path may be written as an output: it does not exist yet, or is a regular file. A
// symbolic link (never replaced: the file it names would silently stay as it was), a device such
// as /dev/null, a named pipe, a socket or a directory is refused with an error saying what it is.
status check_output_target(const std::string& path);

// Writes the parts, in order and straight from the caller's memory, to an unnamed temporary file
// in path's directory (O_TMPFILE; where the file system has none, to ".NAME.tmp.HOST.PID.N"),
// hashing them as they are written; fsyncs it, gives it the name ".NAME.tmp.HOST.PID.N", renames
// that over path and fsyncs the directory, so a reader sees the old file or the whole new one and
// a process killed while writing leaves nothing behind. Temporaries of path left by processes of
// this host that no longer run are removed first. A large file streams to disk as it is written,
// and every file leaves the page cache once it is durable, so a checkpoint neither evicts the
// trainer's memory nor makes the kernel find fresh pages each time. Refuses, writing nothing,
// what check_output_target refuses. On failure nothing is left and the error names the path and
// the OS's reason.
result<written_file> write_file_atomic(const std::string& path,
                                       std::span<const std::span<const std::byte>> parts);

// write_file_atomic of one piece of text.
status write_text_atomic(const std::string& path, std::string_view text);

// Whether files can be created in dir: an unnamed file where the file system allows (which
// nothing can leave behind), else a probe file removed at once. Root passes access(W_OK) where a
// write would still fail (a read-only mount), so this tries. The error names dir and the reason.
status probe_writable_dir(const std::string& dir);

// fsyncs a directory, making the creation, renaming or removal of its entries durable.
status fsync_directory(const std::string& dir);

}  // namespace pipeworks
