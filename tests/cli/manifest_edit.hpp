// Test helper: edits a checkpoint's manifest.json as a user with a text editor and a sha256 tool
// would, keeping its field order, and writes it back with or without its own sha256 made to match.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "base/sha256.hpp"
#include "run_cli.hpp"

namespace pipeworks::cli_test {

// The manifest at path after `edit`; with reseal, manifest_sha256 is the sha256 of the rest (as
// pipeworks computes it), so only checks of the content itself can find the edit.
inline void edit_manifest(const std::string& path, const std::function<void(nlohmann::ordered_json&)>& edit,
                          bool reseal) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_file(path));
  edit(j);
  j.erase("manifest_sha256");
  const std::string content = j.dump(2) + "\n";
  pipeworks::sha256 h;
  h.update(std::as_bytes(std::span(content.data(), content.size())));
  j["manifest_sha256"] = reseal ? h.hex_digest() : std::string(64, '0');
  write_file(path, j.dump(2) + "\n");
}

}  // namespace pipeworks::cli_test
