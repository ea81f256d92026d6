// A checkpoint's manifest.json: the step, the run plan, the data position, RNG states, metrics, the
// data the run read, each rank's file with its size and sha256, and the sha256 of its own content.
// Written last, so its presence marks the checkpoint complete; parsed strictly, and checked
// against the files it lists.
#pragma once
#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "runtime/checkpoint/data_fingerprint.hpp"

namespace pipeworks {

// One rank's state file.
struct checkpoint_file {
  int rank = 0;
  std::string path;  // a file name in its directory ("rank-0.safetensors")
  std::uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
  // Where a worker with a checkpoint directory of its own (local to its host) wrote it: that
  // host, as the driver addressed the worker, and the absolute directory there. Both "" when the
  // file is in the manifest's step directory.
  std::string host;
  std::string dir;
};

struct checkpoint_manifest {
  int format_version = 2;          // "format": "pipeworks-checkpoint", "version": 2 in JSON
  std::int64_t step = 0;           // optimizer steps done
  nlohmann::json plan;             // the run plan (an object; opaque here)
  std::int64_t data_position = 0;  // the step index of the next minibatch the data stream gives
  nlohmann::json rng;              // the RNG states (an object; opaque here)
  nlohmann::json metrics;          // e.g. samples seen, elapsed seconds (an object; opaque here)
  // The data the run read (--data); nullopt when the program supplied it (data.source callback).
  std::optional<data_record> data;
  // What `checkpoint reshard --restart-pipeline` dropped from an asynchronous schedule's checkpoint
  // (an object; opaque here); null for every other checkpoint.
  nlohmann::json restart;
  std::vector<checkpoint_file> files;  // one per rank, ranks 0..n-1 each exactly once
};

inline constexpr const char* checkpoint_format = "pipeworks-checkpoint";
// 2: the manifest carries "data" and "manifest_sha256"; version 1 (before them) is refused,
// naming its version.
inline constexpr int checkpoint_format_version = 2;

// The manifest as pretty-printed JSON, fields in a fixed order:
// {"format", "version", "step", "data_position", "plan", "rng", "metrics"[, "data"][, "restart"],
// "files":
// [{"rank", "path", "bytes", "sha256"[, "host", "dir"]}, ...], "manifest_sha256"}.
// manifest_sha256 is the sha256 of the same text without that last field (manifest_digest).
std::string to_json(const checkpoint_manifest& m);
// The sha256 of the manifest's content: of to_json's text without its manifest_sha256 field.
std::string manifest_digest(const checkpoint_manifest& m);

// Rank `rank`'s file, wherever the manifest lists it (its list may be in any order: each rank
// once, check_ranks). Throws pipeworks_error when it lists none.
const checkpoint_file& file_of_rank(const checkpoint_manifest& m, int rank);

// Refuses unknown and missing fields, wrong types, another format or version, duplicate or
// missing ranks, file paths that are not plain names in the step directory and sha256 values that
// are not 64 hex digits (upper case is read as lower case). Every message starts with `source`
// (the file) and names the field: "<source>: files[2].sha256 must be 64 hexadecimal digits".
// Last, the content's sha256 against manifest_sha256: a manifest edited by hand or damaged in a
// way that still parses is refused saying so.
result<checkpoint_manifest> parse_manifest(std::string_view text, const std::string& source);

// The directory that holds the file: its own (on file.host) or else the manifest's step_dir.
std::string file_dir(const checkpoint_file& file, const std::string& step_dir);

// Checks that file_dir(file, step_dir)/<file.path> is a regular file of the recorded size and
// sha256; the error names the file and the field that differs (and, for a file missing from a
// directory local to another host, that host and what to do).
status verify_file(const checkpoint_file& file, const std::string& step_dir);
// The files this machine can read, in rank order: a file in a directory local to a host (one with
// a host and dir) that is not on this machine is left out, for the process that reads it there.
std::vector<const checkpoint_file*> files_here_by_rank(const checkpoint_manifest& m);

// verify_file for every file in rank order, but a file in a directory local to a host (one with
// a host and dir) that is not on this machine is left to the process that reads it, which checks
// it then; the first failure.
status verify_files(const checkpoint_manifest& m, const std::string& step_dir);

}  // namespace pipeworks
