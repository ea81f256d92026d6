// Fingerprints of a run's data (a file or a directory's files), cached per process by what stat
// says of each file, their comparison in words, and their JSON in a manifest.
#include "runtime/checkpoint/data_fingerprint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "base/sha256.hpp"

namespace pipeworks {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// What stat says of one file; a fingerprint is computed again when any of it changed.
struct file_stat {
  std::string name;
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t inode = 0, device = 0;
  bool operator==(const file_stat&) const = default;
};

result<file_stat> stat_of(const std::string& path, std::string name) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return make_error("cannot read the data " + path + ": " + std::strerror(errno));
  return file_stat{std::move(name), static_cast<std::uint64_t>(st.st_size),
                   std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                   static_cast<std::uint64_t>(st.st_ino), static_cast<std::uint64_t>(st.st_dev)};
}

// The files of the data: the file itself (name ""), or a directory's regular files by name.
result<std::vector<file_stat>> files_of(const std::string& path, bool& directory) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    return make_error("the data " + path + " does not exist");
  directory = st.type() == fs::file_type::directory;
  std::vector<file_stat> out;
  if (!directory) {
    if (st.type() != fs::file_type::regular)
      return make_error("the data " + path + " is not a file or a directory");
    auto one = stat_of(path, "");
    if (!one) return one.err();
    out.push_back(std::move(*one));
    return out;
  }
  fs::directory_iterator it(path, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->status(type_ec).type() != fs::file_type::regular) continue;
    auto one = stat_of(it->path().string(), it->path().filename().string());
    if (!one) return one.err();
    out.push_back(std::move(*one));
  }
  if (ec) return make_error("cannot list the data directory " + path + ": " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const file_stat& a, const file_stat& b) { return a.name < b.name; });
  return out;
}

struct cached {
  std::vector<file_stat> stats;
  data_fingerprint fingerprint;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, cached>& cache() {
  static std::map<std::string, cached> c;
  return c;
}
std::map<std::string, data_record>& run_records() {
  static std::map<std::string, data_record> r;
  return r;
}

std::string absolute_of(const std::string& path) {
  std::error_code ec;
  const fs::path a = fs::absolute(path, ec);
  return (ec ? fs::path(path) : a).lexically_normal().string();
}

bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c));
         });
}

constexpr std::uint64_t max_count = std::uint64_t{1} << 62;

result<data_fingerprint> parse_fingerprint(const json& j, const std::string& prefix,
                                           const std::string& where, bool with_step) {
  auto name = [&](const char* key) { return prefix + where + "." + key; };
  if (!j.is_object()) return make_error(prefix + where + " must be a JSON object, not " + j.dump());
  std::initializer_list<const char*> keys = {"path", "bytes", "mtime_ns", "files", "sha256"};
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // a plain name: clang 14's lambdas cannot capture bindings
    const bool known = std::find_if(keys.begin(), keys.end(), [&](const char* k) { return key == k; }) != keys.end();
    if (!known && !(key == "replaced" && !with_step) && !(key == "step" && with_step))
      return make_error(prefix + where + " has an unknown field \"" + key + "\"");
  }
  for (const char* key : keys)
    if (!j.contains(key)) return make_error(prefix + "missing field \"" + where + "." + key + "\"");
  data_fingerprint f;
  if (!j["path"].is_string() || j["path"].get<std::string>().empty() ||
      j["path"].get<std::string>().front() != '/')
    return make_error(name("path") + " must be an absolute path, not " + j["path"].dump());
  f.path = j["path"].get<std::string>();
  for (auto [key, out] : {std::pair{"bytes", &f.bytes}, std::pair{"files", &f.files}}) {
    if (!j[key].is_number_unsigned() || j[key].get<std::uint64_t>() > max_count)
      return make_error(name(key) + " must be a whole number in 0..2^62, not " + j[key].dump());
    *out = j[key].get<std::uint64_t>();
  }
  if (!j["mtime_ns"].is_number_integer())
    return make_error(name("mtime_ns") + " must be a whole number, not " + j["mtime_ns"].dump());
  f.mtime_ns = j["mtime_ns"].get<std::int64_t>();
  if (!j["sha256"].is_string() || !is_hex_digest(j["sha256"].get<std::string>()))
    return make_error(name("sha256") + " must be 64 lowercase hexadecimal digits, not " +
                      j["sha256"].dump());
  f.sha256 = j["sha256"].get<std::string>();
  return f;
}

nlohmann::ordered_json fingerprint_json(const data_fingerprint& f) {
  return {{"path", f.path}, {"bytes", f.bytes}, {"mtime_ns", f.mtime_ns}, {"files", f.files},
          {"sha256", f.sha256}};
}

}  // namespace

result<data_fingerprint> fingerprint_data(const std::string& given) {
  const std::string path = absolute_of(given);
  bool directory = false;
  auto stats = files_of(path, directory);
  if (!stats) return stats.err();
  {
    std::lock_guard lock(cache_mutex());
    auto it = cache().find(path);
    if (it != cache().end() && it->second.stats == *stats) return it->second.fingerprint;
  }
  data_fingerprint f;
  f.path = path;
  f.files = stats->size();
  sha256 listing;
  for (const file_stat& s : *stats) {
    f.bytes += s.bytes;
    f.mtime_ns = std::max(f.mtime_ns, s.mtime_ns);
    auto digest = sha256_file(directory ? (fs::path(path) / s.name).string() : path);
    if (!digest) return digest.err();
    if (!directory) {
      f.sha256 = *digest;
      break;
    }
    const std::string line = s.name + '\0' + std::to_string(s.bytes) + '\0' + *digest + '\n';
    listing.update(std::as_bytes(std::span(line.data(), line.size())));
  }
  if (directory) f.sha256 = listing.hex_digest();
  // Read again: a file that changed while it was hashed is not cached as what it now is.
  bool again_directory = false;
  auto after = files_of(path, again_directory);
  if (after && *after == *stats) {
    std::lock_guard lock(cache_mutex());
    cache()[path] = cached{std::move(*stats), f};
  }
  return f;
}

std::string data_changes(const data_fingerprint& was, const data_fingerprint& now) {
  std::vector<std::string> parts;
  if (!same_file(was.path, now.path))
    parts.push_back("its path is " + now.path + ", the checkpoint's was " + was.path);
  if (now.files != was.files)
    parts.push_back("it holds " + std::to_string(now.files) + " files, the checkpoint's held " +
                    std::to_string(was.files));
  if (now.bytes != was.bytes)
    parts.push_back("its size is " + std::to_string(now.bytes) + " bytes, the checkpoint's was " +
                    std::to_string(was.bytes));
  if (now.sha256 != was.sha256)
    parts.push_back("its sha256 is " + now.sha256 + ", the checkpoint's was " + was.sha256);
  if (parts.empty()) return "";
  if (now.mtime_ns != was.mtime_ns)
    parts.push_back("its modification time changed (" + std::to_string(now.mtime_ns) +
                    " ns since 1970, the checkpoint's was " + std::to_string(was.mtime_ns) + ")");
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

nlohmann::ordered_json record_json(const data_record& r) {
  nlohmann::ordered_json out = fingerprint_json(r.fingerprint);
  if (r.replaced) {
    out["replaced"] = fingerprint_json(*r.replaced);
    out["replaced"]["step"] = r.replaced_at;
  }
  return out;
}

result<data_record> parse_record(const json& j, const std::string& prefix, const std::string& where) {
  data_record r;
  auto f = parse_fingerprint(j, prefix, where, false);
  if (!f) return f.err();
  r.fingerprint = std::move(*f);
  if (j.contains("replaced")) {
    const json& rep = j["replaced"];
    auto was = parse_fingerprint(rep, prefix, where + ".replaced", true);
    if (!was) return was.err();
    if (!rep.contains("step") || !rep["step"].is_number_unsigned() ||
        rep["step"].get<std::uint64_t>() > max_count)
      return make_error(prefix + where + ".replaced.step must be a whole number in 0..2^62, not " +
                        (rep.contains("step") ? rep["step"].dump() : std::string("missing")));
    r.replaced = std::move(*was);
    r.replaced_at = rep["step"].get<std::int64_t>();
  }
  return r;
}

void set_run_data(const std::string& checkpoint_dir, std::optional<data_record> r) {
  std::lock_guard lock(cache_mutex());
  if (r) run_records()[absolute_of(checkpoint_dir)] = std::move(*r);
  else run_records().erase(absolute_of(checkpoint_dir));
}

std::optional<data_record> run_data(const std::string& checkpoint_dir) {
  std::lock_guard lock(cache_mutex());
  auto it = run_records().find(absolute_of(checkpoint_dir));
  if (it == run_records().end()) return std::nullopt;
  return it->second;
}

}  // namespace pipeworks
