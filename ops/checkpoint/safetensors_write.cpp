// safetensors writing: header JSON, 8-byte alignment padding, then data, written to a temporary
// file that is fsynced and renamed into place.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "ops/checkpoint/safetensors.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this writer copies memory as it is");

namespace pipeworks {
namespace {

template <class T>
safetensors_entry make_entry(std::string name, shape_t shape, std::span<const T> data) {
  return {std::move(name), std::move(shape), dtype_of<T>(),
          reinterpret_cast<const std::byte*>(data.data()), data.size_bytes()};
}

std::string errno_text() { return std::strerror(errno); }

status write_all(int fd, const void* data, std::size_t n, const std::string& tmp) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return make_error("cannot write checkpoint " + tmp + ": " + errno_text());
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

result<std::string> build_header(std::span<const safetensors_entry> entries,
                                  const metadata_map& metadata) {
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  if (!meta.contains("format")) meta["format"] = "pt";
  header["__metadata__"] = meta;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    if (e.name.empty() || e.name == "__metadata__")
      return make_error("cannot save a tensor named '" + e.name + "'");
    if (!seen.insert(e.name).second)
      return make_error("cannot save checkpoint: tensor " + e.name + " appears twice");
    for (auto d : e.shape)
      if (d < 0)
        return make_error("cannot save tensor " + e.name + ": negative dimension in shape " +
                          shape_string(e.shape));
    const auto want = static_cast<std::size_t>(numel(e.shape)) * dtype_size(e.type);
    if (e.nbytes != want)
      return make_error("cannot save tensor " + e.name + ": shape " + shape_string(e.shape) +
                        " needs " + std::to_string(want) + " bytes of " +
                        std::string(dtype_name(e.type)) + " but " + std::to_string(e.nbytes) +
                        " were given");
    if (e.nbytes > 0 && e.data == nullptr)
      return make_error("cannot save tensor " + e.name + ": no data");
    header[e.name] = {{"dtype", dtype_name(e.type)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string text = header.dump();
  // The safetensors library pads the header with spaces so the data starts 8-byte aligned.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

}  // namespace

safetensors_entry entry_of(std::string name, const tensor& t) {
  return {std::move(name), t.shape(), t.type(), t.bytes(), t.nbytes()};
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const float> data) {
  return make_entry(std::move(name), std::move(shape), data);
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const double> data) {
  return make_entry(std::move(name), std::move(shape), data);
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const std::int32_t> data) {
  return make_entry(std::move(name), std::move(shape), data);
}

status save_safetensors(const std::string& path, std::span<const safetensors_entry> entries,
                        const metadata_map& metadata) {
  auto header = build_header(entries, metadata);
  if (!header) return header.err();

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  static std::atomic<int> counter{0};
  // A hidden sibling: ".NAME.tmp.PID.N" (built with append; GCC 12 warns falsely on "." + s).
  std::string tmp_name(1, '.');
  tmp_name.append(target.filename().string())
      .append(".tmp.")
      .append(std::to_string(::getpid()))
      .append(".")
      .append(std::to_string(counter++));
  const std::string tmp = (dir / tmp_name).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error("cannot create checkpoint file " + tmp + " (for " + path +
                      "): " + errno_text());

  auto fail = [&](status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  unsigned char len[8];
  std::uint64_t n = header->size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  if (auto s = write_all(fd, len, 8, tmp); !s) return fail(s);
  if (auto s = write_all(fd, header->data(), header->size(), tmp); !s) return fail(s);
  for (const auto& e : entries)
    if (auto s = write_all(fd, e.data, e.nbytes, tmp); !s) return fail(s);
  if (::fsync(fd) != 0)
    return fail(make_error("cannot fsync checkpoint " + tmp + ": " + errno_text()));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return make_error("cannot close checkpoint " + tmp + ": " + errno_text());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    return make_error("cannot rename checkpoint " + tmp + " to " + path + ": " + why);
  }
  // Make the rename itself durable.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace pipeworks
