// What a checkpoint records of the data its run read (--data): the absolute path and a fingerprint
// (size, modification time, sha256), so that a resume on other data is found and named.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/result.hpp"

namespace pipeworks {

// A file, or a directory's files (every regular file directly in it, symbolic links to files
// followed: the loaders read no subdirectory).
struct data_fingerprint {
  std::string path;            // absolute and lexically normal
  std::uint64_t bytes = 0;     // the file's size, or the sum of the directory's files'
  std::int64_t mtime_ns = 0;   // its modification time, or the newest of the directory's files'
  std::uint64_t files = 0;     // 1 for a file
  // A file: the sha256 of its bytes (what sha256sum prints). A directory: the sha256 of one line
  // "NAME\0SIZE\0SHA256\n" per file, by name.
  std::string sha256;
  bool operator==(const data_fingerprint&) const = default;
};

// The data as a checkpoint records it: the fingerprint of what this run read and, when a run was
// resumed on other data (--resume-on-other-data), the fingerprint it replaced and the step at
// which it did (kept by later resumes on the same data).
struct data_record {
  data_fingerprint fingerprint;
  std::optional<data_fingerprint> replaced;
  std::int64_t replaced_at = 0;  // the step of the checkpoint resumed on other data
  bool operator==(const data_record&) const = default;
};

// The fingerprint of `path` as it is now. Cached per process by absolute path and checked against
// each file's size, modification time and inode, so a second call hashes nothing unless the data
// changed. Errors name the path.
result<data_fingerprint> fingerprint_data(const std::string& path);

// What differs between the data a checkpoint recorded and the data now, one clause each ("its
// path is /b/txt, the checkpoint's was /a/txt", "its size is 10 bytes, was 12", "its sha256 is
// ..., was ..."); empty when it is the same data. Paths are the same when they resolve to the same
// file. A modification time that alone changed is no difference: the bytes are the same, and so
// is the run.
std::string data_changes(const data_fingerprint& recorded, const data_fingerprint& now);

// JSON: {"path", "bytes", "mtime_ns", "files", "sha256"[, "replaced": {... "step"}]}.
nlohmann::ordered_json record_json(const data_record& r);
// Refuses unknown and missing fields and wrong types; messages are "<prefix><where>.<key> ...".
result<data_record> parse_record(const nlohmann::json& j, const std::string& prefix,
                                 const std::string& where);

// The record a run's manifests carry, set when the run starts (prepare_checkpoints) for its
// checkpoint directory, and read by manifest_of for each checkpoint it writes: the data as the run
// read it at its start, and what it replaced. nullopt when none was set for that directory.
void set_run_data(const std::string& checkpoint_dir, std::optional<data_record> r);
std::optional<data_record> run_data(const std::string& checkpoint_dir);

}  // namespace pipeworks
