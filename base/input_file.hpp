// Reading an input file a user or peer names: a regular file only (a named pipe blocks the open,
// /dev/zero never ends), and text such as JSON within a bound; else refused by name.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/result.hpp"

namespace pipeworks {

// What a file of this mode is, for messages: "a named pipe", "a device", "a directory",
// "a socket", or "not a regular file".
const char* file_kind(mode_t mode);

// The bound for a JSON input (a plan, a profile, a cluster, costs, a model, a manifest).
inline constexpr std::uint64_t json_input_limit = std::uint64_t{64} << 20;

// An error unless path is (or links to) a regular file: "cannot open <what> '<path>' (<reason>)",
// or "<what> '<path>' is a named pipe (a device, a directory, a socket), not a regular file".
status check_input_file(const std::string& path, const std::string& what);

// The whole file, after check_input_file, refusing one of more than max_bytes by name.
result<std::string> read_input_text(const std::string& path, std::uint64_t max_bytes,
                                    const std::string& what);

}  // namespace pipeworks
