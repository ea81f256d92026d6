// manifest.json: writing it in a fixed field order, reading it with every field checked and
// named in the messages, and checking the files it lists by size and sha256.
#include "runtime/checkpoint/manifest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <filesystem>
#include <map>
#include <span>

#include "base/json_read.hpp"
#include "base/sha256.hpp"

namespace pipeworks {
namespace {

using json = nlohmann::json;

// A value as a message quotes it, cut short when long (a plan can be pages of JSON).
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Reads the fields of one JSON object; messages are "<prefix><where>.<key> ...", with where
// "" for the top level and "files[2]" for a file.
struct object_reader {
  const json& j;
  std::string prefix;  // "<source>: "
  std::string where;

  std::string name(const char* key) const { return where.empty() ? key : where + "." + key; }

  result<const json*> get(const char* key) const {
    const auto it = j.find(key);
    if (it == j.end())
      return make_error(prefix + "missing field \"" + name(key) + "\"");
    return &*it;
  }
  // A JSON integer >= 0 (a fraction, a negative number or a string is refused).
  result<std::uint64_t> count(const char* key, std::uint64_t max) const {
    auto v = get(key);
    if (!v) return v.err();
    if (!(*v)->is_number_unsigned() || (*v)->get<std::uint64_t>() > max)
      return make_error(prefix + name(key) + " must be a whole number in 0.." +
                        std::to_string(max) + ", not " + shown(**v));
    return (*v)->get<std::uint64_t>();
  }
  result<std::string> string(const char* key) const {
    auto v = get(key);
    if (!v) return v.err();
    if (!(*v)->is_string()) return make_error(prefix + name(key) + " must be a string, not " + shown(**v));
    return (*v)->get<std::string>();
  }
  result<json> object(const char* key) const {
    auto v = get(key);
    if (!v) return v.err();
    if (!(*v)->is_object())
      return make_error(prefix + name(key) + " must be a JSON object, not " + shown(**v));
    return **v;
  }
};

constexpr std::uint64_t max_int64 = std::uint64_t{1} << 62;  // steps, positions, bytes
constexpr std::uint64_t max_rank = (std::uint64_t{1} << 31) - 1;

bool is_hex_digest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// A plain file name in the step directory: not empty or ".", no "/" (so not absolute), no "..".
bool is_plain_name(const std::string& p) {
  return !p.empty() && p != "." && p.find('/') == std::string::npos &&
         p.find("..") == std::string::npos && p.find('\0') == std::string::npos;
}

result<checkpoint_file> parse_file(const json& j, const std::string& prefix, std::size_t i) {
  const std::string where = "files[" + std::to_string(i) + "]";
  if (!j.is_object()) return make_error(prefix + where + " must be a JSON object, not " + shown(j));
  PW_TRY(only_keys(j, prefix, where, {"rank", "path", "bytes", "sha256", "host", "dir"}));
  const object_reader r{j, prefix, where};
  checkpoint_file f;
  auto rank = r.count("rank", max_rank);
  if (!rank) return rank.err();
  f.rank = static_cast<int>(*rank);
  auto path = r.string("path");
  if (!path) return path.err();
  if (!is_plain_name(*path))
    return make_error(prefix + where + ".path must be a file name in the step directory (not " +
                      "absolute, no \"/\" or \"..\"), not " + shown(json(*path)));
  f.path = std::move(*path);
  auto bytes = r.count("bytes", max_int64);
  if (!bytes) return bytes.err();
  f.bytes = *bytes;
  auto digest = r.string("sha256");
  if (!digest) return digest.err();
  if (!is_hex_digest(*digest))
    return make_error(prefix + where + ".sha256 must be 64 hexadecimal digits, not " +
                      shown(json(*digest)));
  for (char& c : *digest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  f.sha256 = std::move(*digest);
  if (j.contains("host") || j.contains("dir")) {  // a file in a directory local to a host
    auto host = r.string("host");
    if (!host) return host.err();
    auto dir = r.string("dir");
    if (!dir) return dir.err();
    if (host->empty() || host->find('\0') != std::string::npos)
      return make_error(prefix + where + ".host must name the host that holds the file, not " +
                        shown(json(*host)));
    if (dir->empty() || dir->front() != '/' || dir->find('\0') != std::string::npos)
      return make_error(prefix + where + ".dir must be an absolute directory on " + *host +
                        ", not " + shown(json(*dir)));
    f.host = std::move(*host);
    f.dir = std::move(*dir);
  }
  return f;
}

// Ranks 0..n-1 each exactly once, and no two ranks sharing a file.
status check_ranks(const std::vector<checkpoint_file>& files, const std::string& prefix) {
  const std::size_t n = files.size();
  std::map<int, std::size_t> by_rank;
  std::map<std::string, std::size_t> by_path;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = "files[" + std::to_string(i) + "]";
    if (auto [it, fresh] = by_rank.emplace(files[i].rank, i); !fresh)
      return make_error(prefix + at + ".rank " + std::to_string(files[i].rank) +
                        " appears twice (also files[" + std::to_string(it->second) +
                        "].rank); each rank has exactly one file");
    if (auto [it, fresh] = by_path.emplace(files[i].dir + "/" + files[i].path, i); !fresh)
      return make_error(prefix + at + ".path \"" + files[i].path + "\" is also files[" +
                        std::to_string(it->second) + "].path; each rank has a file of its own");
  }
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<std::size_t>(files[i].rank) >= n) {
      int missing = 0;
      while (by_rank.count(missing)) ++missing;
      return make_error(prefix + "files has no entry for rank " + std::to_string(missing) +
                        " (files[" + std::to_string(i) + "].rank is " +
                        std::to_string(files[i].rank) + "); " + std::to_string(n) +
                        " files must hold ranks 0.." + std::to_string(n - 1) +
                        ", each exactly once");
    }
  return {};
}

}  // namespace

namespace {

// The manifest's fields in their fixed order, without manifest_sha256.
nlohmann::ordered_json content_of(const checkpoint_manifest& m) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const checkpoint_file& f : m.files) {
    files.push_back({{"rank", f.rank}, {"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    if (!f.dir.empty()) {
      files.back()["host"] = f.host;
      files.back()["dir"] = f.dir;
    }
  }
  auto opaque = [](const json& j) {
    return j.is_null() ? nlohmann::ordered_json::object() : nlohmann::ordered_json(j);
  };
  nlohmann::ordered_json out = {{"format", checkpoint_format},
                                {"version", m.format_version},
                                {"step", m.step},
                                {"data_position", m.data_position},
                                {"plan", opaque(m.plan)},
                                {"rng", opaque(m.rng)},
                                {"metrics", opaque(m.metrics)}};
  if (m.data) out["data"] = record_json(*m.data);
  if (!m.restart.is_null()) out["restart"] = nlohmann::ordered_json(m.restart);
  out["files"] = std::move(files);
  return out;
}

std::string digest_of(const nlohmann::ordered_json& content) {
  const std::string text = content.dump(2) + "\n";
  sha256 h;
  h.update(std::as_bytes(std::span(text.data(), text.size())));
  return h.hex_digest();
}

}  // namespace

std::string manifest_digest(const checkpoint_manifest& m) { return digest_of(content_of(m)); }

std::string to_json(const checkpoint_manifest& m) {
  nlohmann::ordered_json out = content_of(m);
  out["manifest_sha256"] = digest_of(out);
  return out.dump(2) + "\n";
}

result<checkpoint_manifest> parse_manifest(std::string_view text, const std::string& source) {
  auto parsed = parse_json(text, source);
  if (!parsed) return parsed.err();
  const json& j = *parsed;
  const std::string prefix = source + ": ";
  if (!j.is_object()) return make_error(prefix + "the manifest must be a JSON object, not " + shown(j));
  PW_TRY(only_keys(j, prefix, "the manifest",
                   {"format", "version", "step", "data_position", "plan", "rng", "metrics", "data",
                    "restart", "files", "manifest_sha256"}));
  const object_reader r{j, prefix, ""};
  auto format = r.string("format");
  if (!format) return format.err();
  if (*format != checkpoint_format)
    return make_error(prefix + "format is " + shown(json(*format)) + ", not \"" + checkpoint_format +
                      "\": this is not a pipeworks checkpoint manifest");
  auto version = r.count("version", max_rank);
  if (!version) return version.err();
  if (*version == 1)
    return make_error(prefix + "version 1 is an older checkpoint format, written before a manifest "
                      "carried the sha256 of its own content and the fingerprint of its data; this "
                      "pipeworks reads checkpoint version " +
                      std::to_string(checkpoint_format_version) + " only: resume it with the "
                      "pipeworks that wrote it, or start the run again");
  if (*version != checkpoint_format_version)
    return make_error(prefix + "version " + std::to_string(*version) +
                      " is not supported; this pipeworks reads checkpoint version " +
                      std::to_string(checkpoint_format_version));
  checkpoint_manifest m;
  m.format_version = static_cast<int>(*version);
  auto step = r.count("step", max_int64);
  if (!step) return step.err();
  m.step = static_cast<std::int64_t>(*step);
  auto position = r.count("data_position", max_int64);
  if (!position) return position.err();
  m.data_position = static_cast<std::int64_t>(*position);
  const std::initializer_list<std::pair<const char*, json*>> opaque = {
      {"plan", &m.plan}, {"rng", &m.rng}, {"metrics", &m.metrics}};
  for (auto [key, out] : opaque) {
    auto v = r.object(key);
    if (!v) return v.err();
    *out = std::move(*v);
  }
  if (j.contains("data")) {
    auto data = parse_record(j["data"], prefix, "data");
    if (!data) return data.err();
    m.data = std::move(*data);
  }
  if (j.contains("restart")) {
    auto restart = r.object("restart");
    if (!restart) return restart.err();
    m.restart = std::move(*restart);
  }
  auto files = r.get("files");
  if (!files) return files.err();
  if (!(*files)->is_array() || (*files)->empty())
    return make_error(prefix + "files must be a non-empty array of {\"rank\", \"path\", \"bytes\", "
                      "\"sha256\"}, one per rank, not " + shown(**files));
  for (std::size_t i = 0; i < (*files)->size(); ++i) {
    auto f = parse_file((**files)[i], prefix, i);
    if (!f) return f.err();
    m.files.push_back(std::move(*f));
  }
  PW_TRY(check_ranks(m.files, prefix));
  auto recorded = r.string("manifest_sha256");
  if (!recorded) return recorded.err();
  if (const std::string digest = manifest_digest(m); *recorded != digest)
    return make_error(prefix + "manifest_sha256 is " + recorded->substr(0, 64) + ", but the "
                      "manifest's content has sha256 " + digest + ": the manifest was edited or "
                      "is corrupt since pipeworks wrote it");
  return m;
}

const checkpoint_file& file_of_rank(const checkpoint_manifest& m, int rank) {
  for (const checkpoint_file& f : m.files)
    if (f.rank == rank) return f;
  throw pipeworks_error("the checkpoint of step " + std::to_string(m.step) + " lists no file of rank " +
                        std::to_string(rank));
}

std::string file_dir(const checkpoint_file& file, const std::string& step_dir) {
  return file.dir.empty() ? step_dir : file.dir;
}

status verify_file(const checkpoint_file& file, const std::string& step_dir) {
  const std::string path = (std::filesystem::path(file_dir(file, step_dir)) / file.path).string();
  const std::string rank = "rank " + std::to_string(file.rank);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT && !file.dir.empty())
      return make_error(path + " (" + rank + "'s file) is not on this machine: a worker on host " +
                        file.host + " wrote it into its own checkpoint directory. Place rank " +
                        std::to_string(file.rank) + " on a worker of that host (give it that " +
                        "worker's --checkpoint-dir), or copy the file to this path here");
    if (e == ENOENT)
      return make_error(path + " is missing (" + rank + "'s file in the manifest): the checkpoint "
                        "is incomplete or the file was removed after it was written");
    return make_error("cannot read " + path + " (" + rank + "): " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode))
    return make_error(path + " (" + rank + ") is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size != file.bytes)
    return make_error(path + ": bytes is " + std::to_string(size) + ", the manifest records " +
                      std::to_string(file.bytes) + "; the file is " +
                      (size < file.bytes ? "truncated" : "corrupt") +
                      " or was changed after the checkpoint was written");
  auto digest = sha256_file(path);
  if (!digest) return digest.err();
  if (*digest != file.sha256)
    return make_error(path + ": sha256 is " + *digest + ", the manifest records " + file.sha256 +
                      "; the file is corrupt or was changed after the checkpoint was written");
  return {};
}

std::vector<const checkpoint_file*> files_here_by_rank(const checkpoint_manifest& m) {
  std::vector<const checkpoint_file*> order;
  for (const auto& f : m.files) {
    std::error_code ec;
    if (f.dir.empty() || std::filesystem::exists(f.dir, ec)) order.push_back(&f);
  }
  std::sort(order.begin(), order.end(),
            [](const checkpoint_file* a, const checkpoint_file* b) { return a->rank < b->rank; });
  return order;
}

status verify_files(const checkpoint_manifest& m, const std::string& step_dir) {
  for (const checkpoint_file* f : files_here_by_rank(m))
    if (auto s = verify_file(*f, step_dir); !s) return s;
  return {};
}

}  // namespace pipeworks
